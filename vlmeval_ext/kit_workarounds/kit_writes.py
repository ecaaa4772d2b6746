"""Whether the main thread is inside one of the kit's file writes: a Ctrl-C must not land there.

The kit's `dump` writes its checkpoint and progress files in place, so a KeyboardInterrupt raised, or an `os._exit`
made, in the middle of one leaves a cut file whose every answer is then lost. The Ctrl-C handler
(vlmeval_ext.interrupt) asks these two functions and waits for the write to end first. Removed by
upstream/0002-atomic-dump.patch (a write to a temporary file renamed over the target cannot be cut).
"""
from __future__ import annotations

import sys
import threading


def inside_kit_write(frame) -> bool:
    """True while `frame` (or a caller of it) is inside the kit's file writing (vlmeval/smp/file.py `dump*`)."""
    while frame is not None:
        name = frame.f_code.co_filename.replace('\\', '/')
        if name.endswith('vlmeval/smp/file.py') and frame.f_code.co_name.startswith('dump'):
            return True
        frame = frame.f_back
    return False


def main_thread_writing() -> bool:
    """True while the main thread is inside one of the kit's file writes."""
    return inside_kit_write(sys._current_frames().get(threading.main_thread().ident))
