"""Predictions are read as the text the model wrote, in .tsv, .csv and the kit's own .xlsx (no number guessing).

The GRAB case: its prompt asks for the answer only, so every prediction of a file can look like a number. The
official rule (GRAB README: response.lstrip()[:len(answer)] == answer) must see "07", "+3", "1e1" and "-1" as
written, not as the floats 7.0, 3.0, 10.0 and -1.0 a type-guessing reader makes of them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from vlmeval_ext.io import DataError, int_cell, load_predictions, read_table

REPO = Path(__file__).resolve().parents[2]
N_ITEMS = 600
TRICKY = ['-1', '1e1', '07', '+3', '0.30', '3.0', '-0', '00', '1_000', 'nan', 'None', 'NA', '', ' ', 'True', '0x1A']


def _kit_dump(df: pd.DataFrame, path: Path) -> None:
    from vlmeval.smp import dump        # the kit's own writer (xlsx through xlsxwriter, csv/tsv all quoted)
    dump(df, str(path))


@pytest.mark.parametrize('suffix', ['.xlsx', '.tsv', '.csv'])
def test_text_cells_round_trip_exactly_through_the_kits_writer(tmp_path, suffix):
    df = pd.DataFrame({'index': range(len(TRICKY)), 'prediction': TRICKY, 'answer': TRICKY[::-1]})
    path = tmp_path / f'M_GRAB{suffix}'
    _kit_dump(df, path)
    back = read_table(path)
    assert back['prediction'].tolist() == TRICKY
    assert back['answer'].tolist() == TRICKY[::-1]
    assert load_predictions(path)['index'].tolist() == list(range(len(TRICKY)))   # the kit's int index


def test_numbers_by_meaning_are_converted_with_clear_errors(tmp_path):
    assert int_cell('3', 'f.tsv', 2, 'complexity') == 3
    assert int_cell('3.0', 'f.tsv', 2, 'complexity') == 3        # a column once written by a float writer
    for bad in ('', 'three', '3.5', 'nan'):
        with pytest.raises(DataError, match=r"f\.tsv: row 7, column 'strength': .* is not an integer"):
            int_cell(bad, 'f.tsv', 7, 'strength', 1, 3)
    with pytest.raises(DataError, match=r"row 4, column 'distortion': '34' is not an integer in 1-33"):
        int_cell('34', 'f.tsv', 4, 'distortion', 1, 33)


# ----------------------------------------------------------------------------------- 600 bare-number GRAB answers

def _bare_number(answer: str, k: int) -> str:
    """A bare-number reply for a numeric GRAB answer, in one of the forms models write (k picks the form)."""
    value = float(answer)
    integer = '.' not in answer
    forms = [
        answer,                                                         # exact
        f'0{answer}' if not answer.startswith('-') else f'-0{answer[1:]}',   # "07": a leading zero
        f'+{answer}' if not answer.startswith('-') else answer,         # "+3"
        f'{answer}.0' if integer else answer.rstrip('0').rstrip('.') or '0',   # "3.0" for "3"; "-1" for "-1.0"
        f'{value:.0e}'.replace('e+0', 'e').replace('e-0', 'e-') if integer and value else f' {answer}',  # "1e1"
        f'{answer}0' if not integer else f'{int(value) + 1}',           # "0.30" for "0.3"; a wrong integer
    ]
    return forms[k % len(forms)]


def _grab_rule(response: str, answer: str) -> bool:
    """The GRAB README's check, written out here from the README (independent of the package's code)."""
    return response.lstrip()[:len(answer)] == answer


@pytest.fixture(scope='module')
def bare_number_predictions(fixtures_dir):
    questions = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text(encoding='utf-8'))
    rows = []
    for key, item in questions.items():
        answer = str(item['answer'])
        if answer.startswith(('[', 'y')):
            continue                                                    # intervals and equations are not bare numbers
        rows.append({'index': int(key), 'pid': item['pid'], 'question': item['question'], 'answer': answer,
                     'task': item['task'], 'category': item['category'], 'complexity': item['complexity'],
                     'prediction': _bare_number(answer, len(rows))})
        if len(rows) == N_ITEMS:
            break
    frame = pd.DataFrame(rows)
    expected = 100 * sum(_grab_rule(p, a) for p, a in zip(frame['prediction'], frame['answer'])) / N_ITEMS
    return frame, expected


@pytest.mark.parametrize('suffix', ['.tsv', '.csv', '.xlsx'])
def test_600_bare_number_predictions_get_exactly_the_grab_rule(tmp_path, bare_number_predictions, suffix,
                                                               monkeypatch):
    frame, expected = bare_number_predictions
    assert frame['prediction'].map(lambda p: p.strip().lstrip('+-').replace('.', '').replace('e', '')
                                   .isdigit()).all()       # every reply is a bare number
    assert 30 < expected < 90                                # a mix of right and wrong replies under the rule
    # Items of the full GRAB (grab.json), evaluated as GRAB; no GRAB.tsv under LMUData here, so nothing to check
    # them against (with one, answers and indices are checked: see test_changed_and_broken_dataset_files.py).
    (tmp_path / 'LMUData').mkdir()
    monkeypatch.setenv('LMUData', str(tmp_path / 'LMUData'))
    pred = tmp_path / f'Model_GRAB{suffix}'
    _kit_dump(frame, pred)
    argv = ['eval', '--data', 'GRAB', '--pred', str(pred)]
    if suffix == '.xlsx':       # the kit's own format: through the installed command line, in a fresh process
        env = {**os.environ, 'PYTHONPATH': f'{REPO}{os.pathsep}{os.environ.get("PYTHONPATH", "")}',
               'MPLBACKEND': 'Agg'}
        proc = subprocess.run([sys.executable, '-m', 'vlmeval_ext', *argv], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    else:                       # the same command's function, in this process
        from vlmeval_ext.cli.main import cmd_eval
        assert cmd_eval(argv[1:]) == 0
    scores = json.loads((tmp_path / 'Model_GRAB_score.json').read_text())
    assert scores['official']['Overall'] == round(expected, 4)          # the report rounds percentages to 4 places
    assert scores['counts'] == {'items': N_ITEMS, 'scored': N_ITEMS, 'empty': 0, 'inference_failures': 0,
                                'judge_failures': 0}
    items = pd.read_csv(tmp_path / 'Model_GRAB_items.tsv', sep='\t', dtype=str, keep_default_na=False)
    assert items['prediction'].tolist() == frame['prediction'].tolist()      # scored as written
    rule = [str(int(_grab_rule(p, a))) for p, a in zip(frame['prediction'], frame['answer'])]
    assert items['official'].tolist() == rule                                  # item by item
