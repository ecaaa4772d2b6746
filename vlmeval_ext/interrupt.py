"""Ctrl-C during a run: stop making calls at once, keep what arrived, say so in one line, exit 130.

`STOP` is the one switch every judge of ours reads (vlmeval_ext.judging.CachedJudge makes no call once it is set).
`handling_ctrl_c()` (the launcher and `vlmeval-ext eval` run in it) installs a SIGINT handler for the first Ctrl-C:

- it sets STOP (every judge of ours refuses further calls), cancels every call still queued in the process's
  thread pools (the kit submits all of a dataset's calls at once; a queued call that has not started is never
  sent) and lets KeyboardInterrupt unwind the kit's loop, the last two in one step. Calls already in flight may
  finish for a few seconds: a judge verdict that arrives is stored; after GRACE_S seconds the process ends anyway;
- KeyboardInterrupt is never raised while the kit is writing one of its files (a half-written checkpoint would
  lose every answer it held): the cancelling and the raise come a moment later, once the write is done;
- a second Ctrl-C ends the process at once, as the end after GRACE_S does: both wait for a kit file write that is
  under way to finish first (os._exit in the middle of one is what cuts a progress file).
The caller prints the summary line and exits 130 (`exit_status`).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import os
import signal
import sys
import threading
import time
import warnings

from vlmeval_ext.kit_workarounds.kit_writes import inside_kit_write, main_thread_writing

GRACE_S = 5.0
WRITE_WAIT_S = 30.0     # the longest a kit file write may hold back the end (a progress file of a few MB takes <1 s)
EXIT_STATUS = 130


class _Stop:
    """Why calls must stop (None while they may go on)."""

    def __init__(self):
        self.reason: str | None = None
        self.since: float | None = None

    def set(self, reason: str) -> None:
        if self.reason is None:
            self.reason, self.since = reason, time.monotonic()

    def clear(self) -> None:
        self.reason = self.since = None


STOP = _Stop()
_state = {'pending_raise': False, 'summary': None}


def cancel_queued_calls() -> int:
    """Cancel every thread-pool call of this process that has not started yet; returns how many."""
    cancelled = 0
    with warnings.catch_warnings():      # isinstance() on some modules' lazy objects warns (torch's reduce_op)
        warnings.simplefilter('ignore')
        for obj in gc.get_objects():
            if isinstance(obj, concurrent.futures.Future) and not obj.done() and obj.cancel():
                cancelled += 1
    return cancelled


def _end_now() -> None:
    """End the process now, but never in the middle of a kit file write (an os._exit there leaves a cut
    checkpoint or progress file, whose every answer is then lost): wait for the write, up to WRITE_WAIT_S."""
    line = _state['summary']() if callable(_state['summary']) else 'interrupted'
    print(f'\n[vlmeval-ext] {line}', file=sys.stderr, flush=True)
    deadline = time.monotonic() + WRITE_WAIT_S
    while main_thread_writing() and time.monotonic() < deadline:
        time.sleep(0.01)
    os._exit(EXIT_STATUS)                  # right after the check: no time for a new write to start


def _handler(signum, frame):
    if STOP.reason == 'interrupted' and not _state['pending_raise']:   # a second Ctrl-C
        if inside_kit_write(frame):       # the write goes on in this thread: end from another once it is done
            threading.Thread(target=_end_now, daemon=True).start()
            return
        _end_now()
    if STOP.reason != 'interrupted':
        STOP.set('interrupted')
        timer = threading.Timer(GRACE_S, _end_now)
        timer.daemon = True
        timer.start()
    if inside_kit_write(frame):
        _state['pending_raise'] = True
        threading.Timer(0.05, _redeliver).start()
        return
    _state['pending_raise'] = False
    # Cancelled only now, in the same step as the raise: the kit's loop (`as_completed` + `future.result()`)
    # would meet a call cancelled while it goes on as a CancelledError, logged as an evaluation error.
    cancel_queued_calls()
    raise KeyboardInterrupt


def _redeliver():
    import _thread
    _thread.interrupt_main()                                   # runs _handler again in the main thread


@contextlib.contextmanager
def handling_ctrl_c(summary=None):
    """Run a block with the handler above; `summary()` gives the line printed if the process has to end early."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state['summary'] = summary
    previous = signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted() -> bool:
    return STOP.reason == 'interrupted'
