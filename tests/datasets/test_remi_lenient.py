"""ReMI scoring: the lenient reading (JSON extraction, per-task rules for all 13 tasks), baselines, ERP, summary and
report. The official scoring (the authors' snippet) is tested case by case in test_scoring_remi_official.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vlmeval_ext.dataset.utils import remi as score

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / 'dataset_specs' / 'remi.yaml').read_text())


def out(answer, explanation='because'):
    return json.dumps({'explanation': explanation, 'answer': answer})


def correct(task, prediction, label):
    return score.score_item(task, prediction, label)['lenient']


# ---------------------------------------------------------------- extraction

@pytest.mark.parametrize('text, expected', [
    ('{"explanation": "x", "answer": "42"}', '42'),
    ('```json\n{"explanation": "x", "answer": 7}\n```', '7'),
    ('```\n{"answer": "north"}\n```', 'north'),
    ('Sure! Here is my answer: {"explanation": "a {b} c", "answer": "12"} Hope it helps.', '12'),
    ("{'explanation': 'single quotes', 'answer': 'g'}", 'g'),
    ('{"explanation": "area = \\frac{1}{2} b h", "answer": "12.5"}', '12.5'),   # lone LaTeX backslash
    ('{"explanation": "x", "answer": 2.5}', '2.5'),
    ('{"explanation": "x", "answer": [3, 4]}', '[3, 4]'),
    ('{"result": {"explanation": "nested", "answer": "c"}}', 'c'),
    ('{"Explanation": "x", "Answer": "5"}', '5'),
])
def test_extract_answer_variants(text, expected):
    assert score.extract_answer(text) == (expected, 'ok')


@pytest.mark.parametrize('text, status', [
    ('The answer is 42.', score.NO_JSON),
    ('...', score.NO_JSON),
    ('{"explanation": "cut off by the token lim', score.NO_JSON),
    ('42', score.NOT_OBJECT),
    ('["a", "b"]', score.NOT_OBJECT),
    ('{"explanation": "no answer here"}', score.NO_ANSWER_FIELD),
    ('{"explanation": "x", "answer": null}', score.EMPTY_ANSWER),
    ('{"explanation": "x", "answer": "  "}', score.EMPTY_ANSWER),
    ('{{{{ ]]] not json at all }', score.NO_JSON),
])
def test_malformed_outputs_are_wrong_not_crashes(text, status):
    assert score.extract_answer(text) == (None, status)
    result = score.score_item('Maps', text, 'north')
    assert result['lenient'] is False and result['official'] is False and result['status'] == status


@pytest.mark.parametrize('text', ['[' * 5000, '{' * 5000 + '}', '{"answer": ' + '[' * 5000 + ']' * 5000 + '}',
                                  '{"answer": ' + '[' * 990 + ']' * 990 + '}', '{"answer": "north"} ' + '[' * 5000])
def test_deep_nesting_is_unparsable_not_a_crash(text):
    """No model output stops the scorer: brackets nested past MAX_NESTING are not searched (lenient: too_deep);
    the official reading is BAD_JSON where the snippet would raise RecursionError, its own reading otherwise."""
    assert score.extract_answer(text) == (None, score.TOO_DEEP)
    result = score.score_item('Maps', text, 'north')
    assert result['lenient'] is False and result['status'] == score.TOO_DEEP and result['kind'] == 'answer'
    official = score.official_prediction(text)       # the snippet's reading, or BAD_JSON where it would crash
    if text.startswith('{"answer": "north"}'):
        assert official == 'north'                     # from the first '{' to the last '}': the snippet's text
    elif '[' * 990 in text[:1000]:
        assert official in (score.BAD_JSON, '[' * 990 + ']' * 990)     # parses below the interpreter's limit
    else:
        assert official == score.BAD_JSON
    assert result['official'] is (official == 'north')
    shallow = '{"answer": ' + '[' * 50 + '"north"' + ']' * 50 + '}'          # within MAX_NESTING: read as usual
    assert score.extract_answer(shallow)[1] == 'ok'


def test_non_string_outputs_never_crash():
    # An empty cell (read as the text '') is an empty answer: scored wrong by both rules, never excluded.
    for empty in ('', '   '):
        result = score.score_item('IQ', empty, 'c')
        assert (result['kind'], result['official'], result['lenient']) == ('empty', False, False)
    failed = score.score_item('IQ', 'Failed to obtain answer via API.', 'c')   # the kit's failure text
    assert failed == {'kind': 'failed', 'official': None, 'lenient': None, 'official_pred': None,
                      'status': score.INFERENCE_FAILURE, 'parsed': None}
    quoted = score.score_item('IQ', 'Failed to obtain answer via API. {"answer": "c"}', 'c')
    assert quoted['kind'] == 'answer' and quoted['official'] is True               # merely quoting it: an answer


def test_boolean_answer_is_not_one():
    assert correct('Collisions', out(True), '1') is False
    assert correct('Collisions', out(1), '1') is True


# ---------------------------------------------------------------- rules for every task

CASES = [
    # task, answer, label, expected
    ('EmojiAlgebra', '92', '92', True), ('EmojiAlgebra', '92.0', '92', True), ('EmojiAlgebra', '93', '92', False),
    ('EmojiAlgebra', '-17', '-17', True), ('EmojiAlgebra', '1,000', '1000', True),
    ('FuncRead', 'f(x)', 'f', True), ('FuncRead', 'g', 'g(x)', True), ('FuncRead', 'h(x)', 'g', False),
    ('FuncRead', '3.03', '3', True), ('FuncRead', '3.05', '3', False),          # 1 % numeric tolerance
    ('GeomShape', '103', '100', True), ('GeomShape', '103.1', '100', False),
    ('GeomShape', '-97', '-100', True), ('GeomShape', '-104', '-100', False),   # |label|: negative labels work
    ('GeomShape', '0', '0', True), ('GeomShape', '0.001', '0', False),
    ('GeomCost', '$?', '40', False), ('GeomCost', '41.2', '40', True), ('GeomCost', '-41.2', '-40', True),
    ('Collisions', '1', '1', True), ('Collisions', '0', '1', False), ('Collisions', 'yes', '1', False),
    ('Clocks', '140', '135', True), ('Clocks', '145', '135', True), ('Clocks', '146', '135', False),
    ('Clocks', '-5', '5', True), ('Clocks', '-16', '-5', False),
    ('Schedule', 'Room B', 'room b', True), ('Schedule', 'RoomB', 'room b', True), ('Schedule', 'room a', 'room b', False),
    ('Charts', '(3, 4)', '(3, 4)', True), ('Charts', '3, 4', '(3, 4)', True), ('Charts', '(3,4)', '(3, 4)', True),
    ('Charts', '3,4', '(3, 4)', False),  # the rules apply one at a time, as in the official snippet
    ('Charts', '25%', '25', True),
    ('Charts', '25.2', '25', True), ('Charts', '(3, 5)', '(3, 4)', False),
    ('CodeEdit', 'return a + b', 'return a + b', True), ('CodeEdit', 'return a+b', 'return a + b', True),
    ('CodeEdit', 'return a - b', 'return a + b', False),
    ('Isomorphism', '1', '1', True), ('Isomorphism', '0', '1', False), ('Isomorphism', '1.0', '1', True),
    ('Maps', 'North', 'north', True), ('Maps', '(north)', 'north', True), ('Maps', 'south', 'north', False),
    ('RefCoco', '2', '2, 4', True), ('RefCoco', '4', '2,4', True), ('RefCoco', '3', '2, 4', False),
    ('RefCoco', '4.0', '2, 4', True), ('RefCoco', '24', '2, 4', False),
    ('IQ', 'C', 'c', True), ('IQ', '(c)', 'c', True), ('IQ', 'd', 'c', False),
    ('Maps', 'n\\orth', 'north', True),                                         # backslashes dropped
]


@pytest.mark.parametrize('task, answer, label, expected', CASES)
def test_task_rules(task, answer, label, expected):
    assert correct(task, out(answer), label) is expected


def test_every_task_has_cases_and_spec_entries():
    assert {c[0] for c in CASES} == set(SPEC['tasks']) == set(score.TASKS)
    assert set(SPEC['naive_baselines']) == set(SPEC['tasks']) == set(SPEC['prompt']['appendix_task'])
    assert set(score.BASELINES) == set(score.APPENDIX) == set(score.TASKS)


def test_relative_tolerance_uses_absolute_label():
    assert score.within(-97.0, -100.0, relative=0.03)
    assert not score.within(-110.0, -100.0, relative=0.03)


# ---------------------------------------------------------------- baselines and ERP

def test_baselines_per_kind():
    assert score.baseline_accuracy('Collisions', ['0', '1', '1'], 'lenient') == 0.5
    assert score.baseline_accuracy('Isomorphism', ['1'] * 4, 'lenient') == 0.5
    assert score.baseline_accuracy('IQ', ['a', 'b', 'c', 'c', 'd'], 'lenient') == 0.25     # 4 distinct options
    assert score.baseline_accuracy('Clocks', ['720', '715', '100', '731'], 'lenient') == 0.5   # 720 within 10
    assert score.baseline_accuracy('RefCoco', ['0, 3', '1', '2,0', '4'], 'lenient') == 0.5
    assert score.baseline_accuracy('Charts', ['(0, 0)', '(1, 2)', '5'], 'lenient') == pytest.approx(1 / 3)
    assert score.baseline_accuracy('EmojiAlgebra', ['0', '5', '7', '0'], 'lenient') == 0.5
    assert score.baseline_prediction('Maps', ['north', 'North', 'south']) == 'north'
    assert score.baseline_accuracy('Maps', ['north', 'North', 'south'], 'lenient') == pytest.approx(2 / 3)
    assert score.baseline_prediction('GeomShape', ['10', '20', '30', '40']) == '20'
    assert score.baseline_accuracy('GeomShape', ['10', '20', '20.5', '40'], 'lenient') == 0.5
    assert score.baseline_accuracy('Maps', [], 'lenient') is None


def test_erp():
    assert score.erp(0.75, 0.5) == pytest.approx(50.0)
    assert score.erp(0.25, 0.5) == pytest.approx(-50.0)
    assert score.erp(0.9, 1.0) is None
    assert score.erp(None, 0.5) is None


_PREDICTIONS = []


def _rows():
    _PREDICTIONS.clear()
    rows = []
    # Collisions: 3 of 4 right (baseline 0.5 -> ERP 50); Maps: 1 of 2, one unparsable; IQ: one inference failure
    # (excluded) and one empty answer (wrong, counted)
    for pred, label in [('1', '1'), ('0', '0'), ('1', '1'), ('1', '0')]:
        rows.append(dict(task='Collisions', answer=label, **score.score_item('Collisions', out(pred), label)))
        _PREDICTIONS.append(out(pred))
    for task, prediction, label in [('Maps', out('north'), 'north'), ('Maps', 'no idea', 'south'),
                                    ('IQ', out('a'), 'a'), ('IQ', 'Failed to obtain answer via API.', 'b'),
                                    ('IQ', '', 'c')]:
        rows.append(dict(task=task, answer=label, **score.score_item(task, prediction, label)))
        _PREDICTIONS.append(prediction)
    return rows


def test_summary_numbers():
    summary = score.summarise(_rows(), 'interleaved')
    acc = summary['accuracy']
    assert summary['scoring'] == 'official'
    assert list(acc['task']) == ['Collisions', 'Maps', 'IQ']                    # spec task order
    assert acc['task'] == {'Collisions': 75.0, 'Maps': 50.0, 'IQ': 50.0}
    assert acc['Overall'] == pytest.approx(175 / 3, abs=1e-4)
    assert acc['micro'] == pytest.approx(100 * 5 / 8, abs=1e-3)
    assert summary['lenient']['accuracy']['task'] == acc['task']               # these outputs read the same
    assert summary['official_vs_lenient'] == {'differ': 0, 'lenient_only': 0, 'official_only': 0}
    assert summary['naive_baseline']['task']['Collisions'] == 50.0
    assert summary['naive_baseline']['task']['Maps'] == 50.0                   # majority tie -> 1 of 2
    assert summary['naive_baseline']['task']['IQ'] == 50.0                     # two labels seen -> c = 2
    assert summary['erp']['task'] == {'Collisions': 50.0, 'Maps': 0.0, 'IQ': 0.0}
    assert summary['erp']['Overall'] == pytest.approx(50 / 3, abs=1e-4)
    assert summary['counts']['inference_failures'] == 1 and summary['counts']['empty'] == 1
    assert summary['counts']['official_bad_json'] == 2                          # 'no idea' and the empty answer
    assert summary['counts']['parse_failures'] == {score.NO_JSON: 2}
    assert summary['counts']['task']['IQ'] == {'items': 3, 'scored': 2}
    assert summary['input_mode'] == 'interleaved'


def test_evaluate_and_report_files(tmp_path):
    """The kit dialect's ReMI.evaluate on a predictions file, then the plugin's report files."""
    import pandas as pd

    from vlmeval_ext.dataset.remi import ReMI
    from vlmeval_ext.plugin.remi import REPORT as REMI
    rows = [{'index': i, 'task': r['task'], 'answer': r['answer'], 'question': 'q',
             'prediction': p} for i, (r, p) in enumerate(zip(_rows(), _PREDICTIONS))]
    path = tmp_path / 'M_ReMI_DEMO_composite.tsv'
    pd.DataFrame(rows).to_csv(path, sep='\t', index=False)
    dataset = object.__new__(ReMI)
    dataset.dataset_name = 'ReMI_DEMO_composite'
    table = dataset.evaluate(str(path))
    saved = json.loads((tmp_path / 'M_ReMI_DEMO_composite_score.json').read_text())
    assert saved == json.loads(json.dumps(score.summarise(_rows(), 'composite')))
    tasks = pd.read_csv(tmp_path / 'M_ReMI_DEMO_composite_tasks.csv')
    assert list(tasks.columns) == ['task', 'items scored', 'official accuracy (%)', 'naive baseline (%)', 'ERP (%)',
                                   'lenient accuracy (%)']
    assert tasks.iloc[0].tolist() == ['Collisions', 4, 75.0, 50.0, 50.0, 75.0]
    assert 'composite' in table.columns[0]
    REMI.write_extras('ReMI_DEMO_composite', str(path), saved)
    markdown = (tmp_path / 'M_ReMI_DEMO_composite_tasks.md').read_text()
    assert '| Collisions | 4 | 75.0 | 50.0 | 50.0 | 75.0 |' in markdown and '| Overall |' in markdown
    assert 'empty answers (scored wrong): 1' in markdown and 'excluded): 1' in markdown
    assert (tmp_path / 'M_ReMI_DEMO_composite_tasks.png').stat().st_size > 5000
