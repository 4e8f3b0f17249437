"""The shared-memory frame ring, as the worker sees it.

The runtime creates a file on tmpfs (/dev/shm), unlinks it at once and hands its descriptor to
every rank (ARCLIGHT_RING_FD). Layout (little endian), written by runtime/python/frame-ring.ts:

    0   8 bytes  magic b"ARCLRING"
    8   u32      layout version (1)
    12  u32      slot count
    16  u64      slot size in bytes (a multiple of 4096)
    24  u64      offset of slot 0 (4096)

Slot ``i`` spans ``[offset + i * slot_size, offset + (i + 1) * slot_size)``. Which slot holds what
is decided per request over the control socket; nothing in the ring itself is a lock.
"""

from __future__ import annotations

import mmap
import struct
from typing import Tuple

import numpy as np
import numpy.typing as npt

MAGIC = b"ARCLRING"
LAYOUT_VERSION = 1
_HEADER = struct.Struct("<8sIIQQ")


class FrameRing:
    """A mapping of the runtime's ring: numpy views of its slots, without copies."""

    def __init__(self, fd: int) -> None:
        header = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ)
        try:
            magic, version, slots, slot_bytes, offset = _HEADER.unpack_from(header, 0)
        finally:
            header.close()
        if magic != MAGIC or version != LAYOUT_VERSION:
            raise RuntimeError(f"the frame ring's header is not layout {LAYOUT_VERSION} (magic {magic!r}, version {version})")
        self.slot_count: int = slots
        self.slot_bytes: int = slot_bytes
        self.offset: int = offset
        self._map = mmap.mmap(fd, offset + slots * slot_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._bytes: npt.NDArray[np.uint8] = np.frombuffer(self._map, dtype=np.uint8)

    def slot(self, index: int, length: int) -> npt.NDArray[np.uint8]:
        """The first ``length`` bytes of slot ``index``: a writable flat uint8 view into shared memory."""
        if not 0 <= index < self.slot_count:
            raise IndexError(f"slot {index} is outside the ring (0..{self.slot_count - 1})")
        if length > self.slot_bytes:
            raise ValueError(f"{length} bytes do not fit a slot of {self.slot_bytes} bytes")
        start = self.offset + index * self.slot_bytes
        return self._bytes[start : start + length]

    def address_range(self, index: int) -> Tuple[int, int]:
        """Where slot ``index`` lies in this process's memory: [start, end) addresses."""
        base = int(self._bytes.__array_interface__["data"][0]) + self.offset + index * self.slot_bytes
        return base, base + self.slot_bytes
