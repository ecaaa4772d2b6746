"""Log lines of the kit that say nothing to our users.

VLMEvalKit logs `ERROR ... Did not detect the .env file at ..., failed to load.` through the root logger every time
it is imported: the .env file is an optional place for its API keys, and our commands take keys from the
environment. `quiet_kit_notices()` adds a filter to the root logger (where the kit logs it) that drops that one
message; every other record, the kit's errors included, passes.
"""
from __future__ import annotations

import logging

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
