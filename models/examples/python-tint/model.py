"""python-tint: the inference of the python-tint example, in numpy.

With a webcam: the picture scaled to the output, tinted — its luma coloured by the tint, mixed
with the original by ``strength``. Without one: a moving interference pattern in the tint's colour.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from arclight_worker import LoadContext, Model, Session, Step

model = Model()
_grid: Dict[str, Any] = {}


def parse_colour(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.float32)


@model.load
def load(ctx: LoadContext) -> None:
    ctx.progress(0.5, "numpy ready")


@model.on_session_start
def start(session: Session) -> None:
    session.state.update(tint="#ff8800", strength=0.5, input_seen=False)


@model.command(
    "set_tint",
    description="The tint's colour (#rrggbb) and how strongly it colours the picture (0 = the webcam as it is).",
    params={
        "type": "object",
        "properties": {
            "color": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"},
            "strength": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
        },
        "required": ["color"],
        "additionalProperties": False,
    },
    reply_type="tint_changed",
)
def set_tint(session: Session, params: Dict[str, Any]) -> Dict[str, Any]:
    session.state["tint"] = params["color"].lower()
    session.state["strength"] = float(params["strength"])
    session.log.info("tint changed", color=session.state["tint"], strength=session.state["strength"])
    return {"color": session.state["tint"], "strength": session.state["strength"]}


def _scale_indices(src: int, dst: int) -> np.ndarray:
    """Nearest-neighbour source index for each destination index."""
    return np.minimum((np.arange(dst) * src) // dst, src - 1)


def tint(rgb: np.ndarray, colour: np.ndarray, strength: float, out: np.ndarray) -> None:
    """out = (1 - s) · rgb + s · luma(rgb) · colour / 255, rounded; uint8 in, uint8 out."""
    if strength == 0:
        out[:] = rgb
        return
    pixels = rgb.astype(np.float32)
    luma = pixels @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    coloured = luma[..., None] * (colour / 255.0)
    np.clip(np.rint((1 - strength) * pixels + strength * coloured), 0, 255, out=pixels)
    out[:] = pixels.astype(np.uint8)


def pattern(step: Step, colour: np.ndarray, out: np.ndarray) -> None:
    key = (step.width, step.height)
    if _grid.get("key") != key:
        ys, xs = np.mgrid[0 : step.height, 0 : step.width].astype(np.float32)
        _grid.update(key=key, x=xs / step.width, y=ys / step.height)
    t = step.index / 30.0
    x, y = _grid["x"], _grid["y"]
    wave = np.sin(12 * x + 2 * t) + np.sin(9 * y - 1.5 * t) + np.sin(10 * (x + y) + t)
    level = ((wave + 3) / 6)[..., None]
    out[:] = np.clip(level * colour, 0, 255).astype(np.uint8)


@model.generate
def generate(session: Session, step: Step) -> Any:
    out = step.frame("rgb")  # the shared slot itself: written in place, no copy
    colour = parse_colour(session.state["tint"])
    cam = step.input("webcam")
    if cam is None:
        pattern(step, colour, out)
        return out
    if not session.state["input_seen"]:
        session.state["input_seen"] = True
        session.broadcast("input_started", {"width": cam.width, "height": cam.height})
    rgb = cam.array[..., :3]
    if (cam.width, cam.height) != (step.width, step.height):
        rgb = rgb[_scale_indices(cam.height, step.height)][:, _scale_indices(cam.width, step.width)]
    tint(rgb, colour, session.state["strength"], out)
    return out
