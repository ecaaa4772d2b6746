"""Keep API keys out of every log line, including the kit's own (it logs `API Key: ...` and judge kwargs).

A log-record factory masks the values of key-like environment variables and key-shaped strings before any
handler formats the record, so no file handler of the kit or ours can write a key.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys

MASK = '***'
_KEY_ENV = re.compile(r'(KEY|TOKEN|SECRET|PASSWORD)', re.I)
_KEY_SHAPES = [
    re.compile(r'\b(sk-[A-Za-z0-9_\-]{6,})'),                                   # OpenAI-style keys
    re.compile(r'(Bearer\s+)([A-Za-z0-9_\-\.]{6,})'),                          # auth headers
    re.compile(r"""((?:api[_-]?)?key['"]?\s*[:=]\s*['"]?)([^'"\s,}]{6,})""", re.I),  # key=..., 'key': '...'
]
_installed = False


def secret_values() -> list[str]:
    """Values of environment variables whose names say they hold secrets (long enough to be keys)."""
    return sorted({v for k, v in os.environ.items() if _KEY_ENV.search(k) and v and len(v) >= 6},
                  key=len, reverse=True)


def configured_keys() -> list[str]:
    """The secret_values that look like API keys (12+ characters, one token, a digit among them): what may be masked
    in a model's reply without touching ordinary words (a KEYBOARD_LAYOUT=english must not mask 'english')."""
    return [v for v in secret_values()
            if len(v) >= 12 and re.fullmatch(r'[\w\-.:/+=]+', v) and any(c.isdigit() for c in v)]


# Names that hold credentials: a whole name, or its last part ("openai_api_key"); "max_tokens" is no credential.
_SECRET_NAME = re.compile(r'(?:^|_)(?:api_?key|key|secret|secret_key|password|passwd|access_token|auth_token|'
                          r'authorization|bearer|token|credentials?)$')


def is_secret_key_name(name) -> bool:
    """True for an option or field name that holds a credential: api_key, key, Authorization, x-api-key,
    access_token, password, ... (not max_tokens, tokenizer, key_points)."""
    return bool(_SECRET_NAME.search(str(name).strip().lower().replace('-', '_')))


def looks_like_secret(value) -> bool:
    """A value shaped like a key (sk-..., 'Bearer ...') or equal to / holding a configured key."""
    text = str(value)
    if _KEY_SHAPES[0].search(text) or _KEY_SHAPES[1].search(text):
        return True
    return any(k in text for k in configured_keys())


def mask_configured_keys(text: str, extra=()) -> str:
    """The configured API keys (and `extra` values) in a text replaced by ***: a gateway may echo the request's
    key in a 200 answer; masked before it is stored anywhere."""
    if not isinstance(text, str):
        return text
    for key in (*configured_keys(), *(e for e in extra if isinstance(e, str) and len(e) >= 8)):
        text = text.replace(key, MASK)
    return text


def redact(text: str, extra: tuple[str, ...] = ()) -> str:
    for value in (*secret_values(), *extra):
        if value:
            text = text.replace(value, MASK)
    text = _KEY_SHAPES[0].sub(MASK, text)
    text = _KEY_SHAPES[1].sub(lambda m: m.group(1) + MASK, text)
    text = _KEY_SHAPES[2].sub(lambda m: m.group(1) + MASK, text)
    return text


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


def mask_echoed_keys(prediction_file) -> int:
    """A named step before an evaluation: replies that echo a configured API key (a gateway passing the request's
    key back in a 200 answer, which the kit stored as the model's reply) are masked in the predictions file itself,
    atomically, with one line saying which rows; returns how many cells were masked."""
    from vlmeval_ext.io import read_table, write_predictions_table
    keys = configured_keys()
    if not keys:
        return 0
    table = read_table(prediction_file)
    if 'prediction' not in table.columns:
        return 0
    column = list(table['prediction'])
    hit = [i for i, v in enumerate(column) if any(k in v for k in keys)]
    if not hit:
        return 0
    table['prediction'] = [mask_configured_keys(v) if i in set(hit) else v for i, v in enumerate(column)]
    write_predictions_table(table, prediction_file)
    print(f'[vlmeval-ext] WARNING: {prediction_file}: {len(hit)} prediction(s) held a configured API key (row(s) '
          f'{[i + 2 for i in hit][:10]}), an endpoint echoing it back; masked as {MASK} in the file and in every '
          'score', file=sys.stderr, flush=True)
    return len(hit)
