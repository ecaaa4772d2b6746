"""Checks shared by `vlmeval-ext prepare` of each benchmark (kit-free)."""
from __future__ import annotations

import csv
import sys

from vlmeval_ext.core.io import DataError


def count_rows(tsv: str) -> int:
    """Data rows of a TSV written by prepare (the header not counted; cells may be long base64 images)."""
    csv.field_size_limit(sys.maxsize)
    with open(tsv, encoding='utf-8', newline='') as f:
        return sum(1 for _ in csv.reader(f, delimiter='\t')) - 1


def check_item_count(benchmark: str, source: str, found: int, expected: int, allow_subset: bool) -> str | None:
    """The official release has `expected` items. Another count stops prepare (DataError naming the source), unless
    `allow_subset`, when one line says what was kept; returns that line (None when the count is the official)."""
    if found == expected:
        return None
    if not allow_subset:
        raise DataError(f'{benchmark}: {source} holds {found} items, the official release has {expected}; a partial '
                        'copy would give scores not comparable with the paper. Complete the copy, or pass '
                        '--allow-subset to build it anyway')
    line = (f'{benchmark}: kept {found} items (--allow-subset); the official release has {expected}: scores are '
            'not comparable with the paper')
    print(line, file=sys.stderr)
    return line
