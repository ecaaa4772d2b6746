"""R-Bench-Full's pairing of kit prediction rows (pair_rows), failure accounting, the naive baseline and the
shipped demo split."""
import base64
import io

import pandas as pd
import pytest

from vlmeval_ext.plugin.rbench import RBENCH_ANSWERS
from vlmeval_ext.plugin.rbench import naive_answer as rbench
from vlmeval_ext.dataset.utils.rbench_full import pair_rows, scorable
from vlmeval_ext.dataset.utils import rbench_full as B
from vlmeval_ext.dataset.utils.exact_io import read_text_table
from vlmeval_ext.dataset.utils.rbench_full import model_prompt
from vlmeval_ext.io import file_md5
from vlmeval_ext.prepare.demos import RBENCH_DEMO_TSV as DEMO_TSV
from vlmeval_ext.prepare.demos import WIDTH0
from vlmeval_ext.registry import benchmark_of


def _rows():
    demo = read_text_table(DEMO_TSV).drop(columns=['image'])   # every cell text, as predictions files are read
    demo['prediction'] = ['B' if t == 'MCQ' else 'an output' for t in demo['type']]
    return demo.to_dict('records')


def pair(rows, path='p.xlsx'):
    return pair_rows(pd.DataFrame(rows).astype(str), path)


def test_pairs_and_counts_failures():
    rows = _rows()
    rows[1]['prediction'] = 'Failed to obtain answer via API.'     # pair 0 dis: the kit's failure text
    rows[16]['prediction'] = ''                                     # pair 8 ref: an empty answer, judged
    del rows[33]                                                    # pair 16 dis row missing
    items, counts, failed_rows = pair(rows)
    assert len(items) == 24 and counts['rows'] == 47
    assert (counts['inference_failures'], counts['empty'], counts['missing_partner']) == (1, 1, 1)
    by_id = {it['pair_id']: it for it in items}
    assert by_id[0]['pred_dis'] is None and by_id[0]['pred_ref'] == 'B'
    assert by_id[8]['pred_ref'] == '' and scorable(by_id[8]) == ['dis', 'ref', 'com']
    assert scorable(by_id[0]) == ['ref']
    assert scorable(by_id[16]) == ['ref'] and scorable(by_id[1]) == ['dis', 'ref', 'com']
    assert sum(len(scorable(it)) for it in items) == 22 * 3 + 2
    assert [r[1] for r in failed_rows] == ['inference failed', 'pair_id 16: no dis row']


def test_bad_rows_name_file_row_and_column():
    rows = _rows()
    rows[4]['variant'] = 'distorted'
    with pytest.raises(ValueError, match=r"p\.xlsx: row 6, column 'variant'"):
        pair(rows)
    rows = _rows()
    rows[3]['variant'] = 'ref'
    with pytest.raises(ValueError, match="row 5: pair_id 1 has a second 'ref' row"):
        pair(rows)
    rows = _rows()
    rows[5]['strength'] = 9
    with pytest.raises(ValueError, match="row 7, column 'strength'"):
        pair(rows)
    rows = _rows()
    rows[5]['question'] = 'another question'
    with pytest.raises(ValueError, match="row 7, column 'question'.*differs"):
        pair(rows)


def test_cells_are_scored_as_the_text_written(tmp_path):
    rows = _rows()[:2]
    rows[0].update(type='VQA', choice='N', answer='3.0', question='', prediction='07')
    rows[1].update(type='VQA', choice='N', answer='3.0', question='', prediction='+3')
    path = tmp_path / 'p.xlsx'
    pd.DataFrame(rows).to_excel(path, index=False)
    (item,), _, _ = pair_rows(read_text_table(path), path)
    assert (item['answer'], item['question'], item['pred_ref'], item['pred_dis']) == ('3.0', '', '07', '+3')
    rows[1]['strength'] = 'high'
    with pytest.raises(ValueError, match=r"row 3, column 'strength': 'high' is not an integer"):
        pair(rows)


def test_naive_baseline_answers_per_task():
    assert rbench(model_prompt('MCQ', 'What is it?', 'A.cat; B.dog'), 'R-Bench-Full') == RBENCH_ANSWERS['MCQ'] == 'A'
    assert rbench(model_prompt('VQA', 'What color is the car'), 'R-Bench-Full') == RBENCH_ANSWERS['VQA']
    assert rbench(model_prompt('CAP'), 'R-Bench-Full') == RBENCH_ANSWERS['CAP']
    with pytest.raises(ValueError, match='not an R-Bench model prompt'):
        rbench('Describe the chart.', 'R-Bench-Full')


def test_demo_split_is_real_items_with_distinct_generated_images(fixtures_dir):
    from PIL import Image

    from vlmeval_ext.prepare.rbench import read_question_bank
    demo = pd.read_csv(DEMO_TSV, sep='\t', keep_default_na=False, dtype={'answer': str})
    assert DEMO_TSV.stat().st_size < 1 << 20
    assert file_md5(DEMO_TSV) == benchmark_of('R-Bench-Full_DEMO').demo_md5['R-Bench-Full_DEMO.tsv']
    assert len(demo) == 48 and demo.type.value_counts().to_dict() == {'MCQ': 16, 'VQA': 16, 'CAP': 16}
    bank = {(b['name'], b['question'], b['answer']) for b in read_question_bank(fixtures_dir / 'rbench' /
                                                                                 'Ref_Release.csv')}
    assert all((r.name, r.question, r.answer) in bank for r in demo.itertuples())
    for task in ('MCQ', 'VQA', 'CAP'):
        ids = set(demo[demo.type == task].distortion)
        assert {B.DISTORTIONS[i][1] for i in ids} == set(B.STEPS)
        assert {B.DISTORTIONS[i][2] for i in ids} == set(B.GROUPS)
        assert set(demo[demo.type == task].strength) == {1, 2, 3}
    for pid in range(24):
        ref, dis = (demo[(demo.pair_id == pid) & (demo.variant == v)].image.iloc[0] for v in ('ref', 'dis'))
        assert ref != dis
        with Image.open(io.BytesIO(base64.b64decode(dis))) as im:
            assert im.size == (WIDTH0 + pid, 104)
