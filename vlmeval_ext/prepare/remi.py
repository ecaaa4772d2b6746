"""ReMI official parquet files -> the kit TSV (pure: pandas/pyarrow/Pillow, no kit import).

The official split (Hugging Face `mehrankazemi/ReMI`) has columns question, label, task and image_1 ... image_6.
An image slot is either a Hugging Face `Image` struct {'bytes': ..., 'path': ...} (what `datasets` writes) or
raw bytes; unused slots are null. The kit TSV stores the images of a row as a list of base64 strings in slot
order, serialised as a JSON list (which is also the Python list literal the kit's `toliststr` reads).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from vlmeval_ext.dataset.utils.remi import split_at_tags
from vlmeval_ext.io import DataError, unreadable_reason, write_kit_tsv
# The file selection and the row rule are the exported build script's (scripts/build_remi_tsv.py in the pull request),
# so the TSV the plugin builds and the one a maintainer builds are the same bytes.
from vlmeval_ext.scripts.build_remi_tsv import COLUMNS as TSV_COLUMNS
from vlmeval_ext.scripts.build_remi_tsv import IMAGE_SLOTS, split_files, tsv_row

REQUIRED_COLUMNS = ['question', 'label', 'task']
HF_REPO_ID = 'mehrankazemi/ReMI'


class ReMIDataError(DataError):
    """Malformed ReMI source data; the message names the file, row and column."""


def slot_bytes(cell, where: str) -> bytes | None:
    """The image bytes of one slot cell, None for an unused slot."""
    if cell is None:
        return None
    if isinstance(cell, float) and pd.isna(cell):
        return None
    if isinstance(cell, dict):
        raw = cell.get('bytes')
        if raw is None:
            if cell.get('path'):
                raise ReMIDataError(f'{where}: image struct has a path ({cell["path"]!r}) but no bytes; '
                                    'the official parquet embeds the bytes')
            return None
        cell = raw
    if isinstance(cell, (bytes, bytearray, memoryview)):
        raw = bytes(cell)
        return raw if raw else None
    raise ReMIDataError(f'{where}: expected image bytes or an {{bytes, path}} struct, got {type(cell).__name__}')


def check_image(raw: bytes, where: str) -> None:
    from vlmeval_ext.prepare.common import check_image_bytes
    try:
        check_image_bytes(raw, where)          # a decompression bomb too: one line naming the slot
    except DataError as err:
        raise ReMIDataError(str(err)) from None


def decode_image_cell(cell: str) -> list[str]:
    """Inverse of encode_images, also accepting one bare base64 string (single-image rows)."""
    text = str(cell).strip()
    if text.startswith('['):
        values = json.loads(text)
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ReMIDataError(f'image cell is not a list of base64 strings: {text[:60]!r}')
        return values
    return [text]


def check_tags(question: str, n_images: int, where: str) -> None:
    """Every <imageK> of the question names one of the item's images (<image0> and <image7> with two images do
    not); an image no tag names is placed after the text, never dropped."""
    try:
        split_at_tags(question, n_images)
    except ValueError as err:
        raise ReMIDataError(f'{where}, column \'question\': {err}') from None


def parquet_rows_to_frame(frame: pd.DataFrame, source: str, verify_images: bool = True,
                          start_index: int = 0, left_out: list | None = None) -> pd.DataFrame:
    """Convert one official parquet table to kit TSV rows. An item that cannot be asked as released (a tag naming
    an image it does not have, an image that does not decode) stops the conversion with one line naming it, or,
    with `left_out` (a list: --allow-subset), is left out and recorded there."""
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    slots = [c for c in IMAGE_SLOTS if c in frame.columns]
    if missing or not slots:
        raise ReMIDataError(f'{source}: missing columns {missing + ([] if slots else ["image_1..image_6"])}; '
                            f'found {list(frame.columns)}')
    extra = [c for c in frame.columns if c.startswith('image_') and c not in IMAGE_SLOTS
             and frame[c].notna().any()]
    if extra:
        raise ReMIDataError(f'{source}: column(s) {extra} hold images; a ReMI item has at most six '
                            f'({", ".join(IMAGE_SLOTS)}): this is not the official layout')
    out = []
    for row_no, row in enumerate(frame.itertuples(index=False)):
        try:
            out.append(_row(row._asdict(), row_no, source, slots, verify_images, start_index))
        except ReMIDataError as err:
            if left_out is None:
                raise
            left_out.append(str(err))
    return pd.DataFrame(out, columns=TSV_COLUMNS)


def _row(record: dict, row_no: int, source: str, slots: list, verify_images: bool, start_index: int) -> dict:
    for col in REQUIRED_COLUMNS:
        if record[col] is None or (isinstance(record[col], float) and pd.isna(record[col])):
            raise ReMIDataError(f'{source}: row {row_no}, column {col!r} is empty')
    images, seen_gap = [], None
    for col in slots:
        where = f'{source}: row {row_no}, column {col!r}'
        raw = slot_bytes(record[col], where)
        if raw is None:
            seen_gap = seen_gap or col
            continue
        if seen_gap:
            # the i-th tag means the i-th slot: a hole before a used slot would shift every image after it
            raise ReMIDataError(f'{where}: image present after the empty slot {seen_gap!r}')
        if verify_images:
            check_image(raw, where)
        images.append(raw)
    if not images:
        raise ReMIDataError(f'{source}: row {row_no} has no image in {slots}')
    check_tags(str(record['question']), len(images), f'{source}: row {row_no}')
    return tsv_row(start_index + row_no, record['question'], record['label'], record['task'], images)


def find_split_files(directory: str | os.PathLike, split: str = 'test') -> list[Path]:
    """Parquet files of `split` in a saved copy: test.parquet, test-0000x-of-0000y.parquet or <split>/*.parquet."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f'ReMI source folder {root} does not exist')
    try:
        return split_files(root, split)
    except FileNotFoundError:
        found = sorted(str(p.relative_to(root)) for p in root.rglob('*.parquet'))
        raise FileNotFoundError(f'no {split!r} parquet file under {root} (found: {found or "no parquet files"}); '
                                f'expected {split}.parquet as in huggingface.co/datasets/{HF_REPO_ID}') from None


def convert_files(files: list[Path], verify_images: bool = True, left_out: list | None = None) -> pd.DataFrame:
    from tqdm import tqdm
    frames, offset = [], 0
    for path in tqdm(files, desc='ReMI parquet', disable=len(files) < 2):
        table = read_parquet(path)
        frames.append(parquet_rows_to_frame(table, str(path), verify_images, start_index=offset,
                                            left_out=left_out))
        offset += len(table)
    return pd.concat(frames, ignore_index=True)


def read_parquet(path: Path) -> pd.DataFrame:
    """One parquet file as a table; a damaged or cut file is one ReMIDataError naming it."""
    import pyarrow as pa
    try:
        return pd.read_parquet(path)
    except (pa.ArrowException, OSError) as err:
        raise ReMIDataError(f'{path}: not a readable parquet file ({unreadable_reason(err)}): the download is '
                            'incomplete or damaged; download it again') from None


def download_split(split: str = 'test', cache_dir: str | None = None) -> Path:
    """Fetch <split>.parquet from the Hub; a clear error when the Hub is unreachable."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as err:
        raise RuntimeError('downloading ReMI needs huggingface_hub (pip install huggingface_hub), or pass '
                           '--from DIR with a saved copy of the parquet files') from err
    try:
        return Path(hf_hub_download(repo_id=HF_REPO_ID, filename=f'{split}.parquet', repo_type='dataset',
                                    cache_dir=cache_dir))
    except Exception as err:  # network / auth / missing file: all mean "use --from"
        raise RuntimeError(f'could not download {split}.parquet from huggingface.co/datasets/{HF_REPO_ID} '
                           f'({type(err).__name__}: {err}). Save the parquet files elsewhere and run '
                           f'`vlmeval-ext prepare ReMI --from DIR`.') from err


def write_tsv(frame: pd.DataFrame, out_path: str | os.PathLike) -> Path:
    """The kit's TSV, written atomically, with its `.md5` sidecar (vlmeval_ext.io.write_kit_tsv)."""
    return Path(write_kit_tsv(frame, out_path))


def prepare(name: str, source_dir=None, allow_subset: bool = False) -> str:
    """`vlmeval-ext prepare ReMI [--from DIR]`: the official test split as the kit TSV (the three input modes read
    it). An item that cannot be asked as released stops it with one line; with --allow-subset it is left out and
    counted."""
    import sys

    from vlmeval_ext.io import tsv_path
    from vlmeval_ext.prepare.common import EXPECTED_ITEMS, check_item_count
    split = name.replace('_labelled', '').replace('_composite', '')
    if split != 'ReMI':
        raise DataError(f'{name} ships with the package; prepare builds ReMI from the official parquet')
    try:
        files = find_split_files(source_dir) if source_dir else [download_split('test')]
    except (FileNotFoundError, RuntimeError) as err:
        raise DataError(f'prepare {name}: {err}') from err
    left_out: list[str] | None = [] if allow_subset else None
    frame = convert_files(files, left_out=left_out)
    for line in left_out or []:
        print(f'[vlmeval-ext] WARNING: {line}; left out (--allow-subset)', file=sys.stderr)
    check_item_count('ReMI', ', '.join(map(str, files)), len(frame), EXPECTED_ITEMS['ReMI'], allow_subset)
    return str(write_tsv(frame, tsv_path(split)))
