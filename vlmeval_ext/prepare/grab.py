"""GRAB official source -> kit TSV (index, pid, question, answer, task, category, complexity, image base64 PNG).

Sources (dataset_specs/grab.yaml `sources`):
  * the Hugging Face hub, `jonathan-roberts1/GRAB` split `GRAB` (needs `datasets` and network);
  * `--from DIR` holding the manual-download layout (DIR/grab.json + DIR/images/<pid>.png);
  * `--from DIR` holding a dataset saved with `datasets.Dataset.save_to_disk`.

`vlmeval-ext prepare GRAB [--from DIR] [--allow-subset] [--max-side PX]` runs `prepare`; `python -m
vlmeval_ext.prepare.grab [--from DIR] [--out GRAB.tsv] [--max-side 2048] [--limit N] [--workers N]` builds a TSV
anywhere (smoke runs, benchmarks).
"""
from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import multiprocessing
import os
import re
import sys
from collections import deque
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Union

from vlmeval_ext.io import DataError
# The image and row rules are the exported build script's (scripts/build_grab_tsv.py in the pull request), so the
# TSV the plugin builds and the one a maintainer builds are the same bytes.
from vlmeval_ext.scripts.build_grab_tsv import encode_image, tsv_row, write_rows
from vlmeval_ext.spec import load_spec

if TYPE_CHECKING:
    from PIL import Image

# Tall base64 cells: the csv module's default field limit (128 KiB) is far below one encoded plot.
csv.field_size_limit(sys.maxsize)


class GrabDataError(DataError):
    """Bad GRAB source data; the message names the file, the row and the column."""


@functools.lru_cache(maxsize=1)
def _spec() -> dict:
    return load_spec('grab')


# ----------------------------------------------------------------------------------------------- records

_FIELD_TYPES = {'pid': int, 'question': str, 'answer': str, 'task': str, 'category': str, 'complexity': int}


def validate_record(record: dict, where: str) -> dict:
    """Check one question record's columns and types; return the fields the TSV needs."""
    spec = _spec()
    missing = [c for c in spec['source_columns'] if c not in record]
    if missing:
        raise GrabDataError(f'{where}: missing column(s) {missing}')
    clean = {}
    for column, kind in _FIELD_TYPES.items():
        value = record[column]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise GrabDataError(f'{where}, column {column!r}: expected {kind.__name__}, got {value!r}')
        clean[column] = value
    for column in ('question', 'answer'):
        if not clean[column].strip():
            raise GrabDataError(f'{where}, column {column!r}: empty')
    if clean['task'] not in spec['tasks']:
        raise GrabDataError(f'{where}, column "task": {clean["task"]!r} is not one of {list(spec["tasks"])}')
    if clean['category'] not in spec['categories']:
        raise GrabDataError(f'{where}, column "category": unknown category {clean["category"]!r}')
    if clean['complexity'] not in spec['complexities']:
        raise GrabDataError(f'{where}, column "complexity": {clean["complexity"]} outside {spec["complexities"]}')
    clean['image'] = record['image']
    return clean


def read_grab_json(path: str | Path) -> list[dict]:
    """The question records of grab.json (dict keyed "0".."N-1"), validated, in key order."""
    path = Path(path)
    try:
        with open(path, encoding='utf-8') as f:
            raw = json.load(f)
    except json.JSONDecodeError as err:
        raise GrabDataError(f'{path}: not valid JSON ({err})') from err
    if not isinstance(raw, dict):
        raise GrabDataError(f'{path}: expected an object keyed "0".."N-1", got {type(raw).__name__}')
    for key in raw:
        if not re.fullmatch(r'[0-9]+', str(key)):       # ASCII digits: '²' passes isdigit() and int() refuses it
            raise GrabDataError(f'{path}: row key {key!r} is not a number')
    records, seen = [], {}
    for key in sorted(raw, key=int):
        if not isinstance(raw[key], dict):
            raise GrabDataError(f'{path}, row {key}: expected an object, got {type(raw[key]).__name__}')
        record = validate_record(raw[key], f'{path}, row {key}')
        if record['pid'] in seen:
            raise GrabDataError(f'{path}, row {key}, column "pid": {record["pid"]} is also the pid of row '
                                f'{seen[record["pid"]]} (the TSV index must be unique)')
        seen[record['pid']] = key
        records.append(record)
    return records


# ------------------------------------------------------------------------------------------------- images


# What a source hands over for one image: a file path or encoded bytes (cheap to send to a worker process,
# decoded there), or an already opened PIL image.
ImageSource = Union[str, Path, bytes, 'Image.Image']


def open_source(source: ImageSource):
    """A loaded PIL image from a path, encoded bytes or an opened image."""
    from PIL import Image

    if isinstance(source, (str, Path)):
        with Image.open(source) as img:
            img.load()
            return img
    if isinstance(source, (bytes, bytearray)):
        img = Image.open(io.BytesIO(source))
        img.load()
        return img
    return source


def encode_source(source: ImageSource, max_side: int | None = None) -> str:
    """encode_image of one image source (max_side None: the spec's cap); runs in a worker process (module level,
    so it pickles)."""
    return encode_image(open_source(source), _spec()['image']['max_long_side'] if max_side is None else max_side)


# ------------------------------------------------------------------------------------------------ sources


def release_image_path(root: Path, record: dict) -> Path:
    """The file of a grab.json `image` entry, which must stay inside the release folder: an absolute path, a `..`
    or a symlink that leads outside is refused (GrabDataError naming the entry), never read."""
    entry = record['image']
    where = f'{root / "grab.json"}, pid {record["pid"]}, column "image"'
    if not isinstance(entry, str) or not entry.strip():
        raise GrabDataError(f'{where}: expected a relative file name, got {entry!r}')
    relative = Path(entry)
    if relative.is_absolute() or entry.startswith(('~', '\\')) or '..' in relative.parts or \
            '..' in Path(entry.replace('\\', '/')).parts:
        raise GrabDataError(f'{where}: {entry!r} is absolute or leaves the release folder {root}; refused')
    path = root / relative
    inside = root.resolve()
    resolved = path.resolve()
    if resolved != inside and inside not in resolved.parents:
        raise GrabDataError(f'{where}: {entry!r} is a link to {resolved}, outside the release folder {root}; '
                            'refused')
    return path


def _manual_source(root: Path) -> tuple[list[dict], Callable[[dict], ImageSource]]:
    records = read_grab_json(root / 'grab.json')
    paths = {record['pid']: release_image_path(root, record) for record in records}   # all checked before any read

    def image_source(record) -> Path:
        path = paths[record['pid']]
        if not path.is_file():
            raise GrabDataError(f'{root / "grab.json"}, pid {record["pid"]}, column "image": no file {path} '
                                f'(unzip images.zip into {root})')
        return path
    return records, image_source


def _hf_records(dataset, where: str) -> tuple[list[dict], Callable[[dict], ImageSource]]:
    """Records + image getter from a `datasets.Dataset` whose rows carry `decoded_image`.

    The getter hands over the stored PNG bytes (the column is read with decode=False): images are decoded in
    the worker that encodes them, never all at once and never in the main process.
    """
    import datasets

    image_feature = _spec()['sources']['huggingface']['image_feature']
    if image_feature not in dataset.column_names:
        raise GrabDataError(f'{where}: no column {image_feature!r} (columns: {dataset.column_names})')
    # Read the text columns without decoding every image up front.
    text = dataset.remove_columns([image_feature]).to_list()
    records = [validate_record(row, f'{where}, row {i}') for i, row in enumerate(text)]
    positions = {record['pid']: i for i, record in enumerate(records)}
    raw = dataset.select_columns([image_feature]).cast_column(image_feature, datasets.Image(decode=False))

    def image_source(record) -> ImageSource:
        cell = raw[positions[record['pid']]][image_feature]
        if cell is None or (cell.get('bytes') is None and not cell.get('path')):
            raise GrabDataError(f'{where}, pid {record["pid"]}, column {image_feature!r}: no image')
        return cell['bytes'] if cell.get('bytes') is not None else cell['path']
    return records, image_source


def load_source(source_dir: str | Path | None = None) -> tuple[list[dict], Callable[[dict], ImageSource]]:
    """(records, image source getter) from DIR (manual layout or saved HF dataset) or, without DIR, the HF hub."""
    if source_dir is None:
        try:
            from datasets import load_dataset
        except ImportError as err:
            raise GrabDataError('loading GRAB from the Hugging Face hub needs `pip install datasets`; or download '
                                'grab.json + images.zip by hand and pass --from DIR') from err
        hf = _spec()['sources']['huggingface']
        dataset = load_dataset(hf['repo'], split=hf['split'])
        return _hf_records(dataset, f'hf://{hf["repo"]} split {hf["split"]}')
    root = Path(source_dir)
    if (root / 'grab.json').is_file():
        return _manual_source(root)
    if (root / 'dataset_info.json').is_file() or (root / 'state.json').is_file():
        try:
            from datasets import load_from_disk
        except ImportError as err:
            raise GrabDataError(f'{root} is a saved Hugging Face dataset: reading it needs `pip install datasets`') \
                from err
        return _hf_records(load_from_disk(str(root)), str(root))
    raise GrabDataError(f'{root}: neither the manual layout (grab.json + images/) nor a saved HF dataset '
                        f'(dataset_info.json / state.json)')


# -------------------------------------------------------------------------------------------------- TSV


def default_workers() -> int:
    """Image worker processes: one per available CPU, at most 4 (each holds about 0.25 GB at official size)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


class _InProcess(Executor):
    """workers=1: the same code path without a pool (no process start, easy to debug)."""

    def submit(self, fn, /, *args, **kwargs):
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as err:  # handed to the caller by .result(), as a pool would
            future.set_exception(err)
        return future


def tsv_rows(records: Iterable[dict], image_source: Callable[[dict], ImageSource], max_side: int | None = None,
             progress: bool = True, workers: int | None = None) -> Iterator[dict]:
    """Kit TSV rows in record order; `index` is the pid (stable across subsets).

    Images are decoded, composited, resized and PNG-encoded in `workers` processes (default: one per CPU, at
    most 4), with a bounded window of 2 x workers images in flight: memory stays flat however many questions.
    """
    from tqdm import tqdm

    records = list(records)
    workers = workers or default_workers()
    max_side = _spec()['image']['max_long_side'] if max_side is None else max_side
    pool: Executor = (_InProcess() if workers == 1 else
                      ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context('spawn')))
    with pool, tqdm(total=len(records), desc='GRAB images', disable=not progress) as bar:
        window: deque = deque()

        def finished() -> dict:
            record, source, future = window.popleft()
            try:
                image = future.result()
            except GrabDataError:
                raise
            except Exception as err:  # a corrupt or unreadable image file
                what = source if isinstance(source, (str, Path)) else 'the stored image'
                raise GrabDataError(f'GRAB pid {record["pid"]}, column "image": {what} cannot be read as an image '
                                    f'({type(err).__name__}: {err}); replace it from the official release') from err
            bar.update(1)
            return tsv_row(record, image)

        try:
            for record in records:
                source = image_source(record)
                window.append((record, source, pool.submit(encode_source, source, max_side)))
                if len(window) >= 2 * workers:
                    yield finished()
            while window:
                yield finished()
        finally:
            for _, _, future in window:
                future.cancel()


def write_tsv(rows: Iterable[dict], out_path: str | Path) -> int:
    """Stream rows to a tab-separated file in the spec's column order; return the row count. Written through
    `<out>.part` (see core.io.building): a kill never leaves a half-written GRAB.tsv, and the next build removes
    the `.part` it left, saying so."""
    from vlmeval_ext.io import building
    with building(out_path) as tmp, open(tmp, 'w', encoding='utf-8', newline='') as f:
        return write_rows(rows, f)


def default_tsv_path() -> Path:
    from vlmeval_ext.io import tsv_path
    return Path(tsv_path('GRAB'))


def prepare(name: str, source_dir=None, allow_subset: bool = False, max_side: int | None = None) -> str:
    """`vlmeval-ext prepare GRAB`: $LMUData/GRAB.tsv from the official release (or the Hub), its item count
    checked (a partial copy never takes the dataset's name), and the `.md5` sidecar the loader checks."""
    from vlmeval_ext.io import tsv_path, write_md5_sidecar
    from vlmeval_ext.prepare.common import check_item_count, count_rows
    if name != 'GRAB':
        raise DataError(f'`prepare` builds GRAB only ({name} ships with the package)')
    try:
        path = build_tsv(tsv_path(name), source_dir, max_side=max_side)
    except (ConnectionError, OSError) as err:
        if source_dir is not None:
            raise
        raise DataError(f'prepare GRAB: could not load it from the Hugging Face Hub ({type(err).__name__}: {err}); '
                        'download data/grab.json and images.zip of jonathan-roberts1/GRAB elsewhere and run '
                        '`vlmeval-ext prepare GRAB --from DIR`') from err
    try:
        check_item_count('GRAB', source_dir or 'the Hugging Face source', count_rows(path),
                         _spec()['sources']['expected']['n_items'], allow_subset)
    except DataError:
        os.remove(path)
        raise
    write_md5_sidecar(path)
    return str(path)


def build_tsv(out_path: str | Path | None = None, source_dir: str | Path | None = None,
              max_side: int | None = None, limit: int | None = None, progress: bool = True,
              workers: int | None = None) -> Path:
    """Build the GRAB kit TSV; returns its path. `limit` keeps the first N questions (for smoke runs)."""
    records, image_source = load_source(source_dir)
    expected = _spec()['sources']['expected']['n_items']
    if limit is None and len(records) != expected:
        print(f'warning: GRAB source has {len(records)} questions, the official set has {expected}',
              file=sys.stderr)
    if limit is not None:
        records = records[:limit]
    out_path = Path(out_path) if out_path else default_tsv_path()
    n = write_tsv(tsv_rows(records, image_source, max_side, progress, workers), out_path)
    print(f'wrote {n} GRAB questions to {out_path}')
    return out_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m vlmeval_ext.prepare.grab', description=__doc__.split('\n')[0])
    parser.add_argument('--from', dest='source_dir', help='manual-download DIR (grab.json + images/) or a saved '
                        'HF dataset; default: the Hugging Face hub')
    parser.add_argument('--out', help='output TSV (default: $LMUData/GRAB.tsv)')
    parser.add_argument('--max-side', type=int, default=None,
                        help='cap on the long image side in px (default: the spec, 2048; 0 keeps full size)')
    parser.add_argument('--limit', type=int, default=None, help='first N questions only')
    parser.add_argument('--workers', type=int, default=None, help='image worker processes (default: one per CPU, at most 4)')
    args = parser.parse_args(argv)
    build_tsv(args.out, args.source_dir, args.max_side, args.limit, workers=args.workers)
    return 0


if __name__ == '__main__':
    sys.exit(main())
