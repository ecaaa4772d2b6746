"""What a model's prediction cell is: an answer, an empty answer, or the kit's inference failure (pure, no kit import).

One rule for every benchmark of this package (R-Bench, GRAB, ReMI, RoCOCO-MCQ, every `<Dataset>-RC`). The
failure test is the kit-dialect files' own `is_infer_fail` (vlmeval_ext/dataset/utils/exact_io.py), so both layers
apply the same one:

- an inference failure is only what the kit writes in place of an answer when it could not get one: its API
  wrappers' fail message ('Failed to obtain answer via API.', alone or with ': Failed with all possible
  conversation turns.') or, with SKIP_ERR=1, 'Failed to obtain answer: <class ...> <error>'. These are matched
  exactly, so a model answer that merely quotes the text is still an answer. A missing row is a failure too; the
  benchmark that pairs or counts rows decides that. Failures are counted, excluded from means and re-asked by
  the kit on the next run.
- an empty answer ('' or white space only; an empty spreadsheet cell) is an answer. The benchmark's own rule
  scores it (wrong, for every benchmark here), and the tables count it as `empty`.
- anything else is an answer, scored by the benchmark's rule exactly as written.
"""
from __future__ import annotations

import math

from vlmeval_ext.dataset.utils.exact_io import is_infer_fail

ANSWER, EMPTY, FAILED = 'answer', 'empty', 'failed'


def is_missing(value) -> bool:
    """None or NaN: a value a failed item carries (excluded from means, counted)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_kit_failure(value) -> bool:
    """True when the cell is exactly one of the kit's failure values (see the module docstring)."""
    return is_infer_fail(value)


def classify_prediction(value) -> str:
    """ANSWER, EMPTY or FAILED for one prediction cell.

    None and NaN (an empty cell read by a numeric-guessing reader) are EMPTY: the kit writes every row it ran,
    so a blank cell is the model's blank answer, not a missing one.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return EMPTY
    if is_kit_failure(value):
        return FAILED
    if not isinstance(value, str):
        raise TypeError(f'a prediction must be text, got {type(value).__name__}: {value!r}')
    return EMPTY if not value.strip() else ANSWER


def prediction_text(value) -> str:
    """The text a benchmark's rule scores: '' for an empty cell, the cell unchanged otherwise (never a failure)."""
    kind = classify_prediction(value)
    if kind == FAILED:
        raise ValueError('an inference failure has no text to score')
    return '' if kind == EMPTY and not isinstance(value, str) else value


def storable_text(text: str) -> str:
    """text that UTF-8 can store: a surrogate pair split in two code points joined, a lone surrogate replaced by
    U+FFFD (a model reply may hold half an emoji, '\\ud83d'); any other text unchanged."""
    if not any('\ud800' <= ch <= '\udfff' for ch in text):
        return text
    return text.encode('utf-16-le', 'surrogatepass').decode('utf-16-le', 'replace')
