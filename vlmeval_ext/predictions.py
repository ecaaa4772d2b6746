"""What a model's prediction cell is: an answer, an empty answer, or the kit's inference failure; and whether a
predictions file covers its dataset (no kit import).

One rule for every benchmark of this package (R-Bench, GRAB, ReMI, RoCOCO-MCQ, every `<Dataset>-RC`). The
failure test is the kit-dialect files' own `is_infer_fail` (vlmeval_ext/dataset/utils/exact_io.py), so both layers
apply the same one:

- an inference failure is only what the kit writes in place of an answer when it could not get one: its API
  wrappers' fail message ('Failed to obtain answer via API.', alone or with ': Failed with all possible
  conversation turns.') or, with SKIP_ERR=1, 'Failed to obtain answer: <class ...> <error>'. These are matched
  exactly, so a model answer that merely quotes the text is still an answer. A missing row is a failure too; the
  benchmark that pairs or counts rows decides that. Failures are counted, excluded from means and re-asked by
  the kit on the next run.
- an empty answer ('' or white space only; an empty spreadsheet cell) is an answer. The benchmark's own rule
  scores it (wrong, for every benchmark here), and the tables count it as `empty`.
- anything else is an answer, scored by the benchmark's rule exactly as written.

A predictions file against the dataset it answers (`check_against_dataset`, below): missing items and edited
answers. The dataset's own table is the shipped demo TSV for a demo split, else the prepared `$LMUData/<split>.tsv` when
present; without either nothing can be compared and the score file says so. With it:

- an answer cell of the predictions that differs from the dataset's own answer is refused (DataError naming the
  predictions file, row, index and column): scores are computed against the dataset's answers, never against an
  edited copy;
- an index the dataset does not hold is refused;
- each item of the dataset without a row in the predictions is a *missing item*: counted and listed, with the
  reason when one is known (its image cell does not decode: the run left it out), else "no prediction".
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from vlmeval_ext.dataset.utils.exact_io import is_infer_fail
from vlmeval_ext.io import DataError, file_md5, lmu_data_root, read_table

ANSWER, EMPTY, FAILED = 'answer', 'empty', 'failed'


def is_missing(value) -> bool:
    """None or NaN: a value a failed item carries (excluded from means, counted)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_kit_failure(value) -> bool:
    """True when the cell is exactly one of the kit's failure values (see the module docstring)."""
    return is_infer_fail(value)


def classify_prediction(value) -> str:
    """ANSWER, EMPTY or FAILED for one prediction cell.

    None and NaN (an empty cell read by a numeric-guessing reader) are EMPTY: the kit writes every row it ran,
    so a blank cell is the model's blank answer, not a missing one.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return EMPTY
    if is_kit_failure(value):
        return FAILED
    if not isinstance(value, str):
        raise TypeError(f'a prediction must be text, got {type(value).__name__}: {value!r}')
    return EMPTY if not value.strip() else ANSWER


def prediction_text(value) -> str:
    """The text a benchmark's rule scores: '' for an empty cell, the cell unchanged otherwise (never a failure)."""
    kind = classify_prediction(value)
    if kind == FAILED:
        raise ValueError('an inference failure has no text to score')
    return '' if kind == EMPTY and not isinstance(value, str) else value


def storable_text(text: str) -> str:
    """text that UTF-8 can store: a surrogate pair split in two code points joined, a lone surrogate replaced by
    U+FFFD (a model reply may hold half an emoji, '\\ud83d'); any other text unchanged."""
    if not any('\ud800' <= ch <= '\udfff' for ch in text):
        return text
    return text.encode('utf-16-le', 'surrogatepass').decode('utf-16-le', 'replace')


# ------------------------------------------------------------------- the predictions against the dataset
KIT_REFERENCE_MAX = 64


def _lmu_root() -> str | None:
    try:
        return lmu_data_root()
    except DataError:               # LMUData names a folder that does not exist: no prepared TSV to compare with
        return None


def dataset_table(record, dataset: str) -> tuple[Path, pd.DataFrame] | None:
    """(path, rows of `dataset`) of the dataset's own table (a registry record's), or None when it is not here."""
    if dataset in record.demos:
        path = Path(record.demo_file(dataset))
    else:
        root = _lmu_root()
        path = Path(root or '.') / f'{record.split_of(dataset)}.tsv'
        if root is None or not path.is_file():
            return None
    table = read_table(path)
    if 'index' not in table.columns:
        raise DataError(f'{path}: missing column \'index\'')
    if dataset in record.subsets:
        column, value = record.subsets[dataset]
        table = table[table[column] == value]
    return path, table.reset_index(drop=True)


def _same(pred: str, truth: str) -> bool:
    a, b = str(pred).strip(), str(truth).strip()
    if a == b:
        return True
    try:
        return float(a) == float(b)          # an answer a spreadsheet stored as a number ("3" for "3.0")
    except ValueError:
        return False


def _image_reason(table: pd.DataFrame, position: dict, index: str) -> str | None:
    if 'image' not in table.columns:
        return None
    from vlmeval_ext.loading import image_problem
    cell = str(table['image'][position[index]]).strip()
    if len(cell) <= KIT_REFERENCE_MAX and cell in position:       # the index of the row holding the image
        cell = str(table['image'][position[cell]]).strip()
    if cell.startswith('['):
        from vlmeval_ext.io import parse_list_cell
        try:
            cell = [str(x) for x in parse_list_cell(cell, 'image', 0, 'image')]
        except DataError as err:
            return str(err)
    problem = image_problem(cell) if cell else 'no image'
    return f'column \'image\': {problem}' if problem else None


def check_against_dataset(preds: pd.DataFrame, pred_path, record, dataset: str) -> dict:
    """Compare `preds` (load_predictions of `pred_path`) with the dataset's own table (the registry record's);
    see the module docstring. Returns the `coverage` block of a score file."""
    answer_columns = record.answer_columns
    found = dataset_table(record, dataset)
    if found is None:
        return {'dataset_table': None, 'dataset_md5': None, 'dataset_items': None, 'missing_items': None,
                'missing': [],
                'note': f'the {dataset} TSV is not under {_lmu_root() or "LMUData"}: missing items and answers not '
                        'checked'}
    path, table = found
    position = {str(i).strip(): k for k, i in enumerate(table['index'])}
    for row, record in enumerate(preds.to_dict('records')):
        index = str(record['index']).strip()
        if index not in position:
            raise DataError(f'{pred_path}: row {row + 2}: index {index} is not an item of {dataset} ({path})')
        for column in answer_columns:
            if column in record and column in table.columns:
                truth = table[column][position[index]]
                if not _same(record[column], truth):
                    raise DataError(f'{pred_path}: row {row + 2} (index {index}), column {column!r}: '
                                    f'{str(record[column])[:60]!r} is not the dataset\'s own answer '
                                    f'{str(truth)[:60]!r} ({path}); scores are computed against the dataset\'s '
                                    'answers: evaluate the predictions file the run wrote, unedited')
    answered = {str(i).strip() for i in preds['index']}
    missing = []
    for index in position:
        if index not in answered:
            reason = _image_reason(table, position, index)
            missing.append({'index': index, 'reason': (f'{path}: index {index}, {reason}; the run left it out'
                                                       if reason else 'no prediction')})
    # The table by name and md5 (what it holds), not by the folder it was read from on this machine.
    out = {'dataset_table': path.name, 'dataset_md5': file_md5(path), 'dataset_items': len(table),
           'missing_items': len(missing), 'missing': missing}
    if 'pair_id' in table.columns:        # R-Bench: its tables count pairs (a reference and a distorted image)
        out['dataset_pairs'] = int(table['pair_id'].nunique())
    return out


def coverage_line(name: str, coverage: dict) -> str:
    """One line for the console."""
    if coverage['dataset_items'] is None:
        return f'[{name}] {coverage["note"]}'
    if coverage.get('dataset_pairs') is not None:
        line = (f'[{name}] dataset items {coverage["dataset_pairs"]} pairs ({coverage["dataset_items"]} rows: a '
                f'reference and a distorted image each), rows missing from the predictions '
                f'{coverage["missing_items"]} (not scored)')
    else:
        line = f'[{name}] dataset items {coverage["dataset_items"]}, missing from the predictions ' \
               f'{coverage["missing_items"]} (not scored)'
    bad = [m for m in coverage['missing'] if m['reason'] != 'no prediction']
    if bad:
        line += f'; {len(bad)} left out of the run for a bad image: ' + ', '.join(m['index'] for m in bad[:10])
    return line
