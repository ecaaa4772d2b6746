"""Checks shared by `vlmeval-ext prepare` of each benchmark (kit-free)."""
from __future__ import annotations

import csv
import sys

from vlmeval_ext.io import DataError


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


def check_image_bytes(raw: bytes, where: str) -> bytes:
    """An encoded image that decodes whole (a saved error page, a PNG header only, a truncated file or a
    decompression bomb is one DataError naming where); returns the bytes."""
    import io

    from PIL import Image
    try:
        with Image.open(io.BytesIO(raw)) as image:
            image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise DataError(f'{where}: not a decodable image ({type(err).__name__}: {str(err)[:80]})') from None
    return raw


def prepare_options(function, name: str, given: dict, flags: dict) -> dict:
    """The options given on the command line that this dataset's prepare takes; one it does not take is an error
    naming the flag."""
    import inspect
    accepted = inspect.signature(function).parameters
    options = {}
    for dest, value in given.items():
        if value is None or value is False:
            continue
        if dest not in accepted:
            raise DataError(f'prepare {name}: {flags[dest]} does not apply to this dataset')
        options[dest] = value
    return options


SUBSET_SUFFIX = '.subset.json'


def mark_subset(tsv: str, record, allow_subset: bool) -> None:
    """A TSV built with --allow-subset carries `<tsv>.subset.json` ({items, official}), so every listing, summary
    and leaderboard marks it; a full build removes an old mark."""
    import json
    from pathlib import Path
    mark = Path(f'{tsv}{SUBSET_SUFFIX}')
    official = EXPECTED_ITEMS.get(record.key)
    found = count_items(tsv, record.key)
    if allow_subset and official is not None and found != official:
        mark.write_text(json.dumps({'items': found, 'official': official}) + '\n', encoding='utf-8')
    elif mark.exists():
        mark.unlink()


def subset_note(tsv: str) -> str | None:
    """'subset: 40 of 2,170 items' for a TSV built with --allow-subset, else None."""
    import json
    from pathlib import Path
    mark = Path(f'{tsv}{SUBSET_SUFFIX}')
    if not mark.is_file():
        return None
    try:
        info = json.loads(mark.read_text(encoding='utf-8'))
        return f'subset: {int(info["items"]):,} of {int(info["official"]):,} items'
    except (ValueError, KeyError, TypeError):
        return 'subset'


# The official releases' item counts (R-Bench: items, each on two rows).
EXPECTED_ITEMS = {'R-Bench-Full': 1485, 'GRAB': 2170, 'ReMI': 2600}


def count_items(tsv: str, key: str) -> int:
    rows = count_rows(tsv)
    return rows // 2 if key == 'R-Bench-Full' else rows
