"""Reading and writing the kit's files with errors that name the file, row and column (no kit imports)."""
from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

import pandas as pd

from vlmeval_ext.errors import ExtError


class DataError(ExtError, ValueError):
    """Bad input data: the message names the file, and the row and column where known."""


def lmu_data_root() -> str:
    """$LMUData (must exist when set), else the kit's default ~/LMUData (the kit's rule, without importing it)."""
    root = os.environ.get('LMUData')
    if root:
        if not os.path.isdir(root):
            raise DataError(f'LMUData={root} does not exist: create it or unset LMUData to use ~/LMUData')
        return root
    root = os.path.join(os.path.expanduser('~'), 'LMUData')
    os.makedirs(root, exist_ok=True)
    return root


def tsv_path(name: str) -> str:
    """Where the kit keeps dataset `name`: $LMUData/<name>.tsv."""
    return os.path.join(lmu_data_root(), f'{name}.tsv')


def file_md5(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, 'rb') as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def read_table(path: str | os.PathLike, encoding: str | None = None) -> pd.DataFrame:
    """Read .tsv / .csv / .xlsx as strings-as-found (no NaN guessing for text like 'None' or 'NA')."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f'{path}: file not found')
    if path.stat().st_size == 0:
        raise DataError(f'{path}: the file is empty (0 bytes)')
    suffix = path.suffix.lower()
    try:
        if suffix == '.tsv':
            return pd.read_csv(path, sep='\t', keep_default_na=False, na_values=[''], encoding=encoding)
        if suffix == '.csv':
            try:
                return pd.read_csv(path, keep_default_na=False, na_values=[''], encoding=encoding or 'utf-8')
            except UnicodeDecodeError as err:
                raise DataError(f'{path}: not UTF-8 ({err}); if it is latin-1, convert it or pass '
                                "encoding='latin-1'") from err
        if suffix in ('.xlsx', '.xls'):
            return pd.read_excel(path, keep_default_na=False, na_values=[''])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        if isinstance(err, DataError):
            raise
        raise DataError(f'{path}: cannot be parsed as {suffix[1:]}: {err}') from err
    raise DataError(f'{path}: unsupported file type {suffix!r} (use .tsv, .csv or .xlsx)')


def require_columns(df: pd.DataFrame, columns, path) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f'{path}: missing column(s) {missing}; found {list(df.columns)}')


def check_unique_index(df: pd.DataFrame, path, column: str = 'index') -> None:
    dup = df[column][df[column].duplicated()].tolist()
    if dup:
        raise DataError(f'{path}: duplicate values in column {column!r}: {dup[:5]}')


def load_predictions(path, required=('index', 'prediction')) -> pd.DataFrame:
    """A predictions file (the dataset's columns without image, plus prediction), validated."""
    df = read_table(path)
    require_columns(df, required, path)
    if 'index' in df.columns:
        check_unique_index(df, path)
    return df


def parse_list_cell(value, path, row, column) -> list:
    """A cell holding a list (JSON or Python literal), parsed as data, never run as code."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str) or not value.strip():
        raise DataError(f'{path}: row {row}, column {column!r}: expected a list, got {value!r}')
    text = value.strip()
    for parser in (json.loads, ast.literal_eval):
        try:
            parsed = parser(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(parsed, (list, tuple)):
            return list(parsed)
        raise DataError(f'{path}: row {row}, column {column!r}: expected a list, got {type(parsed).__name__}')
    raise DataError(f'{path}: row {row}, column {column!r}: not a JSON or Python list: {text[:80]!r}')


def write_kit_tsv(df: pd.DataFrame, path: str | os.PathLike) -> str:
    """The kit's TSV (tab separated, all quoted), written atomically, plus the `.md5` sidecar our loader checks."""
    import csv
    path = str(path)
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    tmp = path + '.partial'
    df.to_csv(tmp, sep='\t', index=False, encoding='utf-8', quoting=csv.QUOTE_ALL)
    os.replace(tmp, path)
    with open(path + '.md5', 'w') as f:
        f.write(file_md5(path) + '\n')
    return path


def stem_path(eval_file, suffix: str) -> str:
    """`<pred stem><suffix>` beside the predictions file, the kit's naming (e.g. '_score.json')."""
    base, _ = os.path.splitext(str(eval_file))
    return base + suffix


def write_json(obj, path) -> None:
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, default=_json_default)
    os.replace(tmp, path)  # atomic: a killed run never leaves half a result file


def _json_default(obj):
    if hasattr(obj, 'item'):
        return obj.item()
    raise TypeError(f'not JSON serialisable: {type(obj).__name__}')
