"""Emitting torch tensors through the real arclight_worker package into a real frame ring.

    python3 python/checks/torch_emit_check.py            # from the repository root; no other setup

For each size (720p, 1080p) and format (RGB H×W×3, RGBA H×W×4, I420 planes) it builds a uint8
tensor on the GPU (``cuda:0``), returns it from a model's ``generate`` through the package's own
worker step (``Worker.step``: the slot is chosen, ``torch.from_numpy(slot).copy_(tensor)`` copies
device→host straight into shared memory), then reads the slot back the way the runtime does —
``os.pread`` on the ring's descriptor, not through the mapping — and checks the bytes equal
``tensor.cpu()`` exactly. It also returns a CUDA tensor with a non-contiguous layout (a CHW
permute) and a float tensor, which must be copied correctly and refused with a clear TypeError.

Needs only the Python standard library, numpy and torch. Without torch it prints
"torch not available" and exits 0; with torch but no CUDA device it checks CPU tensors (the same
code path, minus the device copy) and says so. Exit status 1 on any mismatch.
"""

from __future__ import annotations

import os
import struct
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch
except ImportError:
    print("torch not available")
    sys.exit(0)

import numpy as np

from arclight_worker import I420, Model
from arclight_worker._frames import frame_bytes
from arclight_worker._ring import FrameRing, LAYOUT_VERSION, MAGIC
from arclight_worker._worker import Worker

HEADER = 4096
SIZES = [(1280, 720), (1920, 1080)]


def make_ring(slots: int, slot_bytes: int) -> int:
    """The runtime's ring, made the way runtime/python/frame-ring.ts makes it: tmpfs, unlinked at once."""
    directory = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    fd, path = tempfile.mkstemp(prefix="arclight-ring-check-", dir=directory)
    os.unlink(path)
    slot_bytes = -(-slot_bytes // 4096) * 4096
    os.ftruncate(fd, HEADER + slots * slot_bytes)
    os.pwrite(fd, struct.pack("<8sIIQQ", MAGIC, LAYOUT_VERSION, slots, slot_bytes, HEADER), 0)
    return fd


class Channel:
    def __init__(self) -> None:
        self.sent: List[Dict[str, Any]] = []

    def send(self, message: Dict[str, Any]) -> None:
        self.sent.append(message)


def main() -> int:
    cuda = torch.cuda.is_available()
    device = torch.device("cuda:0" if cuda else "cpu")
    print(f"torch {torch.__version__}, numpy {np.__version__}, device {torch.cuda.get_device_name(0) if cuda else 'cpu (CUDA not available: CPU tensors only)'}")
    width, height = SIZES[-1]
    fd = make_ring(slots=2, slot_bytes=width * height * 4)
    ring = FrameRing(fd)
    model = Model()
    pending: Dict[str, Any] = {}

    @model.generate
    def generate(session: Any, step: Any) -> Any:
        return pending["value"]

    worker = Worker(model, Channel(), ring, rank=0, world_size=1)  # type: ignore[arg-type]
    worker.handle({"type": "session_start", "session": "check"})
    failures = 0
    index = 0

    def emit(value: Any, expected: np.ndarray, label: str, w: int, h: int, fmt: str) -> None:
        nonlocal failures, index
        pending["value"] = value
        if cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        reply = worker.step({"type": "step", "session": "check", "index": index, "width": w, "height": h, "inputs": {}, "outputs": [1], "slices": False})
        took_ms = (time.perf_counter() - started) * 1000
        index += 1
        frame = reply["frames"][0]
        length = frame_bytes(w, h, fmt)
        read = os.pread(fd, length, HEADER + frame["slot"] * ring.slot_bytes)
        ok = frame["format"] == fmt and (frame["width"], frame["height"]) == (w, h) and read == expected.tobytes()
        failures += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {label:<34} {w}x{h} {fmt:<4} {length / 2**20:6.2f} MiB  step {took_ms:7.2f} ms")

    generator = torch.Generator(device=device).manual_seed(28)
    for w, h in SIZES:
        for channels, fmt in ((3, "rgb"), (4, "rgba")):
            tensor = torch.randint(0, 256, (h, w, channels), dtype=torch.uint8, device=device, generator=generator)
            emit(tensor, tensor.cpu().numpy(), f"{device.type} tensor H×W×{channels}", w, h, fmt)
        y = torch.randint(0, 256, (h, w), dtype=torch.uint8, device=device, generator=generator)
        u = torch.randint(0, 256, (h // 2, w // 2), dtype=torch.uint8, device=device, generator=generator)
        v = torch.randint(0, 256, (h // 2, w // 2), dtype=torch.uint8, device=device, generator=generator)
        expected = np.concatenate([y.cpu().numpy().ravel(), u.cpu().numpy().ravel(), v.cpu().numpy().ravel()])
        emit(I420(y, u, v), expected, f"{device.type} I420 planes", w, h, "i420")
        chw = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, device=device, generator=generator)
        hwc = chw.permute(1, 2, 0)  # not contiguous
        emit(hwc, hwc.cpu().contiguous().numpy(), f"{device.type} permuted CHW→HWC (strided)", w, h, "rgb")

    pending["value"] = torch.rand((h, w, 3), device=device)
    try:
        worker.step({"type": "step", "session": "check", "index": index, "width": w, "height": h, "inputs": {}, "outputs": [1], "slices": False})
        print("FAIL a float tensor was accepted")
        failures += 1
    except TypeError as error:
        print(f"ok   a float tensor is refused: {error}")

    print("torch emit check: " + ("all bytes equal" if failures == 0 else f"{failures} mismatches"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
