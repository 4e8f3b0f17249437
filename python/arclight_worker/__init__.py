"""Arclight's inference worker, the model side: a Python model served by the TypeScript runtime.

Frames cross in shared memory (numpy views of a ring on /dev/shm); commands, session events and
frame metadata go over a local socket. See docs/python-worker.md.
"""

from ._frames import I420, InputFrame, PixelFormat, frame_bytes
from .model import CommandError, LoadContext, Model, Progress, Session, SessionLog, Step

__all__ = ["CommandError", "I420", "InputFrame", "LoadContext", "Model", "PixelFormat", "Progress", "Session", "SessionLog", "Step", "frame_bytes"]
__version__ = "0.1.0"
