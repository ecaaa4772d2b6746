"""Bad input: each case is an error naming the file, row and field, or a counted failure; never a bare traceback,
never a silent score (tables, the benchmarks' readers, RoCOCO embeddings, the corruption engine). Cases through the
kit's classes are in test_bad_input_kit.py."""
from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest

from vlmeval_ext.io import DataError, load_predictions, parse_list_cell, read_table

# ------------------------------------------------------------------------------------------- tables (core.io)


def test_zero_byte_tsv_names_the_file(tmp_path):
    path = tmp_path / 'preds.tsv'
    path.write_bytes(b'')
    with pytest.raises(DataError, match=r'preds\.tsv: the file is empty \(0 bytes\)'):
        read_table(path)


def test_latin1_csv_is_named_not_misread(tmp_path):
    path = tmp_path / 'preds.csv'
    path.write_bytes('index,prediction\n1,caf\xe9 cr\xe8me\n'.encode('latin-1'))
    with pytest.raises(DataError, match=r'preds\.csv: not UTF-8.*latin-1'):
        read_table(path)
    # The way out the message names works and keeps the text.
    assert read_table(path, encoding='latin-1')['prediction'][0] == 'caf\xe9 cr\xe8me'


def test_missing_column_names_file_and_column(tmp_path):
    path = tmp_path / 'p.tsv'
    pd.DataFrame({'index': [1], 'answer': ['3']}).to_csv(path, sep='\t', index=False)
    with pytest.raises(DataError, match=r"p\.tsv: missing column\(s\) \['prediction'\]"):
        load_predictions(path)


def test_renamed_column_is_not_guessed(tmp_path):
    path = tmp_path / 'p.tsv'
    pd.DataFrame({'index': [1], 'Prediction': ['3']}).to_csv(path, sep='\t', index=False)
    with pytest.raises(DataError, match=r"missing column\(s\) \['prediction'\]; found \['index', 'Prediction'\]"):
        load_predictions(path)


def test_duplicate_indices_are_named(tmp_path):
    path = tmp_path / 'p.tsv'
    pd.DataFrame({'index': [1, 2, 2], 'prediction': ['a', 'b', 'c']}).to_csv(path, sep='\t', index=False)
    with pytest.raises(DataError, match=r"p\.tsv: duplicate values in column 'index': \['2'\]"):
        load_predictions(path)


def test_unsupported_file_type(tmp_path):
    path = tmp_path / 'p.pkl'
    path.write_bytes(b'\x80\x04junk')
    with pytest.raises(DataError, match=r"p\.pkl: unsupported file type '\.pkl'"):
        read_table(path)


def test_torn_tsv_is_a_parse_error_naming_the_file(tmp_path):
    path = tmp_path / 'p.tsv'
    path.write_text('index\tprediction\n1\t"unterminated\n')
    with pytest.raises(DataError, match=r'p\.tsv: cannot be parsed as tsv'):
        read_table(path)


@pytest.mark.parametrize('cell, message', [
    ("{'a': 1}", r"row 4, column 'answer': expected a list, got dict"),
    ('a photo of a cat', r"row 4, column 'answer': not a JSON or Python list"),
    ('', r"row 4, column 'answer': expected a list"),
    (float('nan'), r"row 4, column 'answer': expected a list"),
    ('__import__("os").system("echo pwned")', r'not a JSON or Python list'),   # never eval()
])
def test_list_cells_that_are_not_lists(cell, message):
    with pytest.raises(DataError, match=message):
        parse_list_cell(cell, 'data.tsv', 4, 'answer')


# ------------------------------------------------------------------------------------------------- GRAB outputs

INTEGER_Q = 'What is the value of the x-intercept of the function? Give your answer as an integer.'


@pytest.mark.parametrize('cell', [None, float('nan'), '', '  '])
def test_grab_empty_prediction_is_a_wrong_answer(cell):
    from vlmeval_ext.predictions import EMPTY, classify_prediction, prediction_text
    from vlmeval_ext.dataset.utils.grab import score_response
    assert classify_prediction(cell) == EMPTY                       # an answer, not an inference failure
    result = score_response(prediction_text(cell), '-9', INTEGER_Q)
    assert result == {'official': 0, 'normalized': 0, 'parsed': None}   # wrong, counted as unparsed
    with pytest.raises(TypeError):
        score_response(None, '-9', INTEGER_Q)                        # text only: the caller decides first


def test_grab_one_megabyte_output_is_scored_in_bounded_time():
    from vlmeval_ext.dataset.utils.grab import score_response
    huge = ('The plot rises and falls. ' * 40000)[:1_000_000] + ' The answer is -9.'
    start = time.perf_counter()
    result = score_response(huge, '-9', INTEGER_Q)
    assert time.perf_counter() - start < 10
    assert result['normalized'] == 1 and result['official'] == 0


def test_grab_binary_and_other_script_outputs_do_not_crash():
    from vlmeval_ext.dataset.utils.grab import score_response
    binary = b'\x00\xff\xfe-9\x07'.decode('latin-1')
    assert score_response(binary, '-9', INTEGER_Q)['official'] == 0
    # Arabic-Indic digits are digits: "\u0663" is read as 3 (wrong here), not a crash.
    other = score_response('\u0627\u0644\u062c\u0648\u0627\u0628 \u0663', '-9', INTEGER_Q)
    assert other['normalized'] == 0 and other['parsed'] == '3'
    assert score_response('\u0627\u0644\u062c\u0648\u0627\u0628', '-9', INTEGER_Q)['parsed'] is None
    assert score_response('答案是 -9', '-9', INTEGER_Q)['normalized'] == 1


def test_grab_answer_that_is_nan_is_refused():
    from vlmeval_ext.dataset.utils.grab import answer_text
    for cell in (float('nan'), 3.0, ''):
        with pytest.raises(ValueError, match='GRAB answer must be non-empty text'):
            answer_text(cell, INTEGER_Q)


class Replies:
    """Stands in for a kit judge (only `generate(prompt)` is used): the next scripted reply per call."""

    def __init__(self, replies):
        self.replies, self.calls = iter(replies), 0

    def generate(self, prompt):
        self.calls += 1
        return next(self.replies)


def test_grab_garbage_judge_reply_is_asked_again_then_counted_failed():
    from vlmeval_ext.dataset.grab import extract_answer
    judge = Replies(['#$%&*@!?~^', 'Service unavailable, try later', '-9'])     # third ask usable
    assert extract_answer(judge, INTEGER_Q, 'It is -9')['extracted'] == '-9' and judge.calls == 3
    judge = Replies(['!!!', '???', '~~~'])                                     # never usable
    result = extract_answer(judge, INTEGER_Q, 'It is -9')
    assert result['extracted'] is None and 'no answer in 3 judge replies' in result['failed']


# ------------------------------------------------------------------------------------------------- ReMI outputs

REMI_TASK = 'EmojiAlgebra'


@pytest.mark.parametrize('output', ['[1, 2, 3]', '"just a string"', '42', 'null', '[{"answer": "3"}, 7]'])
def test_remi_non_dict_json_is_a_counted_wrong_answer(output):
    from vlmeval_ext.dataset.utils import remi as score
    result = score.score_item(REMI_TASK, output, '3')
    if result['status'] == 'ok':                     # a list holding a dict with "answer": that dict is read
        assert output.startswith('[{') and result['parsed'] == '3'
    else:
        assert result['lenient'] is False and result['status'] in (score.NOT_OBJECT, score.NO_JSON)
        assert result['official'] is False and result['official_pred'] == score.BAD_JSON


@pytest.mark.parametrize('output', ['', '   ', '\n'])
def test_remi_empty_output_is_a_wrong_answer(output):
    from vlmeval_ext.dataset.utils import remi as score
    result = score.score_item(REMI_TASK, output, '3')
    assert result['kind'] == 'empty' and result['official'] is False and result['lenient'] is False
    assert result['official_pred'] == score.BAD_JSON


def test_remi_one_megabyte_and_binary_outputs():
    from vlmeval_ext.dataset.utils import remi as score
    huge = '{' * 200_000 + 'x' * 800_000
    start = time.perf_counter()
    result = score.score_item(REMI_TASK, huge, '3')
    assert time.perf_counter() - start < 5 and result['lenient'] is False and result['official'] is False
    # The answer of a long (1 MB) reasoning output is still found at its end.
    long_reasoning = 'Let me think step by step {about it}. ' * 26000 + '{"explanation": "done", "answer": "3"}'
    start = time.perf_counter()
    result = score.score_item(REMI_TASK, long_reasoning, '3')
    assert time.perf_counter() - start < 5
    # lenient finds it; official reads from the first '{' (in the reasoning) to the last '}': not JSON
    assert result['lenient'] is True and result['official'] is False
    binary = '\x00\x01{"answer": "3"}\xff'
    assert score.score_item(REMI_TASK, binary, '3')['official'] is True


def test_remi_fail_marker_is_not_scored():
    from vlmeval_ext.dataset.utils import remi as score
    result = score.score_item(REMI_TASK, 'Failed to obtain answer via API.', '3')
    assert result['official'] is None and result['lenient'] is None and result['status'] == score.INFERENCE_FAILURE


# ---------------------------------------------------------------------------------------------- R-Bench-Full

@pytest.mark.parametrize('text', ['a cat on a mat', '[]', '{"caption": "a cat"}', '[1, 2]'])
def test_rbench_cap_reference_lists_that_are_not_lists(text, tmp_path):
    """A CAP answer cell that is no list of captions: one error naming the predictions file, row and column."""
    from vlmeval_ext.dataset.rbench_full import RBenchFull
    from vlmeval_ext.dataset.utils.rbench_full import parse_captions
    with pytest.raises(ValueError, match='non-empty list of reference captions'):
        parse_captions(text)
    rows = [dict(r, type='CAP', choice='N', answer=text) for r in _rbench_rows()]
    path = tmp_path / 'preds.tsv'
    pd.DataFrame(rows).to_csv(path, sep='\t', index=False)
    dataset = object.__new__(RBenchFull)
    items = dataset.read_pairs(str(path))[0]
    with pytest.raises(ValueError, match=r"preds\.tsv: row 2, column 'answer': not a non-empty list"):
        dataset.score_items(items, str(path), Replies(['Score: 1'] * 50), 'some-judge')


def _rbench_rows():
    base = {'pair_id': 3, 'type': 'MCQ', 'name': 'n', 'question': 'q', 'choice': 'A.x; B.y', 'answer': 'A',
            'distortion': 1, 'strength': 1}
    return [dict(base, index=1, variant='ref', prediction='A'), dict(base, index=2, variant='dis', prediction='B')]


def _pair(rows, path='preds.xlsx'):
    from vlmeval_ext.dataset.utils.rbench_full import pair_rows
    return pair_rows(pd.DataFrame(rows).astype(str).replace('nan', ''), path)


def test_rbench_bad_variant_names_row_and_column():
    rows = _rbench_rows()
    rows[1]['variant'] = 'distorted'
    with pytest.raises(ValueError, match=r"preds\.xlsx: row 3, column 'variant': 'distorted' is not ref or dis"):
        _pair(rows)


def test_rbench_duplicate_pair_row_is_refused():
    rows = _rbench_rows()
    rows[1]['variant'] = 'ref'
    with pytest.raises(ValueError, match=r"row 3: pair_id 3 has a second 'ref' row \(first at row 2\)"):
        _pair(rows)


def test_rbench_failed_prediction_is_not_scored_empty_one_is_judged():
    rows = _rbench_rows()
    rows[1]['prediction'] = 'Failed to obtain answer via API.'
    (item,), counts, _ = _pair(rows)
    assert item['pred_ref'] == 'A' and item['pred_dis'] is None
    rows[1]['prediction'] = ''                            # an empty cell: the model's empty answer
    (item,), counts, _ = _pair(rows)
    assert item['pred_dis'] == '' and (counts['empty'], counts['inference_failures']) == (1, 0)


@pytest.mark.parametrize('reply', ['', 'I cannot judge this.', '#$%&*@!?~^', 'Score: 7', None])
def test_rbench_judge_reply_without_a_verdict_is_none_not_zero(reply):
    from vlmeval_ext.dataset.utils.rbench_full import parse_verdict
    assert parse_verdict(reply, (0, 1)) is None


# ----------------------------------------------------------------------------------------------------- RoCOCO

def _annotation(n_images=2):
    from vlmeval_ext.prepare.rococo import parse_annotation
    entries = [{'image': f'val2014/img{i}.jpg',
                'caption': [f'a photo number {i} of thing {k}' for k in range(5)] +
                           [f'a photo number {i} of stuff {k}' for k in range(5)]} for i in range(n_images)]
    return parse_annotation(entries, 'attack.json')


@pytest.mark.parametrize('image_emb, text_emb, message', [
    (np.ones(4), np.ones((20, 4)), r'image\.npy: expected a 2-D \(rows, dim\) array, got shape \(4,\)'),
    (np.ones((3, 4)), np.ones((20, 4)), r'image\.npy: expected 2 rows, got 3'),
    (np.ones((2, 4)), np.ones((20, 5)), r'text\.npy: embedding dim 5 does not match the other side \(4\)'),
    (np.ones((2, 4)), np.ones((19, 4)), r'text\.npy: expected 20 rows, got 19'),
    (np.array([[1., 2, 3, 4], [1, np.nan, 3, 4]]), np.ones((20, 4)), r'image\.npy: row 1 column 1 is nan'),
    (np.ones((2, 4)), np.full((20, 4), np.inf), r'text\.npy: row 0 column 0 is inf \(20 rows hold NaN/inf\)'),
    (np.array([[1., 2, 3, 4], [0, 0, 0, 0]]), np.ones((20, 4)), r'image\.npy: row 1 is an all-zero embedding'),
    (np.array([['a'] * 4] * 2), np.ones((20, 4)), r'image\.npy: embeddings must be numeric'),
])
def test_rococo_embeddings_with_wrong_shapes_or_nan(image_emb, text_emb, message):
    from vlmeval_ext.cli.rococo import score_embeddings
    with pytest.raises(ValueError, match=message):
        score_embeddings(_annotation(), image_emb, text_emb, 'i2t', names=('image.npy', 'text.npy'))


def test_rococo_annotation_that_is_not_a_list_of_entries():
    from vlmeval_ext.prepare.rococo import parse_annotation
    with pytest.raises(ValueError, match=r'attack\.json: expected a JSON list of entries, got dict'):
        parse_annotation({'image': 'x'}, 'attack.json')
    with pytest.raises(ValueError, match=r'attack\.json: entry 0 \(a\.jpg\) column "caption" must be a list'):
        parse_annotation([{'image': 'a.jpg', 'caption': 'one caption'}], 'attack.json')


# ---------------------------------------------------------------------------------------------------- corrupt

@pytest.mark.parametrize('distortion', [0, 34, -1, '5', 5.0, True, None])
def test_unknown_distortion_ids(distortion):
    from vlmeval_ext.distortions import check_distortion
    with pytest.raises(ValueError, match=r'unknown distortion id .*R-Bench distortions are 1-33'):
        check_distortion(distortion)


@pytest.mark.parametrize('strength', [0, 4, '2', None])
def test_unknown_strengths(strength):
    from vlmeval_ext.distortions import check_strength
    with pytest.raises(ValueError, match=r'unknown strength'):
        check_strength(strength)


def test_distortion_id_list_from_the_command_line():
    from vlmeval_ext.corrupt.cli import parse_id_list
    with pytest.raises(ValueError, match=r"unknown distortion '99' in '1,99': choose from 1-33"):
        parse_id_list('1,99', list(range(1, 34)), 'distortion')


@pytest.mark.parametrize('cell', ['not base64 at all!!', 'aGVsbG8gd29ybGQ='])   # the 2nd decodes to "hello world"
def test_corrupting_a_cell_that_is_not_an_image(cell):
    from vlmeval_ext.corrupt.variants import corrupt_cell
    with pytest.raises(DataError, match=r"base\.tsv: row 5, column 'image' \[0\]: not a decodable base64 image"):
        corrupt_cell(cell, 1, 1, 0, 'base.tsv', 5)


def test_rc_name_that_is_not_a_robustness_variant():
    from vlmeval_ext.corrupt.variants import base_name
    with pytest.raises(DataError, match='is not a robustness-variant dataset name'):
        base_name('MMBench_DEV_EN')


def test_nan_score_from_a_base_evaluator_is_not_silently_used():
    from vlmeval_ext.corrupt.variants import row_scores_from_result
    result = pd.DataFrame({'index': [1, 2], 'hit': [1.0, 3.0]})
    with pytest.raises(DataError, match=r"row 3, column 'hit': score 3\.0 outside \[0, 1\]"):
        row_scores_from_result(result, 'MMBench-RC_result.xlsx')
    scores = row_scores_from_result(pd.DataFrame({'index': [1, 2], 'hit': [1.0, math.nan]}), 'r.xlsx')
    assert scores[1] == 1.0 and scores[2] is None
