"""Frames: what a model hands back (numpy arrays, torch tensors, I420 planes) and how each is
written into a ring slot."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

PixelFormat = Literal["rgb", "rgba", "i420"]
U8 = npt.NDArray[np.uint8]


def frame_bytes(width: int, height: int, fmt: str) -> int:
    """Bytes of a tightly packed frame."""
    if fmt == "rgb":
        return width * height * 3
    if fmt == "rgba":
        return width * height * 4
    if fmt == "i420":
        return width * height + 2 * ((width + 1) // 2) * ((height + 1) // 2)
    raise ValueError(f"unknown pixel format {fmt!r} (rgb, rgba or i420)")


@dataclass(frozen=True)
class I420:
    """An I420 frame as three planes: ``y`` (H×W), ``u`` and ``v`` (H/2×W/2), uint8."""

    y: U8
    u: U8
    v: U8

    @property
    def width(self) -> int:
        return int(self.y.shape[1])

    @property
    def height(self) -> int:
        return int(self.y.shape[0])


def i420_planes(flat: U8, width: int, height: int) -> I420:
    """Views of a packed I420 buffer's planes (no copy)."""
    cw, ch = (width + 1) // 2, (height + 1) // 2
    luma = width * height
    return I420(
        y=flat[:luma].reshape(height, width),
        u=flat[luma : luma + cw * ch].reshape(ch, cw),
        v=flat[luma + cw * ch : luma + 2 * cw * ch].reshape(ch, cw),
    )


@dataclass(frozen=True)
class InputFrame:
    """A frame a client sent (a webcam), viewed in shared memory: read it, do not keep it past the step.

    ``array`` is H×W×4 for ``rgba`` input tracks; for ``i420`` it is the packed buffer and
    ``planes`` has the Y, U and V views.
    """

    width: int
    height: int
    format: PixelFormat
    array: U8

    @property
    def planes(self) -> I420:
        if self.format != "i420":
            raise ValueError(f"an {self.format} frame has no I420 planes")
        return i420_planes(self.array, self.width, self.height)


def describe(value: Any) -> Tuple[int, int, str]:
    """(width, height, format) of something a model returned as a frame; raises TypeError/ValueError."""
    if isinstance(value, I420):
        return value.width, value.height, "i420"
    shape = tuple(int(n) for n in value.shape)
    dtype = str(value.dtype)
    if dtype not in ("uint8", "torch.uint8"):
        raise TypeError(f"a frame must be uint8 (got {dtype}); scale and convert it first, e.g. (x * 255).clamp(0, 255).to(torch.uint8)")
    if len(shape) != 3 or shape[2] not in (3, 4):
        raise ValueError(f"a frame must be H×W×3 (rgb) or H×W×4 (rgba), got shape {shape}; I420 goes as arclight_worker.I420(y, u, v)")
    return shape[1], shape[0], "rgb" if shape[2] == 3 else "rgba"


def is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


def write_into(slot: U8, value: Union[U8, I420, Any]) -> None:
    """Copies a frame into a slot view of exactly its size: one copy (device→host for a CUDA tensor)."""
    if isinstance(value, I420):
        planes = [value.y, value.u, value.v]
        at = 0
        for plane in planes:
            n = int(np.prod(tuple(plane.shape)))
            if is_torch_tensor(plane):
                _copy_tensor(slot[at : at + n], plane)
            else:
                np.copyto(slot[at : at + n].reshape(plane.shape), plane, casting="no")
            at += n
        return
    if is_torch_tensor(value):
        _copy_tensor(slot, value)
        return
    np.copyto(slot.reshape(value.shape), value, casting="no")


def _copy_tensor(slot: U8, tensor: Any) -> None:
    """``torch.from_numpy(slot).copy_(tensor)``: a CUDA tensor goes device→host straight into shared memory."""
    torch: Any = importlib.import_module("torch")  # lazily: torch is optional (and untyped here)

    target = torch.from_numpy(slot).view(tuple(tensor.shape))
    target.copy_(tensor)  # strided sources too; blocking, so the bytes are in place when it returns


def data_address(value: Any) -> Optional[int]:
    """Where a numpy array's data starts (to spot a frame the model wrote in place), or None."""
    if isinstance(value, np.ndarray):
        return int(value.__array_interface__["data"][0])
    if isinstance(value, I420) and isinstance(value.y, np.ndarray):
        return int(value.y.__array_interface__["data"][0])
    return None
