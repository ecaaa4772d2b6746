"""Pairing of kit prediction rows, failure accounting, the naive baseline and the shipped demo (no kit import)."""
import base64
import io

import pandas as pd
import pytest

from vlmeval_ext.core.io import DataError, file_md5, read_table
from vlmeval_ext.rbench.evaluation import judge_tasks, pair_predictions, scorable_kinds, score_rows
from vlmeval_ext.rbench.make_demo import DEMO_TSV, WIDTH0
from vlmeval_ext.rbench.prompt import NAIVE_ANSWERS, model_prompt, naive_answer
from vlmeval_ext.rbench.report import taxonomy


def _rows():
    demo = read_table(DEMO_TSV).drop(columns=['image'])       # every cell text, as predictions files are read
    demo['prediction'] = ['B' if t == 'MCQ' else 'an output' for t in demo['type']]
    return demo.to_dict('records')


def test_pairs_and_counts_failures():
    rows = _rows()
    rows[1]['prediction'] = 'Failed to obtain answer via API.'     # pair 0 dis: the kit's failure text
    rows[16]['prediction'] = ''                                     # pair 8 ref: an empty answer, judged
    del rows[33]                                                    # pair 16 dis row missing
    pairing = pair_predictions(rows, 'p.xlsx')
    assert len(pairing.items) == 24 and pairing.rows == 47
    assert (pairing.infer_failed, pairing.empty, pairing.missing_partner) == (1, 1, 1)
    by_id = {it.pair_id: it for it in pairing.items}
    assert by_id[0].pred_dis is None and by_id[0].pred_ref == 'B'
    assert by_id[8].pred_ref == '' and scorable_kinds(by_id[8]) == ['dis', 'ref', 'com']
    assert scorable_kinds(by_id[0]) == ['ref']
    assert scorable_kinds(by_id[16]) == ['ref'] and scorable_kinds(by_id[1]) == ['dis', 'ref', 'com']
    tasks, aliases = judge_tasks(pairing.items, 'R-Bench-Full_DEMO', 'official')
    assert len(tasks) == 22 * 3 + 2 and not aliases
    table = score_rows(pairing.items, lambda item, kind: 0.5)
    assert table[0]['score_dis'] is None and table[0]['score_com'] is None and table[0]['score_ref'] == 0.5


def test_bad_rows_name_file_row_and_column():
    rows = _rows()
    rows[4]['variant'] = 'distorted'
    with pytest.raises(DataError, match=r"p\.xlsx: row 6, column 'variant'"):
        pair_predictions(rows, 'p.xlsx')
    rows = _rows()
    rows[3]['variant'] = 'ref'
    with pytest.raises(DataError, match="row 5: pair_id 1 has a second 'ref' row"):
        pair_predictions(rows, 'p.xlsx')
    rows = _rows()
    rows[5]['strength'] = 9
    with pytest.raises(DataError, match="row 7, column 'strength'.*differs"):
        pair_predictions(rows, 'p.xlsx')


def test_cells_are_scored_as_the_text_written(tmp_path):
    rows = _rows()[:2]
    rows[0].update(type='VQA', choice='N', answer='3.0', question='', prediction='07')
    rows[1].update(type='VQA', choice='N', answer='3.0', question='', prediction='+3')
    path = tmp_path / 'p.xlsx'
    pd.DataFrame(rows).to_excel(path, index=False)
    (item,) = pair_predictions(read_table(path).to_dict('records'), path).items
    assert (item.answer, item.question, item.pred_ref, item.pred_dis) == ('3.0', '', '07', '+3')
    rows[1]['strength'] = 'high'
    with pytest.raises(DataError, match=r"row 3, column 'strength': 'high' is not an integer"):
        pair_predictions(rows, 'p.xlsx')


def test_naive_baseline_answers_per_task():
    assert naive_answer(model_prompt('MCQ', 'What is it?', 'A.cat; B.dog')) == NAIVE_ANSWERS['MCQ'] == 'A'
    assert naive_answer(model_prompt('VQA', 'What color is the car')) == NAIVE_ANSWERS['VQA']
    assert naive_answer(model_prompt('CAP')) == NAIVE_ANSWERS['CAP']
    with pytest.raises(ValueError, match='not an R-Bench model prompt'):
        naive_answer('Describe the chart.')


def test_demo_split_is_real_items_with_distinct_generated_images(fixtures_dir):
    from PIL import Image

    from vlmeval_ext.rbench.data import read_question_bank
    from vlmeval_ext.rbench.make_demo import DEMO_MD5
    demo = pd.read_csv(DEMO_TSV, sep='\t', keep_default_na=False, dtype={'answer': str})
    assert DEMO_TSV.stat().st_size < 1 << 20 and file_md5(DEMO_TSV) == DEMO_MD5
    assert len(demo) == 48 and demo.type.value_counts().to_dict() == {'MCQ': 16, 'VQA': 16, 'CAP': 16}
    bank = {(b['name'], b['question'], b['answer']) for b in read_question_bank(fixtures_dir / 'rbench' /
                                                                                 'Ref_Release.csv')}
    assert all((r.name, r.question, r.answer) in bank for r in demo.itertuples())
    tax = taxonomy()
    for task in ('MCQ', 'VQA', 'CAP'):
        ids = set(demo[demo.type == task].distortion)
        assert {tax['step_of'][i] for i in ids} == set(tax['steps'])
        assert {tax['group_of'][i] for i in ids} == set(tax['groups'])
        assert set(demo[demo.type == task].strength) == {1, 2, 3}
    for pid in range(24):
        ref, dis = (demo[(demo.pair_id == pid) & (demo.variant == v)].image.iloc[0] for v in ('ref', 'dis'))
        assert ref != dis
        with Image.open(io.BytesIO(base64.b64decode(dis))) as im:
            assert im.size == (WIDTH0 + pid, 104)
