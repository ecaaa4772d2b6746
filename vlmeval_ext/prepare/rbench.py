"""Official R-Bench release -> one kit TSV of 2 x 1,485 rows (variant ref / dis sharing a pair id).

Sources (dataset_specs/rbench.yaml, `sources`):
  * ModelScope  MsDataset.load('R-Bench', namespace='lcysyzxdxc', subset_name='default', split='test')
  * Hugging Face dataset lcysyzxdxc/R-Bench, file All.parquet
  * --from DIR, a local copy, one of:
      - a dataset saved with `datasets` (save_to_disk: dataset_info.json / state.json), read with load_from_disk
      - a parquet file, or a folder holding parquet files at any depth (the HF All.parquet, or a Hugging Face
        snapshot as downloaded: data/test-00000-of-00001.parquet)
      - a folder with the question bank Ref_Release.csv (latin-1) and two image folders: ref_image/ (or ref/) and
        dis_image/ (or dis/). Images are named by the item's 0-based row in Ref_Release.csv (`17.jpg`,
        any extension); a reference image may instead carry the item's `name` (MMBench_35.jpg).
No images are embedded here: the output TSV carries each image's original bytes base64-encoded.
"""
from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path
from typing import Iterable, Iterator

from vlmeval_ext.dataset.utils.rbench_full import parse_captions
from vlmeval_ext.offline.judge import parse_choices
from vlmeval_ext.io import DataError, unreadable_reason
# The text cells, the files read, the rows and their writing are the exported build script's
# (scripts/build_rbench_full_tsv.py in the pull request), so the TSV the plugin builds and the one a maintainer
# builds are the same bytes.
from vlmeval_ext.scripts.build_rbench_full_tsv import TEXT_FIELDS as _TEXT_FIELDS
from vlmeval_ext.scripts.build_rbench_full_tsv import cell as _cell
from vlmeval_ext.scripts.build_rbench_full_tsv import parquet_files, parquet_rows, tsv_rows, write_rows
from vlmeval_ext.spec import load_spec


class RBenchDataError(DataError):
    """Bad official data: the message names the file, row and column."""


def _int_field(raw, lo: int, hi: int, where: str) -> int:
    if isinstance(raw, bool) or str(raw).strip().lower() in ('true', 'false'):
        raise RBenchDataError(f'{where}: {raw!r} is a boolean, not an integer')
    try:
        value = int(float(raw))
    except (TypeError, ValueError):
        raise RBenchDataError(f'{where}: {raw!r} is not an integer') from None
    if not lo <= value <= hi or float(raw) != value:
        raise RBenchDataError(f'{where}: {raw!r} is outside {lo}-{hi}')
    return value


def _image_bytes(value, where: str) -> bytes:
    """HF/ModelScope image feature ({'bytes': ..., 'path': ...}), raw bytes, or a PIL image -> encoded bytes."""
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    elif isinstance(value, dict):
        data = value.get('bytes')
        if not data and value.get('path') and Path(value['path']).is_file():
            data = Path(value['path']).read_bytes()
    elif hasattr(value, 'save'):  # PIL image (datasets decodes Image features by default)
        buf = io.BytesIO()
        value.save(buf, format=value.format or 'PNG')
        data = buf.getvalue()
    else:
        data = None
    if not data:
        raise RBenchDataError(f'{where}: no image bytes')
    from vlmeval_ext.prepare.common import check_image_bytes
    check_image_bytes(bytes(data), where)          # a saved error page, a PNG header only: refused here
    return bytes(data)


def validate_item(raw: dict, source: str, row: int, warnings: list | None = None) -> dict:
    """Check one official record and return it normalised (images untouched)."""
    def where(col):
        return f'{source} row {row} column {col}'
    for col in _TEXT_FIELDS + ('distortion', 'strength'):
        if col not in raw:
            raise RBenchDataError(f'{where(col)}: missing')
    item = {col: _cell(raw[col]) for col in _TEXT_FIELDS}
    if item['type'] not in ('MCQ', 'VQA', 'CAP'):
        raise RBenchDataError(f'{where("type")}: {item["type"]!r} is not MCQ, VQA or CAP')
    item['distortion'] = _int_field(raw['distortion'], 1, 33, where('distortion'))
    item['strength'] = _int_field(raw['strength'], 1, 3, where('strength'))
    if item['type'] == 'MCQ':
        try:
            options = parse_choices(item['choice'])
        except ValueError as err:
            raise RBenchDataError(f'{where("choice")}: {err}') from None
        if not re.fullmatch(r'[A-Z]', item['answer'].strip()):
            raise RBenchDataError(f'{where("answer")}: {item["answer"]!r} is not an option letter')
        if item['answer'].strip() not in options and warnings is not None:
            # The release has one such item (row 1403: answer C, options A-B); it is kept as released (the
            # judge sees the official answer) and reported, never silently changed.
            warnings.append(f'{where("answer")}: answer {item["answer"]!r} is not among the options '
                            f'{sorted(options)}')
    elif item['type'] == 'CAP':
        try:
            parse_captions(item['answer'])
        except ValueError as err:
            raise RBenchDataError(f'{where("answer")}: {err}') from None
    elif not item['answer'].strip():
        raise RBenchDataError(f'{where("answer")}: empty VQA answer')
    return item


def read_question_bank(path: str | Path, warnings: list | None = None) -> list[dict]:
    """Ref_Release.csv (latin-1, as released) -> validated items in release order (data warnings appended)."""
    path = Path(path)
    encoding = load_spec('rbench')['sources']['question_bank']['encoding']
    with open(path, encoding=encoding, newline='') as f:
        reader = csv.DictReader(f)
        # row numbers are 1-based data rows (the header is line 1 of the file)
        return [validate_item(rec, str(path), i, warnings) for i, rec in enumerate(reader, 1)]


# ------------------------------------------------------------------------------------------------ sources
def records_from_table(rows: Iterable[dict], source: str,
                       warnings: list | None = None) -> Iterator[tuple[dict, bytes, bytes]]:
    """Official records with ref_image/dis_image -> (item, ref bytes, dis bytes)."""
    for i, raw in enumerate(rows, 1):
        item = validate_item(raw, source, i, warnings)
        for col in ('ref_image', 'dis_image'):
            if col not in raw:
                raise RBenchDataError(f'{source} row {i} column {col}: missing')
        yield (item, _image_bytes(raw['ref_image'], f'{source} row {i} column ref_image'),
               _image_bytes(raw['dis_image'], f'{source} row {i} column dis_image'))


def _parquet_rows(path: Path, batch_rows: int = 32) -> Iterator[dict]:
    """The rows of a parquet file, one row group at a time: memory holds one group, never the whole file.

    (pyarrow, which pandas and the kit already need; the Hugging Face export writes 100 rows per group.)"""
    import pyarrow as pa
    try:
        yield from parquet_rows(path, batch_rows)
    except (pa.ArrowException, OSError) as err:
        raise RBenchDataError(f'{path}: not a readable parquet file ({unreadable_reason(err)}): the download is '
                              'incomplete or damaged; download it again') from None


def _find_image(folder_names: tuple[str, ...], root: Path, stems: list[str]) -> Path | None:
    for folder in folder_names:
        d = root / folder
        if not d.is_dir():
            continue
        for stem in stems:
            exact = d / stem
            if exact.is_file():
                return exact
            hits = sorted(d.glob(f'{stem}.*'))
            if hits:
                return hits[0]
    return None


def _folder_records(root: Path, warnings: list | None = None) -> Iterator[tuple[dict, bytes, bytes]]:
    csv_path = root / load_spec('rbench')['sources']['question_bank']['file']
    items = read_question_bank(csv_path, warnings)
    for row, item in enumerate(tqdm_iter(items, 'reading images'), 0):
        ref = _find_image(('ref_image', 'ref'), root, [str(row), item['name']])
        dis = _find_image(('dis_image', 'dis'), root, [str(row)])
        for kind, path in (('ref_image', ref), ('dis_image', dis)):
            if path is None:
                raise RBenchDataError(f'{csv_path} row {row + 1} column {kind}: no image {row}.* in '
                                      f'{root}/{kind} (or {root}/{kind[:3]})')
        from vlmeval_ext.prepare.common import check_image_bytes
        yield item, check_image_bytes(ref.read_bytes(), str(ref)), check_image_bytes(dis.read_bytes(), str(dis))


def tqdm_iter(items, desc: str):
    from tqdm import tqdm
    return tqdm(items, desc=desc, unit='item', leave=False)


def records_from_dir(path: str | Path, warnings: list | None = None) -> Iterator[tuple[dict, bytes, bytes]]:
    """A local copy of the release (see module docstring)."""
    path = Path(path)
    if path.is_file() and path.suffix == '.parquet':
        yield from records_from_table(_parquet_rows(path), str(path), warnings)
        return
    if not path.is_dir():
        raise RBenchDataError(f'--from {path}: no such folder or parquet file')
    if (path / 'state.json').is_file() or (path / 'dataset_dict.json').is_file():
        try:
            from datasets import load_from_disk
        except ImportError as err:
            raise RBenchDataError(f'--from {path} is a saved Hugging Face dataset; `pip install datasets` '
                                  'to read it') from err
        ds = load_from_disk(str(path))
        if hasattr(ds, 'keys'):  # DatasetDict: the release has one split
            splits = list(ds.keys())
            ds = ds['test'] if 'test' in splits else ds[splits[0]]
        yield from records_from_table(iter(ds), str(path), warnings)
        return
    # A Hugging Face snapshot as downloaded keeps its parquet files in subfolders (data/test-00000-of-00001.parquet);
    # the hub's own cache folders (.cache/, .huggingface/) are not data.
    parquets = parquet_files(path)
    if parquets:
        for p in parquets:
            yield from records_from_table(_parquet_rows(p), str(p), warnings)
        return
    if (path / load_spec('rbench')['sources']['question_bank']['file']).is_file():
        yield from _folder_records(path, warnings)
        return
    raise RBenchDataError(f'--from {path}: found neither a saved dataset (state.json), a parquet file, nor '
                          'Ref_Release.csv with ref_image/ and dis_image/ folders')


def records_from_modelscope(warnings: list | None = None) -> Iterator[tuple[dict, bytes, bytes]]:
    src = load_spec('rbench')['sources']['modelscope']
    try:
        from modelscope.msdatasets import MsDataset
    except ImportError as err:
        raise RBenchDataError('ModelScope source needs `pip install modelscope` (or use --from DIR)') from err
    ds = MsDataset.load(src['dataset'], namespace=src['namespace'], subset_name=src['subset_name'],
                        split=src['split'])
    yield from records_from_table(iter(ds), f'modelscope:{src["namespace"]}/{src["dataset"]}', warnings)


def records_from_huggingface(warnings: list | None = None) -> Iterator[tuple[dict, bytes, bytes]]:
    src = load_spec('rbench')['sources']['huggingface']
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as err:
        raise RBenchDataError('Hugging Face source needs `pip install huggingface_hub` (or use --from DIR)') from err
    try:
        local = hf_hub_download(src['repo_id'], src['data_file'], repo_type=src['repo_type'])
    except Exception as err:  # network / auth errors of many kinds: report them with the way out
        raise RBenchDataError(f'could not download {src["repo_id"]}/{src["data_file"]} from Hugging Face '
                              f'({type(err).__name__}: {err}); download it elsewhere and use --from DIR') from err
    yield from records_from_table(_parquet_rows(Path(local)), f'hf:{src["repo_id"]}/{src["data_file"]}',
                                  warnings)


def open_source(source: str | Path | None, warnings: list | None = None) -> Iterator[tuple[dict, bytes, bytes]]:
    """'modelscope', 'huggingface'/'hf', or a local path."""
    if source in (None, 'huggingface', 'hf'):
        return records_from_huggingface(warnings)
    if source == 'modelscope':
        return records_from_modelscope(warnings)
    return records_from_dir(source, warnings)


# ------------------------------------------------------------------------------------------------- output
def write_tsv(records: Iterable[tuple[dict, bytes, bytes]], out: str | Path, expect_items: int | None = None) -> int:
    """Write the kit TSV; returns the number of rows. `expect_items` (1485 for the release) is checked."""
    from vlmeval_ext.io import building
    csv.field_size_limit(sys.maxsize)
    with building(out) as tmp:
        with open(tmp, 'w', encoding='utf-8', newline='') as f:
            n = write_rows(tsv_rows(records), f)
        if expect_items is not None and n != 2 * expect_items:
            raise RBenchDataError(f'expected {expect_items} items ({2 * expect_items} rows), the source gave '
                                  f'{n // 2}')
    return n


def build_tsv(source: str | Path | None, out: str | Path, allow_subset: bool = False) -> dict:
    """Write the 2,970-row TSV. Returns {'rows': n, 'warnings': [...]}: data oddities kept as released (each names
    file, row, column)."""
    expected = None if allow_subset else int(load_spec('rbench')['n_items'])
    warnings: list[str] = []
    rows = write_tsv(open_source(source, warnings), out, expected)
    for w in warnings:
        print(f'R-Bench data warning: {w}', file=sys.stderr)
    return {'rows': rows, 'warnings': warnings}


SUBSETS = ('R-Bench-Full-MCQ', 'R-Bench-Full-VQA', 'R-Bench-Full-CAP')


def prepare(name: str, source_dir=None, allow_subset: bool = False) -> str:
    """`vlmeval-ext prepare R-Bench-Full [--from DIR]` (a task subset builds R-Bench-Full.tsv, which holds it), with
    the `.md5` sidecar the loader checks."""
    from vlmeval_ext.io import tsv_path, write_md5_sidecar
    if name not in ('R-Bench-Full', *SUBSETS):
        raise DataError(f'`prepare` builds R-Bench-Full (and its task subsets); {name} ships with the package')
    path = tsv_path('R-Bench-Full')
    build_tsv(source_dir, path, allow_subset=allow_subset)
    write_md5_sidecar(path)
    return path


# ------------------------------------------------------------------------------------- the official outputs
def read_outputs(path: str | Path, bank: list[dict]) -> list[str]:
    """A model's outputs in the release's CSV layout (name, answer = the output, type; release order), checked
    against the question bank."""
    path = Path(path)
    with open(path, encoding='utf-8', newline='') as f:
        rows = list(csv.DictReader(f))
    if len(rows) != len(bank):
        raise RBenchDataError(f'{path}: {len(rows)} rows, the question bank has {len(bank)}')
    for i, (row, item) in enumerate(zip(rows, bank), 1):
        for col in ('name', 'type'):
            if row.get(col) != item[col]:
                raise RBenchDataError(f'{path} row {i} column {col}: {row.get(col)!r} != question bank '
                                      f'{item[col]!r}')
    return [row['answer'] for row in rows]


def release_items(bank_csv, ref_csv=None, dis_csv=None) -> list[dict]:
    """The question bank with a model's outputs on both images, as the kit dialect's pair_rows gives items."""
    bank = read_question_bank(bank_csv)
    ref = read_outputs(ref_csv, bank) if ref_csv else [None] * len(bank)
    dis = read_outputs(dis_csv, bank) if dis_csv else [None] * len(bank)
    return [dict(pair_id=i, **{k: b[k] for k in ('name', 'type', 'question', 'choice', 'answer', 'distortion',
                                                   'strength')}, pred_ref=r, pred_dis=d)
            for i, (b, r, d) in enumerate(zip(bank, ref, dis))]
