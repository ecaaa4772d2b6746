"""What counts as an API key, and masking it: in texts (`redact`), in replies that echo one (`mask_echoed_keys`), in
option names and values the launcher refuses. The kit's own log lines and console go through `redact` by way of
vlmeval_ext.kit_workarounds.console.
"""
from __future__ import annotations

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
