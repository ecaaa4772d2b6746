"""The thin base every image dataset class of vlmeval-ext derives from (imports the kit).

`ExtImageDataset` is a kit `ImageBaseDataset` built the kit's way: the kit's own `__init__` runs (image-index
references, list cells, integer indices, `post_build`), and `DATASET_URL` / `DATASET_MD5` mean what they mean in
the kit (the URL of a hosted TSV, '' when none is hosted; the md5 of that TSV). Only `load_data` is ours. It finds
`$LMUData/<name>.tsv` (a shipped demo split is copied there first; a hosted one is downloaded), checks its md5
(DATASET_MD5, else the `.md5` sidecar `prepare` writes; a mismatch is an error, never a silent re-download),
reads every cell as text and validates what the kit's `__init__` will touch, so the kit never runs our data as
code:

- `index`: present, unique, and each value a plain integer or a name (letters, digits, '_' and '-', starting
  with a letter): the kit eval()s each index to test whether all are integers;
- `image`: no empty cell; each cell one base64 image, a list of them (JSON or Python literal, rewritten as a
  plain list literal, which is what the kit evaluates), or the index of another row holding an image;
- `image_path`: no empty cell; list cells parsed into Python lists (the kit would eval them).

`dump_image` is ours too: image names from data can never leave the image folder.
"""
from __future__ import annotations

import os
import os.path as osp
import re
import shutil
from pathlib import Path

import pandas as pd
from vlmeval.dataset.image_base import ImageBaseDataset

from vlmeval_ext.core.evaluation import ExtEvaluation
from vlmeval_ext.core.io import (DataError, file_md5, lmu_data_root, parse_list_cell, read_table, require_columns,
                                 stem_path, tsv_path, write_kit_tsv)

__all__ = ['ExtImageDataset', 'write_dataset_tsv', 'safe_join', 'lmu_data_root', 'tsv_path',
           'stem_path', 'kit_ready_table', 'SAFE_INDEX']

# What the kit's eval() of an index may see: an integer, or a name that is no Python constant.
SAFE_INDEX = re.compile(r'-?[0-9]+|[A-Za-z][A-Za-z0-9_\-]*')
_PY_CONSTANTS = {'True', 'False', 'None'}
_BASE64 = re.compile(r'[A-Za-z0-9+/=\r\n]+')
# The kit's rule: an image cell of at most 64 characters names the row holding the image.
KIT_REFERENCE_MAX = 64


def write_dataset_tsv(df: pd.DataFrame, name: str, out_dir: str | None = None) -> str:
    """Write `<name>.tsv` under $LMUData (or out_dir) the kit's way, with the `.md5` sidecar load_data checks."""
    return write_kit_tsv(df, osp.join(out_dir or lmu_data_root(), f'{name}.tsv'))


def safe_join(root: str, name: str, where: str) -> str:
    """Join an image name from data under root; refuse absolute paths and '..' (nothing written outside)."""
    if not name or osp.isabs(name) or '..' in Path(name).parts or name.startswith(('~', '\\')):
        raise DataError(f'{where}: image name {name!r} is absolute or leaves the image folder')
    path = osp.normpath(osp.join(root, name))
    if not path.startswith(osp.normpath(root) + os.sep):
        raise DataError(f'{where}: image name {name!r} leaves the image folder')
    return path


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
                raise DataError(f'{where}: list item {k} is not a base64 image')
        return str(images)          # a plain literal of base64 strings: what the kit's toliststr evaluates
    if len(text) <= KIT_REFERENCE_MAX:
        if text not in has_image:
            raise DataError(f'{where}: {text!r} is neither an image nor the index of a row holding one')
        return text
    if not _BASE64.fullmatch(text):
        raise DataError(f'{where}: not a base64 image (characters outside A-Z a-z 0-9 + / =)')
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


def kit_ready_table(data: pd.DataFrame, path, required=('index',), image_rows=None) -> pd.DataFrame:
    """Validate a dataset table and put the columns the kit's `ImageBaseDataset.__init__` reads into a form it
    takes without running anything: `index` as text, `image` / `image_path` cells as described in the module
    docstring. `image_rows` (a boolean mask) names the rows that must have an image (default: every row); the
    others must leave it empty. Errors name the file, row and column."""
    require_columns(data, tuple(required), path)
    data = data.reset_index(drop=True)
    data['index'] = [_text(x).strip() for x in data['index']]
    _check_index(list(data['index']), path)
    if 'image' in data:
        cells = [_text(x) for x in data['image']]
        mask = [True] * len(cells) if image_rows is None else [bool(x) for x in image_rows]
        has_image = {i for i, c, m in zip(data['index'], cells, mask) if m and len(c.strip()) > KIT_REFERENCE_MAX}
        out = []
        for row, (cell, needed) in enumerate(zip(cells, mask)):
            if needed:
                out.append(_image_cell(cell, row, path, has_image))
            elif cell.strip():
                raise DataError(f'{path}: row {row + 2}, column \'image\': this row takes no image')
            else:
                out.append(None)
        data['image'] = out
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

    def check_md5(self, dataset: str, path: str) -> None:
        expected = self.DATASET_MD5.get(dataset)
        sidecar = path + '.md5'
        if expected is None and osp.exists(sidecar):
            expected = Path(sidecar).read_text().strip()
        if expected:
            actual = file_md5(path)
            if actual != expected:
                raise DataError(f'{path}: md5 {actual} does not match the expected {expected}; the file is damaged '
                                f'or from another source. Rebuild it with `vlmeval-ext prepare {dataset}`')

    def load_data(self, dataset):
        path = self.ensure_tsv(dataset)
        self.check_md5(dataset, path)
        data = read_table(path)
        return kit_ready_table(data, path, self.REQUIRED_COLUMNS, self.image_rows(data))

    def dump_image(self, line):
        """Decode the row's image(s) into img_root (never outside it); returns the list of paths."""
        from vlmeval.smp import decode_base64_to_image_file, read_ok
        os.makedirs(self.img_root, exist_ok=True)
        where = f'{self.data_path}: index {line["index"]}'
        images = line['image'] if isinstance(line['image'], list) else [line['image']]
        names = line.get('image_path') if 'image_path' in line else None
        if names is None or (isinstance(names, float) and pd.isna(names)):
            names = [f'{line["index"]}.png'] if len(images) == 1 else \
                [f'{line["index"]}_{i}.png' for i in range(len(images))]
        names = names if isinstance(names, list) else [names]
        if len(names) != len(images):
            raise DataError(f'{where}: {len(images)} images but {len(names)} image_path entries')
        paths = []
        for image, name in zip(images, names):
            path = safe_join(self.img_root, str(name), where)
            if not read_ok(path):
                os.makedirs(osp.dirname(path), exist_ok=True)
                try:
                    decode_base64_to_image_file(image, path)
                except Exception as err:  # the kit raises bare PIL/binascii errors; name the row instead
                    raise DataError(f'{where}, column \'image\': not a decodable base64 image ({err})') from err
            paths.append(path)
        return paths
