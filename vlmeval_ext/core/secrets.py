"""Keep API keys out of every log line, including the kit's own (it logs `API Key: ...` and judge kwargs).

A log-record factory masks the values of key-like environment variables and key-shaped strings before any
handler formats the record, so no file handler of the kit or ours can write a key.
"""
from __future__ import annotations

import logging
import os
import re

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
