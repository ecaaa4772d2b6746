"""What the kit prints and logs: keys masked, one notice dropped, repeated lines counted.

- Keys (upstream/0001-keep-api-keys-out-of-status-and-logs.patch removes the need): the kit logs the judge's
  arguments and `API Key: <key>` each time a judge is built, and `--verbose` prints each reply, which an endpoint
  echoing the request's key carries. `install_log_redaction()` wraps the log-record factory so every record's
  message is masked (vlmeval_ext.secrets.redact) before any handler formats it; `masked_console()` makes
  sys.stdout and sys.stderr write through `redact` while our run.py runs the kit. Both change the process:
  `vlmeval_ext.register()` installs the factory only when asked (`redact_logs=True`, as our run.py and commands
  do), and only our run.py masks the console.
- The .env notice (no patch: the kit's choice): VLMEvalKit logs `ERROR ... Did not detect the .env file at ...,
  failed to load.` through the root logger every time it is imported: the .env file is an optional place for its
  API keys, and our commands take keys from the environment. `quiet_kit_notices()` adds a filter to the root
  logger (where the kit logs it) that drops that one message; every other record, the kit's errors included,
  passes.
- Repeated lines (no patch): a -RC evaluation runs the base dataset's evaluate once per variant, and the kit says
  the same line each time; `kit_lines_once` shows each once and then counts it.
"""
from __future__ import annotations

import collections
import contextlib
import io
import logging
import sys

from vlmeval_ext.secrets import redact

DROPPED = ('Did not detect the .env file',)


class _ByMessage(logging.Filter):
    """A log filter deciding on a record's final message by `keep(message)`; a record whose message cannot be
    formatted passes."""

    def __init__(self, keep):
        super().__init__()
        self.keep = keep

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        return self.keep(message)


_FILTER = _ByMessage(lambda message: not message.startswith(DROPPED))


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

    def first_time(message: str) -> bool:
        seen[message] += 1
        return seen[message] == 1

    once = _ByMessage(first_time)
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


_installed = False


def install_log_redaction() -> None:
    """Wrap the log-record factory once: every record's final message is redacted."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = previous(*args, **kwargs)
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return record

    logging.setLogRecordFactory(factory)


class MaskedStream(io.TextIOBase):
    """A console stream that writes through `redact`: what the kit prints (`--verbose` prints each model answer,
    which an endpoint echoing the request's key would carry) reaches the console without a key."""

    def __init__(self, stream):
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text) if isinstance(text, str) else text)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self):
        return getattr(self._stream, 'encoding', 'utf-8')

    def __getattr__(self, name):     # buffer, reconfigure, ...: the wrapped stream's own
        return getattr(self._stream, name)


@contextlib.contextmanager
def masked_console():
    """sys.stdout and sys.stderr write through `redact` inside the block (the launcher runs the kit in it)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MaskedStream(saved[0]), MaskedStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
