"""Log lines of the kit that say nothing to our users.

VLMEvalKit logs `ERROR ... Did not detect the .env file at ..., failed to load.` through the root logger every time
it is imported: the .env file is an optional place for its API keys, and our commands take keys from the
environment. `quiet_kit_notices()` adds a filter to the root logger (where the kit logs it) that drops that one
message; every other record, the kit's errors included, passes.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import sys

DROPPED = ('Did not detect the .env file',)


class _KitNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        return not message.startswith(DROPPED)


_FILTER = _KitNotices()


def quiet_kit_notices() -> None:
    """Install the filter once (idempotent); call it before the kit is imported."""
    root = logging.getLogger()
    if _FILTER not in root.filters:
        root.addFilter(_FILTER)


@contextlib.contextmanager
def kit_lines_once(title: str):
    """While the block runs, each distinct line the kit logs is shown once; after it, one line per repeated line
    says how many more times it came (a -RC evaluation runs the base dataset's evaluate once per variant, and the
    kit says the same thing each time). The filter sits on the kit's own log handlers for the block only."""
    seen: collections.Counter = collections.Counter()

    class _Once(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            try:
                message = record.getMessage()
            except (TypeError, ValueError):
                return True
            seen[message] += 1
            return seen[message] == 1

    once = _Once()
    handlers = list(logging.getLogger('vlmeval').handlers)
    for handler in handlers:
        handler.addFilter(once)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(once)
        for message, n in seen.items():
            if n > 1:
                print(f'[{title}] the kit said this {n} times (once shown): {" ".join(message.split())[:160]}',
                      file=sys.stderr)
