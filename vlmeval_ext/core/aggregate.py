"""Grouped aggregation that every benchmark report uses (pure, no kit imports).

Failed items carry None/NaN and are excluded from means; the caller reports how many were excluded.
"""
from __future__ import annotations

import math
from typing import Callable, Hashable, Iterable, Mapping, Sequence


def is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def mean(values: Iterable) -> float | None:
    """Mean of the non-missing values, None when there are none."""
    kept = [float(v) for v in values if not is_missing(v)]
    return sum(kept) / len(kept) if kept else None


def grouped_mean(rows: Sequence[Mapping], value: str | Callable[[Mapping], object],
                 key: str | Callable[[Mapping], Hashable | Iterable[Hashable] | None]) -> dict:
    """Mean of `value` per group. `key` may return one group, several groups (list/tuple/set), or None (row in no group).

    Groups appear in first-seen order; a group whose rows are all missing maps to None.
    """
    get_value = value if callable(value) else (lambda r: r[value])
    get_key = key if callable(key) else (lambda r: r[key])
    buckets: dict = {}
    for row in rows:
        groups = get_key(row)
        if groups is None:
            continue
        if not isinstance(groups, (list, tuple, set, frozenset)):
            groups = [groups]
        for g in groups:
            buckets.setdefault(g, []).append(get_value(row))
    return {g: mean(vals) for g, vals in buckets.items()}


def count_missing(rows: Sequence[Mapping], value: str) -> int:
    return sum(1 for r in rows if is_missing(r[value]))
