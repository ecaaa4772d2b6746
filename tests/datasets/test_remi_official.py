"""ReMI `official` = the authors' evaluation code; `lenient` = the robust reading. Crafted cases, one or more per
class of difference between them, each with both verdicts as the official code gives them (read from the snippet
"Copyright 2024 Google LLC" of the evaluation colab linked from the ReMI dataset card: get_pred strips the text to
its first '{' .. last '}', deletes every backslash, reads the exact key "answer"; RefCoco: membership in
label.split(','); GeomShape/GeomCost: (1 - 0.03) * label <= pred <= (1 + 0.03) * label only; Clocks: within
10 only; the other tasks: exact_match with a 1 % relaxed fallback).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vlmeval_ext.dataset.utils import remi as score

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / 'dataset_specs' / 'remi.yaml').read_text())


def official_correct(task, output, label):
    return score.official_match(task, score.official_prediction(output), score.official_label(label))


def out(answer, key='answer', explanation='because'):
    return json.dumps({'explanation': explanation, key: answer})


# (class, task, model output, label, official verdict, lenient verdict)
CASES = [
    # the key is exactly "answer"
    ('key', 'Maps', out('north', key='Answer'), 'north', False, True),
    ('key', 'EmojiAlgebra', out('17', key=' answer '), '17', False, True),
    ('key', 'IQ', '{"result": {"answer": "c"}}', 'c', False, True),
    ('key', 'Maps', out('north'), 'north', True, True),
    # every backslash is deleted before parsing: JSON escapes are not honoured
    ('escapes', 'Schedule', '{"answer": "say \\"hi\\""}', 'say "hi"', False, True),
    ('escapes', 'Maps', '{"answer": "caf\\u00e9"}', 'café', False, True),
    ('escapes', 'Maps', '{"explanation": "C:\\path", "answer": "north"}', 'north', True, True),  # invalid escape
    ('escapes', 'FuncRead', '{"answer": "\\\\frac{1}{2}"}', '\\frac{1}{2}', True, True),  # label loses its too
    # parentheses: only the exact "(x)" form of one side
    ('parentheses', 'IQ', out('( a )'), 'a', False, True),
    ('parentheses', 'IQ', out('(a)'), 'a', True, True),
    ('parentheses', 'Charts', out('3, 4'), '(3, 4)', True, True),
    # GeomShape / GeomCost / Clocks have no exact-match fallback
    ('no fallback', 'GeomShape', out('(50)'), '50', False, True),
    ('no fallback', 'GeomCost', out('(50)'), '50', False, True),
    ('no fallback', 'Clocks', out('(50)'), '50', False, True),
    ('no fallback', 'Collisions', out('(1)'), '1', True, True),       # exact_match tasks do unwrap "(x)"
    # tolerance edges: the official bounds in binary floating point, no slack
    ('tolerance edge', 'GeomShape', out('1.957'), '1.9', False, True),
    ('tolerance edge', 'GeomCost', out('2.369'), '2.3', False, True),
    ('tolerance edge', 'Charts', out('1.717'), '1.7', False, True),      # exact_match's 1 % fallback
    ('tolerance edge', 'GeomCost', out('41.2'), '40', True, True),
    ('tolerance edge', 'GeomShape', out('103.1'), '100', False, False),
    ('tolerance edge', 'Clocks', out('145'), '135', True, True),
    ('tolerance edge', 'Clocks', out('146'), '135', False, False),
    # a relative bound on a negative label admits nothing
    ('negative label', 'GeomCost', out('-40'), '-40', False, True),
    # spaces inside: one side without its spaces must equal the other as written
    ('inner spaces', 'Charts', out('(5 , 0)'), '(5, 0)', False, True),
    ('inner spaces', 'Charts', out('(5,0)'), '(5, 0)', True, True),
    ('inner spaces', 'CodeEdit', out('return a+b'), 'return a + b', False, True),   # every space goes, or none
    ('inner spaces', 'CodeEdit', out('returna+b'), 'return a + b', True, True),
    ('inner spaces', 'CodeEdit', out('return a+ b'), 'return a +b', False, True),
    # RefCoco: the prediction must be one of label.split(',') as written
    ('refcoco', 'RefCoco', out('2.0'), '2', False, True),
    ('refcoco', 'RefCoco', out('+2'), '2', False, True),
    ('refcoco', 'RefCoco', out('4'), '2, 4', False, True),
    ('refcoco', 'RefCoco', out('2'), '2, 4', True, True),
    ('refcoco', 'RefCoco', out('4'), '2,4', True, True),
    # thousands separators are not read
    ('thousands', 'EmojiAlgebra', out('3,400'), '3400', False, True),
    ('thousands', 'EmojiAlgebra', out(3400), '3400', True, True),
    # JSON numbers go through Python's str(): 1e1 -> "10.0", equal as floats
    ('numbers', 'EmojiAlgebra', '{"answer": 1e1}', '10', True, True),
    ('numbers', 'Collisions', '{"answer": true}', '1', False, False),
    # one object from the first '{' to the last '}': several objects, or text after the last '}' containing one
    ('one object', 'Maps', '{"answer": "north"} {"note": 1}', 'north', False, True),
    ('one object', 'Maps', 'Sure: {"answer": "north"} Hope it helps.', 'north', True, True),
    ('one object', 'Maps', "{'answer': 'north'}", 'north', False, True),
    ('one object', 'Maps', '```json\n{"answer": "north"}\n```', 'north', True, True),
    # function names: only "f(x)" answered for the label "f"
    ('function names', 'FuncRead', out('f(x)'), 'f', True, True),
    ('function names', 'FuncRead', out('g'), 'g(x)', False, True),
    # an empty answer is an answer: get_pred('') is BAD_JSON, wrong
    ('empty', 'Maps', '', 'north', False, False),
    ('empty', 'Clocks', '   ', '135', False, False),
]


@pytest.mark.parametrize('kind, task, output, label, official, lenient', CASES,
                         ids=[f'{c[0]}-{i}' for i, c in enumerate(CASES)])
def test_official_and_lenient_verdicts(kind, task, output, label, official, lenient):
    result = score.score_item(task, output, label)
    assert (result['official'], result['lenient']) == (official, lenient)
    assert official_correct(task, output, label) is official


def test_every_difference_class_has_a_case_where_the_two_differ():
    differ = {c[0] for c in CASES if c[4] != c[5]}
    assert differ >= {'key', 'escapes', 'parentheses', 'no fallback', 'tolerance edge', 'inner spaces', 'refcoco',
                      'thousands', 'negative label', 'one object', 'function names'}
    assert sum(c[4] != c[5] for c in CASES) == 23


@pytest.mark.parametrize('output, expected', [
    ('{"explanation": "x", "answer": "North%"}', 'north'),
    ('{"answer": 2.50}', '2.5'),
    ('{"answer": [3, 4]}', '[3, 4]'),
    ('{"answer": null}', 'none'),
    ('no braces at all', score.BAD_JSON),
    ('{"answer": "x"', score.BAD_JSON),                       # no '}': the snippet's slice is empty
    ('} {"answer": "x"}', 'x'),                                # text before the first '{' is cut
    ('{"answer": "x"}}', score.BAD_JSON),                      # extra data after the object
    ('{"answer": ' + '[' * 100_000 + ']' * 100_000 + '}', score.BAD_JSON),   # deviation: the snippet would crash
    ('{"answer": ' + '9' * 5000 + '}', score.BAD_JSON),       # deviation: int beyond Python's digit limit
])
def test_official_prediction_reads_what_get_pred_reads(output, expected):
    assert score.official_prediction(output) == expected


def test_all_empty_predictions_score_zero_with_every_item_counted(tmp_path):
    rows = [dict(task=t, answer='1', **score.score_item(t, p, '1'))
            for t, p in zip(SPEC['tasks'], ['', ' ', '\n', '\t', ' \n '] * 3)]
    summary = score.summarise(rows, 'interleaved')
    assert summary['accuracy']['Overall'] == 0.0 and summary['lenient']['accuracy']['Overall'] == 0.0
    assert summary['counts']['items'] == summary['counts']['scored'] == summary['counts']['empty'] == len(rows)
    assert summary['counts']['inference_failures'] == 0
