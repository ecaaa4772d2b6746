"""The thin base every image dataset class of vlmeval-ext derives from (imports the kit).

`ExtImageDataset` is a kit `ImageBaseDataset` built the kit's way: the kit's own `__init__` runs (image-index
references, list cells, integer indices, `post_build`), and `DATASET_URL` / `DATASET_MD5` mean what they mean in
the kit (the URL of a hosted TSV, '' when none is hosted; the md5 of that TSV). Only `load_data` is ours. It finds
`$LMUData/<name>.tsv` (a shipped demo split is copied there first; a hosted one is downloaded), checks its md5
(DATASET_MD5, else the `.md5` sidecar `prepare` writes; a mismatch is an error, never a silent re-download),
reads every cell as text and validates what the kit's `__init__` will touch, so the kit never runs our data as
code:

- `index`: present, unique, and each value a plain integer or a name (letters, digits, '_' and '-', starting
  with a letter): the kit runs each index through Python's `eval` to test whether all are integers;
- `image`: no empty cell; each cell one base64 image, a list of them (JSON or Python literal, rewritten as a
  plain list literal, which is what the kit evaluates), or the index of another row holding an image;
- `image_path`: no empty cell; list cells parsed into Python lists (the kit would eval them).

After the kit's `__init__`, `post_build` dumps every row's image(s) (build_prompt reuses the files): a row whose
image cell is not a decodable image is left out of the run with one line naming file, row or index and column, and
the rest runs (`leave_out_bad_images`); evaluate counts it as a missing item (core.coverage).

`dump_image` is ours too: image names from data can never leave the image folder, and the image folder holds
only images dumped from the TSV now in place: it carries that TSV's md5 (`.source_md5`), and when the TSV changes
(a new `prepare`, a corrected release) the folder's images are removed first, with one line saying so, and written
again from the new TSV (`images_from_tsv`).
"""
from __future__ import annotations

import fcntl
import os
import os.path as osp
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
from vlmeval.dataset.image_base import ImageBaseDataset

from vlmeval_ext.core.evaluation import ExtEvaluation
from vlmeval_ext.core.io import (DataError, file_md5, lmu_data_root, parse_list_cell, read_table, require_columns,
                                 stem_path, tsv_path)

__all__ = ['ExtImageDataset', 'BadImageCell', 'image_problem', 'write_image_cell', 'default_suffix', 'safe_join', 'lmu_data_root',
           'tsv_path', 'stem_path', 'kit_ready_table', 'images_from_tsv', 'SAFE_INDEX']

# What the kit's `eval` of an index may see: an integer, or a name that is no Python constant.
SAFE_INDEX = re.compile(r'-?[0-9]+|[A-Za-z][A-Za-z0-9_\-]*')
_PY_CONSTANTS = {'True', 'False', 'None'}
_BASE64 = re.compile(r'[A-Za-z0-9+/=\r\n]+')
# The kit's rule: an image cell of at most 64 characters names the row holding the image.
KIT_REFERENCE_MAX = 64


def safe_join(root: str, name: str, where: str) -> str:
    """Join an image name from data under root; refuse absolute paths and '..' (nothing written outside)."""
    if not name or osp.isabs(name) or '..' in Path(name).parts or name.startswith(('~', '\\')):
        raise DataError(f'{where}: image name {name!r} is absolute or leaves the image folder')
    path = osp.normpath(osp.join(root, name))
    if not path.startswith(osp.normpath(root) + os.sep):
        raise DataError(f'{where}: image name {name!r} leaves the image folder')
    return path


IMAGE_STAMP = '.source_md5'     # in an image folder: the md5 of the TSV its images were dumped from
_IMAGE_LOCK = '.lock'


def images_from_tsv(folder: str, md5: str, tsv: str) -> int:
    """Make `folder` an image folder of the TSV whose md5 is `md5`: when it holds files dumped from another TSV
    (another md5, or no stamp), remove them first and say so on stderr. Returns the number of entries removed.
    Safe with several processes (ranks) at once: the check and the clean-up hold an exclusive lock."""
    os.makedirs(folder, exist_ok=True)
    with open(osp.join(folder, _IMAGE_LOCK), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = osp.join(folder, IMAGE_STAMP)
        old = Path(stamp).read_text().strip() if osp.exists(stamp) else None
        if old == md5:
            return 0
        stale = [n for n in os.listdir(folder) if n not in (IMAGE_STAMP, _IMAGE_LOCK)]
        for name in stale:
            path = osp.join(folder, name)
            if osp.isdir(path) and not osp.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        tmp = f'{stamp}.tmp{os.getpid()}'
        Path(tmp).write_text(md5 + '\n')
        os.replace(tmp, stamp)
    if stale:
        was = f'md5 {old}' if old else 'an unrecorded version'
        print(f'[vlmeval-ext] INFO: {folder}: {len(stale)} image file(s) were dumped from another {tsv} ({was}); '
              f'removed, written again from the current one (md5 {md5})', file=sys.stderr, flush=True)
    return len(stale)


def image_problem(image, decode: bool = True) -> str | None:
    """Why a base64 image (or a list of them) cannot be decoded, or None when every one decodes. decode=False reads
    the base64 and the image header only (fast; a truncated image body is not noticed)."""
    import base64
    import binascii
    import io

    from PIL import Image
    for k, cell in enumerate(image if isinstance(image, list) else [image]):
        try:
            raw = base64.b64decode(str(cell), validate=True)
            with Image.open(io.BytesIO(raw)) as im:
                if decode:
                    im.load()
        except (binascii.Error, ValueError, OSError, Image.DecompressionBombError) as err:
            item = f' (list item {k})' if isinstance(image, list) else ''
            return f'not a decodable base64 image{item} ({type(err).__name__}: {str(err)[:80]})'
    return None


# Encoded images a model reads as they are stored: file signature -> the suffixes they are written under unchanged.
_STORED_AS_IS = {b'\xff\xd8\xff': ('.jpg', '.jpeg'), b'\x89PNG\r\n\x1a\n': ('.png',)}


def _cell_bytes(cell) -> bytes:
    import base64
    return base64.b64decode(str(cell))        # as the kit decodes a cell (characters outside base64 ignored)


def default_suffix(cell) -> str:
    """The file suffix of a base64 image cell written under a default name: '.jpg' for a JPEG, else '.png'
    (read from the cell's first 8 characters: this runs for every prompt)."""
    try:
        return '.jpg' if _cell_bytes(str(cell)[:8]).startswith(b'\xff\xd8\xff') else '.png'
    except ValueError:                          # not base64: write_image_cell says so, naming the row
        return '.png'


def write_image_cell(cell, path: str, where: str) -> None:
    """Write one base64 image cell to `path`, atomically. A JPEG or PNG without alpha or palette, going to a file
    of its own kind, is written as its stored bytes (exact, and no re-encoding: a photo's PNG encoding costs
    ~0.25 s); any other image the kit's way (decoded, RGBA / P / LA converted to RGB, saved in the format of the
    suffix). BadImageCell, naming the row, when the cell is not a decodable image (the whole image is decoded,
    so a truncated one is caught)."""
    import io

    from PIL import Image
    try:
        raw = _cell_bytes(cell)
        with Image.open(io.BytesIO(raw)) as image:
            image.load()
            suffix = osp.splitext(path)[1].lower()
            as_is = image.mode in ('RGB', 'L') and any(raw.startswith(magic) and suffix in suffixes
                                                        for magic, suffixes in _STORED_AS_IS.items())
            converted = None if as_is else (image.convert('RGB') if image.mode in ('RGBA', 'P', 'LA') else image.copy())
    except (ValueError, OSError, Image.DecompressionBombError) as err:   # binascii.Error is a ValueError
        raise BadImageCell(f'{where}, column \'image\': not a decodable base64 image '
                           f'({type(err).__name__}: {str(err)[:80]})') from err
    os.makedirs(osp.dirname(path), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}{osp.splitext(path)[1]}'
    try:
        if as_is:
            with open(tmp, 'wb') as f:
                f.write(raw)
        else:
            try:
                converted.save(tmp)
            except (ValueError, OSError) as err:  # e.g. a mode the suffix's format cannot store
                raise BadImageCell(f'{where}, column \'image\': cannot be written as {osp.basename(path)} '
                                   f'({type(err).__name__}: {str(err)[:80]})') from err
        os.replace(tmp, path)
    finally:
        if osp.exists(tmp):
            os.remove(tmp)


def _text(value) -> str:
    """A cell as text ('' for an empty cell, whichever way the reader returned it)."""
    if value is None or (isinstance(value, float) and value != value):
        return ''
    return value if isinstance(value, str) else str(value)


def _check_index(values: list[str], path) -> None:
    seen: dict[str, int] = {}
    for row, value in enumerate(values):
        where = f'{path}: row {row + 2}, column \'index\''
        if not SAFE_INDEX.fullmatch(value) or value in _PY_CONSTANTS:
            raise DataError(f'{where}: {value!r} is not a plain integer or name (letters, digits, _ and -, '
                            'starting with a letter)')
        if value in seen:
            raise DataError(f'{where}: duplicate index {value!r} (first at row {seen[value] + 2})')
        seen[value] = row


class BadImageCell(DataError):
    """One row's image cell holds no usable image: that row is left out of a run and counted (not the file)."""


def _image_cell(value: str, row: int, path, has_image: set[str]) -> str:
    """The kit-ready text of one image cell (see the module docstring)."""
    where = f'{path}: row {row + 2}, column \'image\''
    text = value.strip()
    if not text:
        raise DataError(f'{where}: empty (every row needs an image, or the index of a row holding one)')
    if text.startswith('['):
        images = [_text(x) for x in parse_list_cell(text, path, row + 2, 'image')]
        if not images:
            raise DataError(f'{where}: an empty list of images')
        for k, image in enumerate(images):
            if len(image) <= KIT_REFERENCE_MAX or not _BASE64.fullmatch(image):
                raise BadImageCell(f'{where}: list item {k} is not a base64 image')
        return str(images)          # a plain literal of base64 strings: what the kit's toliststr evaluates
    if len(text) <= KIT_REFERENCE_MAX:
        if text not in has_image:
            raise DataError(f'{where}: {text!r} is neither an image nor the index of a row holding one')
        return text
    if not _BASE64.fullmatch(text):
        raise BadImageCell(f'{where}: not a base64 image (characters outside A-Z a-z 0-9 + / =)')
    return text


def _image_path_cell(value: str, row: int, path):
    where = f'{path}: row {row + 2}, column \'image_path\''
    text = value.strip()
    if not text:
        raise DataError(f'{where}: empty')
    if text.startswith('[') and text.endswith(']'):
        paths = [_text(x) for x in parse_list_cell(text, path, row + 2, 'image_path')]
        if not paths or not all(paths):
            raise DataError(f'{where}: an empty list or an empty path')
        return paths                # a list: the kit's toliststr takes it as is (no eval)
    return text


def kit_ready_table(data: pd.DataFrame, path, required=('index',), image_rows=None,
                    bad_rows: dict | None = None) -> pd.DataFrame:
    """Validate a dataset table and put the columns the kit's `ImageBaseDataset.__init__` reads into a form it
    takes without running anything: `index` as text, `image` / `image_path` cells as described in the module
    docstring. `image_rows` (a boolean mask) names the rows that must have an image (default: every row); the
    others must leave it empty. Errors name the file, row and column. With `bad_rows` (a dict), a row whose image
    cell is not base64 is not an error: it is dropped, with the rows that share its image, and recorded there
    ({index: reason})."""
    require_columns(data, tuple(required), path)
    data = data.reset_index(drop=True)
    data['index'] = [_text(x).strip() for x in data['index']]
    _check_index(list(data['index']), path)
    if 'image' in data:
        cells = [_text(x) for x in data['image']]
        mask = [True] * len(cells) if image_rows is None else [bool(x) for x in image_rows]
        has_image = {i for i, c, m in zip(data['index'], cells, mask) if m and len(c.strip()) > KIT_REFERENCE_MAX}
        out, bad = [], {}
        for row, (cell, needed) in enumerate(zip(cells, mask)):
            if needed:
                try:
                    out.append(_image_cell(cell, row, path, has_image))
                except BadImageCell as err:
                    if bad_rows is None:
                        raise
                    bad[data['index'][row]] = str(err)
                    out.append(None)
            elif cell.strip():
                raise DataError(f'{path}: row {row + 2}, column \'image\': this row takes no image')
            else:
                out.append(None)
        for row, (index, cell) in enumerate(zip(data['index'], out)):
            if isinstance(cell, str) and len(cell) <= KIT_REFERENCE_MAX and cell in bad:
                bad[index] = f'{path}: row {row + 2}, column \'image\': its image is that of index {cell}: {bad[cell]}'
        data['image'] = out
        if bad:
            bad_rows.update(bad)
            data = data[~data['index'].isin(bad)].reset_index(drop=True)
    if 'image_path' in data:
        data['image_path'] = [_image_path_cell(_text(x), row, path) for row, x in enumerate(data['image_path'])]
    return data


class ExtImageDataset(ExtEvaluation, ImageBaseDataset):
    """Base of our image datasets: a benchmark's evaluator (names, files, `evaluate`; see core.evaluation) made a
    kit `ImageBaseDataset`. A subclass implements `build_prompt` (and `load_data` when it needs more). It keeps the
    kit's `__init__(dataset, skip_noimg)`: the kit's run.py passes every CLI argument whose name is a parameter."""

    # Stop models (InternVL, Qwen-VL, ...) from replacing our official prompts with their own.
    force_use_dataset_prompt = True

    def image_rows(self, data: pd.DataFrame):
        """Which rows must hold an image (default: all)."""
        return None

    # ---- loading (the kit's __init__ calls this) -------------------------------------------------------------
    def ensure_tsv(self, dataset: str) -> str:
        """`$LMUData/<dataset>.tsv`, placed there first when it ships with the package or is hosted."""
        path = tsv_path(dataset)
        self.data_path = path
        if osp.exists(path):
            return path
        if dataset in self.DEMO_DATASETS:
            shutil.copyfile(self.demo_tsv(dataset), path)
            return path
        url = self.DATASET_URL.get(dataset, '')
        if url:
            self._download(dataset, url, path)
            return path
        raise DataError(f'{path}: dataset TSV not found. Build it with `vlmeval-ext prepare {dataset}` '
                        f'(offline: `vlmeval-ext prepare {dataset} --from DIR`); LMUData={lmu_data_root()}')

    def _download(self, dataset: str, url: str, path: str) -> None:
        """The hosted TSV, downloaded with the kit's download_file into a temporary name, md5-checked, renamed."""
        from vlmeval.smp import download_file
        partial = f'{path}.partial{os.getpid()}'
        try:
            download_file(url, partial)
        except Exception as err:  # the kit raises a bare Exception for every download failure
            if osp.exists(partial):
                os.remove(partial)
            raise DataError(f'{dataset}: could not download {url} ({err}); build it locally with '
                            f'`vlmeval-ext prepare {dataset} --from DIR`') from err
        expected = self.DATASET_MD5.get(dataset)
        if expected and file_md5(partial) != expected:
            os.remove(partial)
            raise DataError(f'{url}: the downloaded file\'s md5 is not the expected {expected}')
        os.replace(partial, path)

    def check_md5(self, dataset: str, path: str) -> str:
        """The TSV's md5, checked against DATASET_MD5 (else the `.md5` sidecar of `prepare`) when one is known."""
        expected = self.DATASET_MD5.get(dataset)
        sidecar = path + '.md5'
        if expected is None and osp.exists(sidecar):
            expected = Path(sidecar).read_text().strip()
        actual = file_md5(path)
        if expected and actual != expected:
            raise DataError(f'{path}: md5 {actual} does not match the expected {expected}; the file is damaged '
                            f'or from another source. {self.md5_fix(dataset, path)}')
        return actual

    def md5_fix(self, dataset: str, path: str) -> str:
        """What fixes a TSV whose md5 is wrong: a shipped demo split is copied again once the damaged copy is
        removed; any other split is rebuilt by `prepare`."""
        if dataset in self.DEMO_DATASETS:
            return f'It ships with the package: delete it (`rm {path}`) and the next run copies it again'
        return f'Rebuild it with `vlmeval-ext prepare {dataset}` (offline: `--from DIR`)'

    def load_data(self, dataset):
        path = self.ensure_tsv(dataset)
        self.tsv_md5 = self.check_md5(dataset, path)
        data = read_table(path)
        self.bad_image_rows = {}
        return kit_ready_table(data, path, self.REQUIRED_COLUMNS, self.image_rows(data), self.bad_image_rows)

    def post_build(self, dataset):
        """The kit's hook after its __init__: leave out the rows whose image does not decode (see
        `leave_out_bad_images`)."""
        self.leave_out_bad_images()

    def leave_out_bad_images(self) -> dict:
        """Dump every row's image(s) now (build_prompt reuses them); a row whose image cell is not a decodable
        image is left out of the run (the rest runs), with one line each naming file, row or index and column,
        and kept in `bad_image_rows` ({index: reason}); evaluate counts such a row as a missing item with that
        reason. A file whose every row is bad is an error."""
        bad = dict(getattr(self, 'bad_image_rows', None) or {})
        if 'image' in self.data and not self.meta_only:
            for _, line in self.data.iterrows():
                image = line['image']
                if image is None or (isinstance(image, float) and image != image) or (isinstance(image, str)
                                                                                       and not image):
                    continue            # a row that takes no image (RoCOCO retrieval's text rows)
                try:
                    self.check_row_images(line)
                except BadImageCell as err:         # an unsafe image name stays an error of the whole file
                    bad[str(line['index'])] = str(err)
        self.bad_image_rows = bad
        if not bad:
            return bad
        self.data = self.data[~self.data['index'].astype(str).isin(list(bad))].reset_index(drop=True)
        if self.data.empty:
            raise DataError(f'{getattr(self, "data_path", self.dataset_name)}: no row holds a decodable image '
                            f'(first: {next(iter(bad.values()))})')
        for reason in bad.values():
            print(f'[vlmeval-ext] WARNING: {reason}; this row is left out of the run and counted as a missing item',
                  file=sys.stderr, flush=True)
        return bad

    def check_row_images(self, line) -> None:
        """Raise BadImageCell when the row's image(s) cannot be decoded; by default by dumping them (build_prompt
        reuses the files)."""
        self.dump_image(line)

    tsv_md5: str | None = None
    _images_checked: str | None = None

    def image_folder(self, folder: str | None = None) -> str:
        """img_root (or `folder`, where this dataset's images go), emptied first when its images were dumped from
        another version of the TSV (checked once per folder)."""
        folder = folder or self.img_root
        if self.tsv_md5 and self._images_checked != folder:
            images_from_tsv(folder, self.tsv_md5, getattr(self, 'data_path', None) or self.dataset_name)
            self._images_checked = folder
        os.makedirs(folder, exist_ok=True)
        return folder

    def dump_image(self, line):
        """Write the row's image(s) into img_root (never outside it, see `write_image_cell`); returns the paths.
        Without an `image_path` column a row's files are `<index>.jpg` for a JPEG, else `<index>.png` (with
        `_<k>` before the suffix for the k-th of several)."""
        from vlmeval.smp import read_ok
        self.image_folder()
        where = f'{self.data_path}: index {line["index"]}'
        images = line['image'] if isinstance(line['image'], list) else [line['image']]
        names = line.get('image_path') if 'image_path' in line else None
        if names is None or (isinstance(names, float) and pd.isna(names)):
            stems = [f'{line["index"]}'] if len(images) == 1 else [f'{line["index"]}_{i}' for i in range(len(images))]
            names = [stem + default_suffix(image) for stem, image in zip(stems, images)]
        names = names if isinstance(names, list) else [names]
        if len(names) != len(images):
            raise DataError(f'{where}: {len(images)} images but {len(names)} image_path entries')
        paths = []
        for image, name in zip(images, names):
            path = safe_join(self.img_root, str(name), where)
            if not read_ok(path):
                write_image_cell(image, path, where)
            paths.append(path)
        return paths
