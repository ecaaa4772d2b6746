"""An empty answer is an answer: scored by each benchmark's rule (wrong) and counted as `empty`; only the kit's
exact failure text is an inference failure (counted, excluded). One rule (vlmeval_ext.predictions) for GRAB,
ReMI, R-Bench and RoCOCO-MCQ, through each dataset's real evaluate() on the shipped demo splits (imports the kit).
"""
from __future__ import annotations

import json

import pandas as pd
import pytest

from vlmeval_ext.io import read_table
from helpers.loopback_server import LoopbackServer

EMPTY_CELLS = ['', ' ', '\n\t', None]          # None: an empty cell as pandas writes it
FAIL = 'Failed to obtain answer via API.'


@pytest.fixture(scope='module')
def kit():
    import vlmeval.dataset  # noqa: F401  (the kit, loaded as run.py loads it)

    from vlmeval_ext.datasets import GRAB
    from vlmeval_ext.datasets import RBenchFull
    from vlmeval_ext.datasets import ReMI
    from vlmeval_ext.datasets import RoCOCOMCQ
    return {'GRAB': GRAB, 'ReMI': ReMI, 'R-Bench': RBenchFull, 'RoCOCO': RoCOCOMCQ}


def _kit_dump(frame: pd.DataFrame, path) -> str:
    from vlmeval.smp import dump
    dump(frame, str(path))
    return str(path)


def _demo(cls, name: str) -> pd.DataFrame:
    from vlmeval_ext.registry import benchmark_of
    return read_table(benchmark_of(name).demo_file(name)).drop(columns=['image'])


def _empties(n: int) -> list:
    return [EMPTY_CELLS[i % len(EMPTY_CELLS)] for i in range(n)]


def test_grab_all_empty_scores_zero_every_item_counted(kit, tmp_path):
    frame = _demo(kit['GRAB'], 'GRAB_DEMO')
    frame['prediction'] = _empties(len(frame))
    path = _kit_dump(frame, tmp_path / 'M_GRAB_DEMO.xlsx')
    kit['GRAB'].for_predictions('GRAB_DEMO', path).evaluate(path)
    scores = json.loads((tmp_path / 'M_GRAB_DEMO_score.json').read_text())
    n = len(frame)
    assert scores['official']['Overall'] == 0.0 and scores['normalized']['Overall'] == 0.0
    assert scores['official']['counts']['scored'] == n and scores['official']['counts']['inference_failures'] == 0
    assert scores['counts'] == {'items': n, 'scored': n, 'empty': n, 'inference_failures': 0, 'judge_failures': 0}


def test_grab_only_the_exact_failure_text_is_excluded(kit, tmp_path):
    frame = _demo(kit['GRAB'], 'GRAB_DEMO').head(4)
    frame['prediction'] = [FAIL, f'{FAIL} {frame["answer"].iloc[1]}', f'Failed to obtain answer: {FAIL}', '']
    path = _kit_dump(frame, tmp_path / 'M_GRAB_DEMO.tsv')
    kit['GRAB'].for_predictions('GRAB_DEMO', path).evaluate(path)
    scores = json.loads((tmp_path / 'M_GRAB_DEMO_score.json').read_text())
    assert scores['counts'] == {'items': 4, 'scored': 3, 'empty': 1, 'inference_failures': 1, 'judge_failures': 0}
    assert scores['normalized']['Overall'] == pytest.approx(100 / 3, abs=1e-3)   # the quoting reply holds the answer


def test_remi_all_empty_scores_zero_every_item_counted(kit, tmp_path):
    frame = _demo(kit['ReMI'], 'ReMI_DEMO')
    frame['prediction'] = _empties(len(frame))
    path = _kit_dump(frame, tmp_path / 'M_ReMI_DEMO.xlsx')
    table = kit['ReMI'].for_predictions('ReMI_DEMO', path).evaluate(path)
    summary = json.loads((tmp_path / 'M_ReMI_DEMO_score.json').read_text())
    assert table.loc[table.iloc[:, 0] == 'official', 'Overall (%)'].item() == 0.0     # what the kit prints
    n = len(frame)
    assert summary['accuracy']['Overall'] == 0.0 and summary['lenient']['accuracy']['Overall'] == 0.0
    assert all(v == 0.0 for v in summary['accuracy']['task'].values())
    counts = summary['counts']
    assert (counts['items'], counts['scored'], counts['empty'], counts['inference_failures']) == (n, n, n, 0)
    assert counts['official_bad_json'] == n                                  # get_pred('') is BAD_JSON


@pytest.fixture
def zero_judge(monkeypatch):
    """A real OpenAI-compatible judge on 127.0.0.1 that gives every verdict 0 (what R-Bench's GPT judge gives an
    empty output measured against a ground truth)."""
    server = LoopbackServer().start()
    server.script(r'[Ss]core', 'Score: 0')
    server.default = 'ready'
    monkeypatch.setenv('OPENAI_API_BASE', server.chat_url)
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-vlmevalext-FAKE-0123456789abcdef')
    try:
        yield server
    finally:
        server.stop()


def test_rbench_all_empty_is_judged_scores_zero_none_excluded(kit, tmp_path, zero_judge):
    frame = _demo(kit['R-Bench'], 'R-Bench-Full_DEMO')
    frame['prediction'] = _empties(len(frame))
    path = _kit_dump(frame, tmp_path / 'M_R-Bench-Full_DEMO.xlsx')
    kit['R-Bench'].for_predictions('R-Bench-Full_DEMO', path).evaluate(path, model='loopback-judge', nproc=4,
                                                                judge_backoff=0.01)
    score = json.loads((tmp_path / 'M_R-Bench-Full_DEMO_score.json').read_text())
    items, rows = len(frame) // 2, len(frame)
    assert score['counts'] == {'items': items, 'rows': rows, 'scored': items, 'empty': rows,
                               'inference_failures': 0, 'missing_partner': 0, 'judge_failures': 0}
    assert score['judge']['failures']['excluded_scores'] == {'score_ref': 0, 'score_dis': 0, 'score_com': 0}
    assert score['absolute']['Overall'] == 0.0 and score['relative']['Overall'] == 0.0
    # The empty outputs went to the judge, as the official protocol sends whatever the model said.
    judged = [r for r in zero_judge.log if 'ready' not in r.prompt]
    assert len(judged) == score['judge']['calls_made'] > 0
    assert score['judge']['name'] == 'loopback-judge' and score['judge']['endpoint_host'] == '127.0.0.1'


def test_rococo_mcq_all_empty_scores_zero_every_item_counted(kit, tmp_path):
    from vlmeval_ext.prepare.demos import ROCOCO_DEMO_NAME as DEMO_NAME
    frame = _demo(kit['RoCOCO'], DEMO_NAME)
    frame['prediction'] = _empties(len(frame) - 1) + [FAIL]
    path = _kit_dump(frame, tmp_path / f'M_{DEMO_NAME}.xlsx')
    kit['RoCOCO'].for_predictions(DEMO_NAME, path).evaluate(path)
    scores = json.loads((tmp_path / f'M_{DEMO_NAME}_score.json').read_text())
    n = len(frame)
    assert scores['accuracy'] == 0.0 and scores['n'] == n - 1
    assert scores['counts'] == {'items': n, 'scored': n - 1, 'empty': n - 1, 'inference_failures': 1,
                                'unparsed': 0, 'hedges': 0}
