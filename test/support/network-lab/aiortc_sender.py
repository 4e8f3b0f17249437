"""aiortc reference sender for the network lab (test/support/network-lab/aiortc-reference.ts).

Signalling on stdin/stdout, one JSON object a line: it reads the receiver's offer
{"type": "offer", "sdp": ...}, answers {"type": "answer", "sdp": ...} (every candidate in it:
aiortc does not trickle), then for each frame it hands to its encoder prints
{"emit": <16-bit frame id>, "t": <epoch ms>}. The picture: scrolling colour bars (or, with
--picture grain, fresh luma noise every frame) and the 16-cell
frame stamp of models/examples/shared/i420-canvas.ts (16 px cells, LSB first, luma 235/16) at the
place bench/support/pictures.ts puts it, so the lab's receiver reads it with the same code.

Runs on Debian's python3-aiortc (1.4). Run it inside the test's network namespace: aioice binds
every non-loopback IPv4 address it finds, and there the only one is the namespace's.
"""

import argparse
import asyncio
import fractions
import json
import sys
import time

import numpy as np
from aiortc import RTCPeerConnection, RTCSessionDescription, VideoStreamTrack
from av import VideoFrame

BARS_RGB = [(192, 192, 192), (192, 192, 0), (0, 192, 192), (0, 192, 0), (192, 0, 192), (192, 0, 0), (0, 0, 192), (32, 32, 32)]


def yuv(r, g, b):
    return (
        round(16 + 0.257 * r + 0.504 * g + 0.098 * b),
        round(128 - 0.148 * r - 0.291 * g + 0.439 * b),
        round(128 + 0.439 * r - 0.368 * g - 0.071 * b),
    )


class StampedBars(VideoStreamTrack):
    def __init__(self, width, height, fps, grain):
        super().__init__()
        self.width, self.height, self.fps = width, height, fps
        # grain: a luma plane of fresh noise (128 ± 24) every frame, as bench/support/pictures.ts
        # draws it: no encoder can predict it, so the rate control spends its whole budget.
        self.rng = np.random.default_rng(42)
        self.pool = self.rng.integers(104, 153, size=4 << 20, dtype=np.uint8) if grain else None
        self.frame = 0
        bar = width // len(BARS_RGB)
        y = np.zeros((height, width), np.uint8)
        u = np.zeros((height // 2, width // 2), np.uint8)
        v = np.zeros((height // 2, width // 2), np.uint8)
        for i, rgb in enumerate(BARS_RGB):
            cy, cu, cv = yuv(*rgb)
            y[:, i * bar:(i + 1) * bar] = cy
            u[:, i * bar // 2:(i + 1) * bar // 2] = cu
            v[:, i * bar // 2:(i + 1) * bar // 2] = cv
        self.planes = (y, u, v)
        self.stamp = (2 * round(40 * width / 1280 / 2), 2 * round(280 * height / 720 / 2))
        self.start = None

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        due = self.start + self.frame / self.fps
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        shift = (self.frame * 4 * self.width // 1280) % self.width
        y, u, v = (np.roll(p, shift * p.shape[1] // self.width, axis=1) for p in self.planes)
        if self.pool is not None:
            at = int(self.rng.integers(0, self.pool.size - y.size))
            y = self.pool[at:at + y.size].reshape(y.shape).copy()
        sx, sy = self.stamp
        ident = self.frame & 0xFFFF
        for bit in range(16):
            y[sy:sy + 16, sx + bit * 16:sx + bit * 16 + 16] = 235 if (ident >> bit) & 1 else 16
            u[sy // 2:sy // 2 + 8, (sx + bit * 16) // 2:(sx + bit * 16) // 2 + 8] = 128
            v[sy // 2:sy // 2 + 8, (sx + bit * 16) // 2:(sx + bit * 16) // 2 + 8] = 128
        data = np.concatenate([y.reshape(-1), u.reshape(-1), v.reshape(-1)]).reshape(self.height * 3 // 2, self.width)
        frame = VideoFrame.from_ndarray(data, format="yuv420p")
        frame.pts = int(self.frame * 90000 / self.fps)
        frame.time_base = fractions.Fraction(1, 90000)
        self.frame += 1
        print(json.dumps({"emit": ident, "t": time.time() * 1000}), flush=True)
        return frame


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--fps", type=float, default=30)
    parser.add_argument("--picture", choices=["pattern", "grain"], default="pattern")
    args = parser.parse_args()
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, sys.stdin.readline)
    offer = json.loads(line)
    pc = RTCPeerConnection()
    pc.addTrack(StampedBars(args.width, args.height, args.fps, args.picture == "grain"))
    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type=offer["type"]))
    await pc.setLocalDescription(await pc.createAnswer())
    print(json.dumps({"type": pc.localDescription.type, "sdp": pc.localDescription.sdp}), flush=True)
    # Until stdin closes (the test ends it).
    await loop.run_in_executor(None, sys.stdin.read)
    await pc.close()


asyncio.run(main())
