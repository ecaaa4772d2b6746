"""Reading and writing the kit's files with errors that name the file, row and column (no kit imports)."""
from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import math
import os
import re
import sys
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
    """Read .tsv / .csv / .xlsx with every cell as the text it holds: no type guessing, no NaN.

    A prediction "07" stays "07" (not 7.0), an answer "0.30" stays "0.30", an empty cell is '' and 'None' / 'NA'
    stay words. Columns that are numbers by meaning (index, pair_id, complexity, ...) are converted by the code
    that needs them, with `int_cell`, whose errors name the file, row and column.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f'{path}: file not found')
    if path.stat().st_size == 0:
        raise DataError(f'{path}: the file is empty (0 bytes)')
    suffix = path.suffix.lower()
    as_text = {'dtype': str, 'keep_default_na': False, 'na_filter': False}
    try:
        if suffix == '.tsv':
            return pd.read_csv(path, sep='\t', encoding=encoding, **as_text)
        if suffix == '.csv':
            try:
                return pd.read_csv(path, encoding=encoding or 'utf-8', **as_text)
            except UnicodeDecodeError as err:
                raise DataError(f'{path}: not UTF-8 ({err}); if it is latin-1, convert it or pass '
                                "encoding='latin-1'") from err
        if suffix == '.xlsx':
            return read_xlsx_text(path)
        if suffix == '.xls':
            return pd.read_excel(path, **as_text)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        if isinstance(err, DataError):
            raise
        raise DataError(f'{path}: cannot be parsed as {suffix[1:]}: {err}') from err
    raise DataError(f'{path}: unsupported file type {suffix!r} (use .tsv, .csv or .xlsx)')


XLSX_CELL_LIMIT = 32_767   # the most characters an xlsx cell holds; the kit's writer cuts longer text there


def read_xlsx_text(path) -> pd.DataFrame:
    """The first sheet of an xlsx file, every cell as the text it holds (openpyxl, never a computed value).

    A formula cell reads as its formula text ('=1+1'), not as the value a spreadsheet program would compute or the
    cached value the writer stored (xlsxwriter stores 0): ms-vlmeval's writer turns a model reply that starts with
    '=' into a formula. Numbers read as pandas writes them as text ('3', '0.5'), an empty cell as ''. (xlsx keeps
    no control characters: the writer stores them as `_x0000_` escapes, read here as written.)
    """
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=False)
    except (InvalidFileException, OSError, KeyError, ValueError) as err:
        raise DataError(f'{path}: cannot be parsed as xlsx: {err}') from err
    try:
        rows = [[_xlsx_text(v) for v in row] for row in book.worksheets[0].iter_rows(values_only=True)]
    finally:
        book.close()
    if not rows:
        raise DataError(f'{path}: the first sheet is empty')
    header, body = rows[0], rows[1:]
    while header and header[-1] == '':
        header.pop()
    width = len(header)
    body = [(r + [''] * width)[:width] for r in body]
    while body and not any(body[-1]):
        body.pop()
    return pd.DataFrame(body, columns=header, dtype=object)


def _xlsx_text(value) -> str:
    if value is None:
        return ''
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def int_cell(value, path, row: int, column: str, lo: int | None = None, hi: int | None = None) -> int:
    """An integer from a cell ('3', '3.0', 3); anything else is a DataError naming file, row and column.

    `row` is the spreadsheet line (the header is line 1).
    """
    text = value.strip() if isinstance(value, str) else value
    try:
        number = float(text)
    except (TypeError, ValueError):
        raise DataError(f'{path}: row {row}, column {column!r}: {value!r} is not an integer') from None
    bounds = f' in {lo}-{hi}' if lo is not None and hi is not None else ''
    if math.isnan(number) or not number.is_integer() or (lo is not None and number < lo) \
            or (hi is not None and number > hi):
        raise DataError(f'{path}: row {row}, column {column!r}: {value!r} is not an integer{bounds}')
    return int(number)


def require_columns(df: pd.DataFrame, columns, path) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f'{path}: missing column(s) {missing}; found {list(df.columns)}')


def check_unique_index(df: pd.DataFrame, path, column: str = 'index') -> None:
    dup = df[column][df[column].duplicated()].tolist()
    if dup:
        raise DataError(f'{path}: duplicate values in column {column!r}: {dup[:5]}')


class CutReplies(DataError):
    """Replies the xlsx writer cut at its cell limit: `rows` are their positions (0-based) in `table`, the file as
    it was read."""

    def __init__(self, message: str, rows: list[int], table: pd.DataFrame):
        super().__init__(message)
        self.rows, self.table = rows, table


def load_predictions(path, required=('index', 'prediction')) -> pd.DataFrame:
    """A predictions file (the dataset's columns without image, plus prediction), validated, every cell text.

    `index` becomes int when every value is an integer (the kit's indices), as the dataset TSV's does. A reply cut
    at the xlsx cell limit stops here (CutReplies) with the rows named: its end (the final answer) is not in the file.
    """
    df = read_table(path)
    require_columns(df, required, path)
    if str(path).lower().endswith('.xlsx') and 'prediction' in df.columns:
        cut = [i for i, v in enumerate(df['prediction']) if len(v) == XLSX_CELL_LIMIT]
        if cut:
            raise CutReplies(f'{path}: {len(cut)} reply(s) in column \'prediction\' are exactly '
                             f'{XLSX_CELL_LIMIT:,} characters (row(s) {[i + 2 for i in cut[:10]]}), an xlsx cell\'s '
                             'limit: cut, their final answers lost; nothing was scored', cut, df)
    if 'index' in df.columns:
        check_unique_index(df, path)
        if len(df) and all(_is_int_text(x) for x in df['index']):
            df['index'] = [int(x) for x in df['index']]
    return df


def keep_uncut_replies(cut: CutReplies, path) -> str:
    """Write the predictions of `path` (an xlsx with cut replies) beside it as TSV without the cut rows, and say
    how to finish: the kit's `--reuse` takes that TSV as the previous predictions and asks the model again for the
    missing (cut) rows only. Returns the message to raise; never overwrites a TSV that is already there."""
    target = os.path.splitext(str(path))[0] + '.tsv'
    if os.path.exists(target):
        return f'{cut}. Rerun with PRED_FORMAT=tsv ({target} exists and is left as it is)'
    kept = cut.table.drop(index=cut.table.index[cut.rows])
    write_predictions_table(kept, target)
    return (f'{cut}. The other {len(kept)} replies are kept in {target}; rerun with PRED_FORMAT=tsv and --reuse: '
            f'the model is asked again for the {len(cut.rows)} cut row(s) only')


def write_predictions_table(df: pd.DataFrame, path) -> None:
    """Write a predictions table back in its own format (atomic): TSV all quoted as the kit writes it, xlsx with
    every cell a string (never a formula or a link)."""
    import csv
    path = str(path)
    suffix = os.path.splitext(path)[1].lower()
    tmp = f'{path}.partial{os.getpid()}{suffix}'
    if suffix == '.tsv':
        df.to_csv(tmp, sep='\t', index=False, encoding='utf-8', quoting=csv.QUOTE_ALL)
    elif suffix == '.csv':
        df.to_csv(tmp, index=False, encoding='utf-8', quoting=csv.QUOTE_ALL)
    else:
        options = {'strings_to_formulas': False, 'strings_to_urls': False, 'strings_to_numbers': False}
        with pd.ExcelWriter(tmp, engine='xlsxwriter', engine_kwargs={'options': options}) as writer:
            df.to_excel(writer, index=False)
    os.replace(tmp, path)


_UNSAFE = re.compile(r'[^\w.+=-]')


def safe_name(name: str) -> str:
    """The form of a model, judge or dataset name used in folder and file names: '/' (and '\\') -> '--', any other
    character that is not a letter, digit, '.', '_', '-', '+' or '=' -> '_', no leading '.', so a name never nests
    folders, leaves one or hides a file ('Qwen/Qwen2-VL-7B' -> 'Qwen--Qwen2-VL-7B', '../x' -> '_.--x'). Letters of any
    script stay. The name itself is what is sent to a server and recorded beside the safe form."""
    text = str(name).replace('/', '--').replace('\\', '--')
    text = _UNSAFE.sub('_', text)
    text = re.sub(r'\.\.+', lambda m: '_' * len(m.group(0)), text)
    if text.startswith('.'):
        text = '_' + text[1:]
    return text or '_'


def typed_path(path: Path) -> Path:
    """A path as a user types it back: when it does not exist, its tail may be a model name with '/' that the kit
    wrote in its safe form ('outputs/Qwen/Qwen2-VL-7B' -> 'outputs/Qwen--Qwen2-VL-7B'); the existing one of those,
    else the path unchanged."""
    path = Path(path)
    if path.exists():
        return path
    parts = path.parts
    for k in range(len(parts) - 2, 0, -1):                 # the longest existing head first
        candidate = Path(*parts[:k]) / safe_name('/'.join(parts[k:]))
        if candidate.exists():
            return candidate
    return path


def _is_int_text(text: str) -> bool:
    return text.strip().lstrip('+-').isdigit()


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
    path = str(path)
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    write_kit_table(df, path)
    write_md5_sidecar(path)
    return path


def write_md5_sidecar(path: str | os.PathLike) -> str:
    """`<path>.md5`, the checksum our loader compares a prepared TSV with (written atomically); returns the md5."""
    digest = file_md5(str(path))
    tmp = f'{path}.md5.partial'
    with open(tmp, 'w') as f:
        f.write(digest + '\n')
    os.replace(tmp, f'{path}.md5')
    return digest


def unreadable_reason(err: BaseException) -> str:
    """An exception from a file reader as a short, printable clause (its first line, at most 120 characters)."""
    text = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return ''.join(c if c.isprintable() else '?' for c in text)[:120]


def read_md5_sidecar(path: str | os.PathLike, dataset: str) -> str:
    """The md5 in `<path>.md5`; a sidecar that does not hold one is a DataError naming the sidecar (never the TSV,
    and never echoing its bytes)."""
    sidecar = f'{path}.md5'
    raw = Path(sidecar).read_bytes()
    text = raw.decode('ascii', 'replace').strip().lower()
    if not re.fullmatch(r'[0-9a-f]{32}', text):
        raise DataError(f'{sidecar}: not an md5 checksum ({len(raw)} bytes, not 32 hexadecimal digits); '
                        f'`vlmeval-ext prepare` writes this file beside the TSV: delete it and rebuild with '
                        f'`vlmeval-ext prepare {dataset}`')
    return text


def stem_path(eval_file, suffix: str) -> str:
    """`<pred stem><suffix>` beside the predictions file, the kit's naming (e.g. '_score.json')."""
    base, _ = os.path.splitext(str(eval_file))
    return base + suffix


def read_progress(path: str) -> dict | None:
    """A kit dialect's judge progress file (the kit's `dump` of a dict to .pkl), read only: {} when absent; None when
    cut short, the failures the kit dialect's load_progress catches too (the evaluation then moves it aside and says
    so in one line)."""
    import pickle
    try:
        with open(path, 'rb') as f:
            data = pickle.load(f)
    except FileNotFoundError:
        return {}
    except (EOFError, pickle.UnpicklingError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(obj, path) -> None:
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(obj, f, indent=2, ensure_ascii=False, default=_json_default)
    os.replace(tmp, path)  # atomic: a killed run never leaves half a result file


def write_kit_table(table, path) -> None:
    """A table (.csv or .tsv) written as the kit's `vlmeval.smp.dump` writes it (every cell quoted, no index,
    UTF-8), so a file scored without the kit has the bytes run.py's evaluation gives (a test compares them)."""
    import csv
    tmp = f'{path}.partial{os.getpid()}'
    table.to_csv(tmp, sep='\t' if str(path).endswith('.tsv') else ',', index=False, encoding='utf-8',
                 quoting=csv.QUOTE_ALL)
    os.replace(tmp, path)


def write_result_files(eval_file, files: dict) -> None:
    """A scoring's files ({suffix: a dict for .json, a table otherwise}) beside the predictions, written as the kit's
    `dump` writes them."""
    for suffix, content in files.items():
        path = stem_path(eval_file, suffix)
        if suffix.endswith('.json'):
            write_json(content, path)
        else:
            write_kit_table(content, path)


def _json_default(obj):
    if hasattr(obj, 'item'):
        return obj.item()
    raise TypeError(f'not JSON serialisable: {type(obj).__name__}')


@contextlib.contextmanager
def building(out: str | os.PathLike):
    """Build `out` through `<out>.part`: yields that path to write; renamed to `out` when the block completes, removed
    when it raises. One build of `out` at a time (an exclusive lock on `<out>.lock`; a second one is refused). A
    `.part` found under the lock was left by a killed build: it is removed first, with one line saying so."""
    import fcntl
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + '.part')
    with open(out.with_name(out.name + '.lock'), 'a') as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataError(f'{out}: another build is writing it now ({tmp}); wait for it to finish') from None
        if tmp.exists():
            size = tmp.stat().st_size
            tmp.unlink()
            print(f'[vlmeval-ext] INFO: removed {tmp} ({size / 1e6:.1f} MB), left by an interrupted build; '
                  'building it again', file=sys.stderr, flush=True)
        try:
            yield tmp
        except BaseException:
            tmp.unlink(missing_ok=True)     # an error (or Ctrl-C) leaves no partial file behind
            raise
        tmp.replace(out)                    # only a complete file takes the final name
