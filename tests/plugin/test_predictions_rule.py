"""One rule for every benchmark: only the kit's exact failure values are inference failures; empty is an answer."""
import math

import pytest

from vlmeval_ext.predictions import ANSWER, EMPTY, FAILED, classify_prediction, is_kit_failure, prediction_text


@pytest.mark.parametrize('cell', [
    'Failed to obtain answer via API.',
    'Failed to obtain answer via API.: Failed with all possible conversation turns.',
    "Failed to obtain answer: <class 'RuntimeError'> CUDA out of memory",
    "Failed to obtain answer: <class 'torch.OutOfMemoryError'> line1\nline2",
])
def test_the_kits_failure_values_are_failures(cell):
    assert classify_prediction(cell) == FAILED
    with pytest.raises(ValueError):
        prediction_text(cell)


@pytest.mark.parametrize('cell', [
    'The log says "Failed to obtain answer via API." so I cannot tell. Answer: 3',
    'Failed to obtain answer via API. Just kidding: 42',
    ' Failed to obtain answer via API.',
    'Failed to obtain answer',
    'failed to obtain answer via api.',
])
def test_quoting_the_failure_text_is_an_answer(cell):
    assert not is_kit_failure(cell)
    assert classify_prediction(cell) == ANSWER
    assert prediction_text(cell) == cell


@pytest.mark.parametrize('cell', ['', '   ', '\n\t', None, math.nan])
def test_empty_is_an_answer_counted_as_empty(cell):
    assert classify_prediction(cell) == EMPTY
    assert prediction_text(cell) == ('' if not isinstance(cell, str) else cell)


def test_numbers_are_refused_not_guessed():
    # A reader that turned "-1" into -1.0 must be fixed, not papered over here.
    with pytest.raises(TypeError):
        classify_prediction(-1.0)


CELLS = ['Failed to obtain answer via API.', 'Failed to obtain answer via API.: Failed with all possible '
         'conversation turns.', "Failed to obtain answer: <class 'RuntimeError'> CUDA out of memory",
         'The log says "Failed to obtain answer via API." Answer: 3', ' Failed to obtain answer via API.',
         'failed to obtain answer via api.', 'Failed to obtain answer', '', '   ', None, math.nan, 'B', '3.0',
         "Failed to obtain answer: <class 'X'>:boom",             # not the kit's form (`{type(err)} {err}`)
         "Failed to obtain answer: <class 'RuntimeError'> "]      # the kit's form with an empty message


def test_the_kit_dialect_files_and_the_plugin_share_one_failure_rule_and_one_table_reader():
    """The failure rule and the text-table reader live once, in dataset/utils/exact_io.py (a file every
    exported patch adds identically); no other kit-dialect file defines its own, and the plugin's rule is it."""
    import ast
    from pathlib import Path

    from vlmeval_ext.dataset.utils import exact_io
    assert [exact_io.is_infer_fail(c) for c in CELLS] == [is_kit_failure(c) for c in CELLS]
    assert sum(is_kit_failure(c) for c in CELLS) == 4
    shared = {'is_infer_fail', 'read_text_table', 'judge_id', 'fill', 'load_progress', 'FAIL_MSG', '_KIT_FAILURE'}
    dialect = Path(exact_io.__file__).parents[1]
    users = []
    for path in sorted(dialect.glob('**/*.py')):
        if path.name in ('exact_io.py', '__init__.py'):
            continue
        tree = ast.parse(path.read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                    if isinstance(t, ast.Name)}
        assert not defined & shared, f'{path.name} defines its own {sorted(defined & shared)}'
        if any(isinstance(n, ast.ImportFrom) and (n.module or '').endswith('exact_io') for n in tree.body):
            users.append(path.name)
    assert len(users) >= 8, users      # the five datasets and the utils of GRAB, R-Bench and ReMI
