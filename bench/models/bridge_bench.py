"""The Python half of bench/python-bridge.ts: the smallest model that still moves every byte —
the webcam frame copied into the output slot (one numpy copy, the same work as the in-process
twin's one copy), or the frame filled with a level set by command (the end-to-end probe)."""

from typing import Any, Dict

import numpy as np

from arclight_worker import Model, Session, Step

model = Model()


@model.command("set_level", params={"type": "object", "properties": {"value": {"type": "integer", "minimum": 0, "maximum": 255}}, "required": ["value"], "additionalProperties": False})
def set_level(session: Session, params: Dict[str, Any]) -> None:
    session.state["level"] = params["value"]


@model.generate
def generate(session: Session, step: Step) -> Any:
    out = step.frame("rgba")  # the output slot itself
    level = session.state.get("level")
    cam = step.input("webcam")
    if level is None and cam is not None and (cam.width, cam.height) == (step.width, step.height):
        np.copyto(out, cam.array)
    else:
        out.fill(0 if level is None else level)
    return out
