"""The worker process: imports the model module, loads it, then serves the runtime's requests
over the control socket, one at a time, until the socket closes or the runtime says ``shutdown``.

Control messages are JSON lines over a Unix domain socket (a socketpair the runtime hands over as
ARCLIGHT_CONTROL_FD); frame bytes never travel on it — only slot numbers, sizes and formats. A
heartbeat thread writes ``{"type": "heartbeat"}`` every ARCLIGHT_HEARTBEAT_MS so the runtime can
tell a frozen process from a busy one (it bounds each request's time separately).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import threading
import traceback
from typing import Any, Dict, List, Optional

import numpy as np

from ._frames import InputFrame, data_address, describe, frame_bytes, write_into
from ._ring import FrameRing
from .model import CommandError, LoadContext, Model, Session, SessionLog, Step

PROTOCOL_VERSION = 1


def load_model_module(path: str) -> Model:
    """Imports ``path`` and returns its ``Model`` (the module attribute ``model``, or its only Model)."""
    spec = importlib.util.spec_from_file_location("arclight_model", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["arclight_model"] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    found = getattr(module, "model", None)
    if isinstance(found, Model):
        return found
    models = [v for v in vars(module).values() if isinstance(v, Model)]
    if len(models) != 1:
        raise ImportError(f"{path} must define one arclight_worker.Model (as `model`); found {len(models)}")
    return models[0]


class Channel:
    """JSON lines over the control socket; ``send`` is safe from the heartbeat thread."""

    def __init__(self, fd: int) -> None:
        self._sock = socket.socket(fileno=fd)
        self._reader = self._sock.makefile("rb")
        self._lock = threading.Lock()

    def send(self, message: Dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":"), default=_json_default) + "\n").encode()
        with self._lock:
            self._sock.sendall(data)

    def receive(self) -> Optional[Dict[str, Any]]:
        line = self._reader.readline()
        if not line:
            return None
        message: Dict[str, Any] = json.loads(line)
        return message


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


class Worker:
    def __init__(self, model: Model, channel: Channel, ring: FrameRing, rank: int, world_size: int) -> None:
        self.model = model
        self.channel = channel
        self.ring = ring
        self.rank = rank
        self.world_size = world_size
        self.sessions: Dict[str, Session] = {}

    # ---- requests -------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            message = self.channel.receive()
            if message is None or message.get("type") == "shutdown":
                return
            request_id = message.get("id")
            try:
                result = self.handle(message)
                self.channel.send({"type": "reply", "id": request_id, "ok": True, **result})
            except CommandError as error:
                self.channel.send({"type": "reply", "id": request_id, "ok": False, "error": {"code": error.code, "message": error.message, "command_error": True}})
            except Exception as error:  # noqa: BLE001 - the model's exception goes back to the runtime
                self.channel.send({"type": "reply", "id": request_id, "ok": False, "error": {"message": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(limit=20)}})

    def handle(self, message: Dict[str, Any]) -> Dict[str, Any]:
        kind = message["type"]
        if kind == "session_start":
            session = self._session(message["session"], create=True)
            if self.model.session_start_fn:
                self.model.session_start_fn(session)
            return {}
        if kind == "session_end":
            ended = self.sessions.pop(message["session"], None)
            if ended is not None and self.model.session_end_fn:
                self.model.session_end_fn(ended, str(message.get("reason", "")))
            return {}
        if kind == "command":
            spec = self.model.commands.get(message["name"])
            if spec is None:
                raise CommandError("unknown_command", f"the Python model declares no command {message['name']!r}")
            result = spec.handler(self._session(message["session"]), message.get("params") or {})
            return {"result": result} if result is not None else {}
        if kind == "step":
            return self.step(message)
        raise ValueError(f"unknown request type {kind!r}")

    def _session(self, session_id: str, create: bool = False) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            if not create:
                raise RuntimeError(f"session {session_id} was not started on this worker")
            log = SessionLog(lambda level, text, fields: self.channel.send({"type": "log", "session": session_id, "level": level, "message": text, "fields": fields}))
            session = Session(session_id, log, lambda t, d: self.channel.send({"type": "broadcast", "session": session_id, "message_type": t, "data": d}), self.rank, self.world_size)
            self.sessions[session_id] = session
        return session

    def step(self, message: Dict[str, Any]) -> Dict[str, Any]:
        generate = self.model.generate_fn
        if generate is None:
            raise RuntimeError("the Python model has no @model.generate")
        inputs: Dict[str, InputFrame] = {}
        for track, d in (message.get("inputs") or {}).items():
            w, h, fmt = int(d["width"]), int(d["height"]), d["format"]
            flat = self.ring.slot(int(d["slot"]), frame_bytes(w, h, fmt))
            flat.flags.writeable = False
            inputs[track] = InputFrame(w, h, fmt, flat.reshape(h, w, 4) if fmt == "rgba" else flat)
        slices = bool(message.get("slices"))
        out_slots: List[int] = [int(s) for s in message.get("outputs", [])]
        step = Step(
            index=int(message["index"]), width=int(message["width"]), height=int(message["height"]),
            rank=self.rank, world_size=self.world_size, slices=slices,
            _inputs=inputs, _slot_view=self.ring.slot, _out_slots=out_slots,
        )
        value = generate(self._session(message["session"]), step)
        frames = [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]
        if not out_slots:  # leader mode, not the leader: its output is not used
            return {}
        if len(frames) > len(out_slots):
            raise RuntimeError(f"generate returned {len(frames)} frames; a step may emit at most {len(out_slots)} (maxChunk)")
        written: List[Dict[str, Any]] = []
        used = set(step._handed)
        free = [s for s in out_slots if s not in used]
        for frame in frames:
            width, height, fmt = describe(frame)
            slot = self._slot_of(frame, step._handed)
            if slot is None:
                if not free:
                    raise RuntimeError("no free output slot for a copied frame: emit at most maxChunk frames per step")
                slot = free.pop(0)
                write_into(self.ring.slot(slot, frame_bytes(width, height, fmt)), frame)
            written.append({"slot": slot, "width": width, "height": height, "format": fmt})
        reply: Dict[str, Any] = {"frames": written}
        if step.metadata is not None:
            reply["metadata"] = step.metadata
        return reply

    def _slot_of(self, frame: Any, handed: List[int]) -> Optional[int]:
        """The slot a frame already lies in (a view from ``step.frame``), so it needs no copy."""
        address = data_address(frame)
        if address is None:
            return None
        for slot in handed:
            start, _ = self.ring.address_range(slot)
            if address == start:
                return slot
        return None


def _heartbeat(channel: Channel, every_s: float, stop: threading.Event) -> None:
    while not stop.wait(every_s):
        try:
            channel.send({"type": "heartbeat"})
        except OSError:
            return


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the runtime dies, even mid-step (PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
        parent = os.environ.get("ARCLIGHT_PARENT_PID")
        if parent is not None and os.getppid() != int(parent):  # the runtime died before prctl
            os._exit(1)
    except (OSError, AttributeError, ValueError):
        pass  # EOF on the control socket still ends the worker, at its next request


def run(module_path: str) -> int:
    _die_with_parent()
    rank = int(os.environ.get("ARCLIGHT_RANK", "0"))
    world_size = int(os.environ.get("ARCLIGHT_WORLD_SIZE", "1"))
    channel = Channel(int(os.environ["ARCLIGHT_CONTROL_FD"]))
    ring = FrameRing(int(os.environ["ARCLIGHT_RING_FD"]))
    channel.send({"type": "hello", "protocol": PROTOCOL_VERSION, "pid": os.getpid(), "rank": rank, "python": sys.version.split()[0], "numpy": np.__version__})
    stop = threading.Event()
    threading.Thread(target=_heartbeat, args=(channel, int(os.environ.get("ARCLIGHT_HEARTBEAT_MS", "1000")) / 1000, stop), daemon=True).start()
    try:
        model = load_model_module(module_path)
        def progress(fraction: float, message: Optional[str] = None) -> None:
            channel.send({"type": "progress", "fraction": float(fraction), "message": message})

        if model.load_fn is not None:
            model.load_fn(LoadContext(progress=progress, rank=rank, world_size=world_size))
    except Exception as error:  # noqa: BLE001 - reported to the runtime, then the process exits
        channel.send({"type": "fatal", "message": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(limit=20)})
        return 1
    channel.send({"type": "ready", **model.describe()})
    try:
        Worker(model, channel, ring, rank, world_size).serve()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        stop.set()
    return 0
