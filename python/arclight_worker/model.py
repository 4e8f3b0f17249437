"""The model side's API: declare a model, its commands, and the function that makes frames.

Example::

    import numpy as np
    from arclight_worker import CommandError, Model, Session, Step

    model = Model()

    @model.command("set_level", params={"type": "object",
                                        "properties": {"value": {"type": "number", "minimum": 0, "maximum": 1}},
                                        "required": ["value"], "additionalProperties": False})
    def set_level(session: Session, params: dict) -> dict:
        session.state["level"] = params["value"]
        return {"level": params["value"]}

    @model.generate
    def generate(session: Session, step: Step):
        out = step.frame("rgb")                  # a view of a shared slot: written in place, no copy
        out[:] = int(255 * session.state.get("level", 0.5))
        return out

The runtime validates every command's params against its schema (the same JSON Schema, with
ajv) before the handler runs, so a handler never sees invalid params.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, TypeVar, Union

from ._frames import I420, InputFrame, PixelFormat, U8, frame_bytes, i420_planes

JsonValue = Any
Handler = Callable[["Session", Dict[str, Any]], Optional[JsonValue]]
Generate = Callable[["Session", "Step"], Any]
F = TypeVar("F", bound=Callable[..., Any])


class CommandError(Exception):
    """Raise from a command handler (or generate) for a failure the client should see: its ``code`` reaches
    the client's ``sendCommand`` verbatim (any other exception is ``internal_error``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class CommandSpec:
    name: str
    handler: Handler
    params: Mapping[str, Any]
    description: Optional[str] = None
    reply_type: Optional[str] = None


class SessionLog:
    """Lines in the session's log (the client's ``log`` event, ``GET /sessions/{id}/logs``) and the runtime's log."""

    def __init__(self, emit: Callable[[str, str, Dict[str, Any]], None]) -> None:
        self._emit = emit

    def info(self, message: str, **fields: Any) -> None:
        self._emit("info", message, fields)

    def warn(self, message: str, **fields: Any) -> None:
        self._emit("warn", message, fields)

    def error(self, message: str, **fields: Any) -> None:
        self._emit("error", message, fields)


class Session:
    """One session of the model: its id, a per-session ``state`` dict, its log, messages to its clients."""

    def __init__(self, session_id: str, log: SessionLog, broadcast: Callable[[str, JsonValue], None], rank: int, world_size: int) -> None:
        self.id = session_id
        self.state: Dict[str, Any] = {}
        self.log = log
        self._broadcast = broadcast
        self.rank = rank
        self.world_size = world_size

    def broadcast(self, message_type: str, data: JsonValue = None) -> None:
        """Sends one application message to every client of the session (declare its type in TS ``messages``)."""
        self._broadcast(message_type, data)


@dataclass
class Step:
    """One call of ``generate``: the input frames of this step and the output slots it may write.

    ``frame(fmt)`` gives a writable view of the next output slot at the output track's size; write
    the picture into it and return it (no copy). Returning any other array copies it into a slot.
    """

    index: int
    width: int
    height: int
    rank: int
    world_size: int
    slices: bool
    _inputs: Dict[str, InputFrame]
    _slot_view: Callable[[int, int], U8]
    _out_slots: List[int]
    _handed: List[int] = field(default_factory=list)
    metadata: Optional[JsonValue] = None

    def input(self, track: str) -> Optional[InputFrame]:
        """The newest frame of input track ``track`` (a webcam), or None before the first."""
        return self._inputs.get(track)

    @property
    def rows(self) -> slice:
        """This rank's rows of the output frame when ranks write slices (``ranks`` with ``output: 'slices'``)."""
        per = -(-self.height // self.world_size)
        per += per % 2
        start = min(self.height, self.rank * per)
        return slice(start, min(self.height, start + per))

    def frame(self, fmt: PixelFormat = "rgb") -> Any:
        """A writable view of the next free output slot: H×W×3 (rgb), H×W×4 (rgba) or I420 planes."""
        if not self._out_slots and not self.slices:
            raise RuntimeError("no output slot for this step: in leader mode only rank 0 emits frames" if self.rank else "every output slot of this step is taken (raise max_chunk / maxChunk)")
        slot = self._out_slots[len(self._handed)] if len(self._handed) < len(self._out_slots) else None
        if slot is None:
            raise RuntimeError(f"a step may emit at most {len(self._out_slots)} frames (maxChunk)")
        self._handed.append(slot)
        flat = self._slot_view(slot, frame_bytes(self.width, self.height, fmt))
        if fmt == "i420":
            return i420_planes(flat, self.width, self.height)
        return flat.reshape(self.height, self.width, 3 if fmt == "rgb" else 4)


LoadFn = Callable[["LoadContext"], None]
SessionFn = Callable[[Session], None]
SessionEndFn = Callable[[Session, str], None]


class Progress(Protocol):
    """``progress(0.5)`` or ``progress(0.5, "weights")``: how far loading is, 0–1."""

    def __call__(self, fraction: float, message: Optional[str] = None) -> None: ...


@dataclass(frozen=True)
class LoadContext:
    """What ``@model.load`` is given: progress reporting and this process's place among the ranks."""

    progress: Progress
    rank: int
    world_size: int


class Model:
    """A model served by an Arclight runtime. One module-level instance per model file."""

    def __init__(self) -> None:
        self.commands: Dict[str, CommandSpec] = {}
        self.load_fn: Optional[LoadFn] = None
        self.generate_fn: Optional[Generate] = None
        self.session_start_fn: Optional[SessionFn] = None
        self.session_end_fn: Optional[SessionEndFn] = None

    @property
    def rank(self) -> int:
        """This process's rank (0 is the leader); 0 outside a multi-rank model."""
        return int(os.environ.get("ARCLIGHT_RANK", "0"))

    @property
    def world_size(self) -> int:
        return int(os.environ.get("ARCLIGHT_WORLD_SIZE", "1"))

    def command(self, name: str, *, params: Optional[Mapping[str, Any]] = None, description: Optional[str] = None, reply_type: Optional[str] = None) -> Callable[[Handler], Handler]:
        """Declares a command. ``params`` is its JSON Schema (default: any object), validated by the runtime."""
        if name in self.commands:
            raise ValueError(f"command {name!r} is declared twice")

        def register(handler: Handler) -> Handler:
            self.commands[name] = CommandSpec(name, handler, params if params is not None else {"type": "object"}, description, reply_type)
            return handler

        return register

    def load(self, fn: LoadFn) -> LoadFn:
        """Once per process, before any session: load weights. ``ctx.progress(0.5, 'weights')`` reports how far."""
        self.load_fn = fn
        return fn

    def generate(self, fn: Generate) -> Generate:
        """One step: return a frame (numpy H×W×3/H×W×4 uint8, an ``I420``, a torch tensor), a list of them (a chunk), or None."""
        self.generate_fn = fn
        return fn

    def on_session_start(self, fn: SessionFn) -> SessionFn:
        self.session_start_fn = fn
        return fn

    def on_session_end(self, fn: SessionEndFn) -> SessionEndFn:
        self.session_end_fn = fn
        return fn

    def describe(self) -> Dict[str, Any]:
        """The declaration the runtime reads: commands with their schemas."""
        return {
            "commands": {
                name: {k: v for k, v in (("description", c.description), ("params", dict(c.params)), ("reply_type", c.reply_type)) if v is not None}
                for name, c in self.commands.items()
            },
            "has_generate": self.generate_fn is not None,
        }


FrameLike = Union[U8, I420, Any]
__all__ = ["CommandError", "CommandSpec", "InputFrame", "LoadContext", "Model", "Progress", "Session", "SessionLog", "Step", "FrameLike"]
