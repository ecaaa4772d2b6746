"""Strict loading checks for the plugin's dataset classes (pure: no kit import; vlmeval_ext.datasets uses them).

Before the kit's `ImageBaseDataset.__init__` sees a table, `kit_ready_table` validates what it will touch, so the
kit never runs our data as code and every error names the file, row and column:

- `index`: present, unique, and each value a plain integer or a name (letters, digits, '_' and '-', starting
  with a letter): the kit runs each index through Python's `eval` to test whether all are integers;
- `image`: no empty cell; each cell one base64 image, a list of them (JSON or Python literal, rewritten as a
  plain list literal, which is what the kit evaluates), or the index of another row holding an image;
- `image_path`: no empty cell; list cells parsed into Python lists (the kit would eval them).

A row whose image cell is not a decodable image is left out of the run with one line naming file, row or index
and column, and the rest runs; evaluate counts it as a missing item (vlmeval_ext.predictions).

Image files: a name from data can never leave the image folder (`safe_join`), and an image folder holds only images
dumped from the TSV now in place: it carries that TSV's md5 (`.source_md5`), and when the TSV changes (a new
`prepare`, a corrected release) the folder's images are removed first, with one line saying so (`images_from_tsv`).
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

from vlmeval_ext.io import DataError, parse_list_cell, require_columns

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
        if text not in has_image:   # e.g. a saved error page or a PNG header: this row has no image
            raise BadImageCell(f'{where}: {text[:40]!r} is neither an image nor the index of a row holding one')
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


