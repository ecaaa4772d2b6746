"""What an `<Dataset>-RC` asks of the kit, checked against the installed kit (run on ms-vlmeval 0.0.20 and on
VLMEvalKit): the base dataset object, the name of the per-row result file each kit evaluator writes
(`kit_row_result_file`, from the kit's own get_intermediate_file_path), and the judge the evaluator is given."""
from __future__ import annotations

import json
import os.path as osp
import time

import pandas as pd
import pytest

from helpers.kit_tables import b64_png, closed_port_url, item_image, mcq_tsv, textvqa_tsv
from vlmeval_ext.io import DataError, write_kit_tsv
from vlmeval_ext.judging import JudgeUnavailable
from vlmeval_ext.corrupt.variants import build_rc_frame, row_scores_from_result, split_by_slot
from helpers.kit_run import FAKE_KEY


K = CorruptedDataset = base_rows = None      # set by _kit_modules when the tests run


@pytest.fixture(scope='module', autouse=True)
def _kit_modules():
    """The -RC dataset module imports the kit: imported when these tests run, not when they are collected."""
    global K, CorruptedDataset, base_rows
    from vlmeval_ext.corrupt import kit as K
    from vlmeval_ext.corrupt.dataset import CorruptedDataset, base_rows


def pope_tsv(n: int = 4) -> pd.DataFrame:
    """A small TSV in the kit's POPE format (an ImageYORNDataset: answers Yes / No, a category per row)."""
    return pd.DataFrame([{'index': k, 'question': f'Is there a cat in the image? yn item={k}',
                          'answer': 'Yes' if k % 2 == 0 else 'No', 'category': 'random',
                          'image': b64_png(item_image(k))} for k in range(n)])


BASES = {'MCQ': ('AI2D_MINI', mcq_tsv, ['A', 'I cannot tell', 'C', 'A']),
         'Y/N': ('POPE', pope_tsv, ['Yes', 'Yes', '', 'No']),
         'VQA': ('TextVQA_VAL', textvqa_tsv, ['cat', 'kitty', 'dog'])}
EXPECTED = {'MCQ': [1.0, 0.0, 1.0, 0.0], 'Y/N': [1.0, 0.0, 0.0, 1.0], 'VQA': [1.0, 0.9, 0.0]}


def build(lmu, task: str) -> tuple[str, pd.DataFrame]:
    """<base>.tsv and <base>-RC.tsv under LMUData; returns the -RC name and its predictions (the model's replies)."""
    name, make, replies = BASES[task]
    base = make()
    base.to_csv(lmu / f'{name}.tsv', sep='\t', index=False)
    rc = build_rc_frame(base, [16], [1], progress=False)
    write_kit_tsv(rc, lmu / f'{name}-RC.tsv')
    pred = rc.drop(columns=['image'])
    pred['prediction'] = replies * 2
    return f'{name}-RC', pred


@pytest.mark.parametrize('task', list(BASES))
def test_each_kit_evaluator_writes_the_file_our_naming_names(lmu, tmp_path, task):
    rc_name, pred = build(lmu, task)
    name = rc_name[:-3]
    base = K.kit_base_dataset(name, rc_name, str(lmu), str(tmp_path / 'img'))
    assert base.task == task
    # the kit's own file when the kit lists no md5 for it; otherwise the rows the -RC was built from
    assert base.source.startswith("the kit's build_dataset") == (task == 'MCQ')
    judge = K.rc_judge({'nproc': 1}, task, name)
    eval_file = str(tmp_path / 'out' / f'M_{name}_ref.xlsx')
    (tmp_path / 'out').mkdir()
    rows = base_rows(base.dataset, split_by_slot(pred)[0], 'pred.xlsx')
    from vlmeval.smp import dump, load
    dump(rows, eval_file)
    base.dataset.evaluate(eval_file, **judge.kwargs)
    result = K.kit_row_result_file(task, eval_file, judge.kwargs.get('model', judge.name))
    assert osp.isfile(result), sorted(p.name for p in (tmp_path / 'out').iterdir())
    table = load(result)
    reduce = K.kit_match_to_score(name) if task == 'VQA' else None
    scores = row_scores_from_result(table, result, reduce)
    assert [scores[i] for i in sorted(scores)] == pytest.approx(EXPECTED[task])


def test_mcq_judge_file_uses_the_kits_short_name_and_the_judge_is_recorded(lmu, tmp_path, loopback):
    """--judge chatgpt-0125: the kit names its MCQ result file `_openai_result`; the judge reads the answer that
    names no option, and the -RC's _score.json names the judge that was used."""
    rc_name, pred = build(lmu, 'MCQ')
    loopback.script(r'I cannot tell', 'B')       # the judge maps the reply that names no option to B
    pred_file = tmp_path / f'M_{rc_name}.xlsx'
    pred.to_excel(pred_file, index=False)
    judge_kwargs = {'model': 'chatgpt-0125', 'api_base': loopback.chat_url, 'key': FAKE_KEY, 'nproc': 1,
                    'retry': 1}
    CorruptedDataset.for_predictions(rc_name, pred_file).evaluate(str(pred_file), **judge_kwargs)
    sub = tmp_path / f'M_{rc_name}_RC' / f'M_{rc_name}_ref.xlsx'
    assert K.kit_row_result_file('MCQ', str(sub), 'chatgpt-0125').endswith('_ref_openai_result.xlsx')
    assert osp.isfile(K.kit_row_result_file('MCQ', str(sub), 'chatgpt-0125'))
    score = json.loads((tmp_path / f'M_{rc_name}_score.json').read_text())
    assert score['judge']['name'] == 'chatgpt-0125' and 'then judge chatgpt-0125' in score['judge']['mode']
    assert score['per_variant']['ref']['mean'] == 0.75        # item 1's 'I cannot tell' read as B: right
    assert loopback.count(r'I cannot tell') >= 2              # asked for the reference and the distorted row


def test_a_dead_judge_stops_the_rc_evaluation_at_once(lmu, tmp_path):
    rc_name, pred = build(lmu, 'MCQ')
    pred_file = tmp_path / f'M_{rc_name}.xlsx'
    pred.to_excel(pred_file, index=False)
    t0 = time.time()
    with pytest.raises(JudgeUnavailable, match=r"the judge gpt-4o-mini at \S+ did not answer a test call"):
        CorruptedDataset.for_predictions(rc_name, pred_file).evaluate(str(pred_file), model='gpt-4o-mini',
                                                          api_base=closed_port_url(), key=FAKE_KEY, retry=10)
    assert time.time() - t0 < 60                   # one test call, not minutes of the kit's retries
    assert not (tmp_path / f'M_{rc_name}_RC').exists() and not (tmp_path / f'M_{rc_name}_score.json').exists()


def test_judge_without_judge_is_exact_matching_and_vqa_uses_none():
    assert K.rc_judge({'nproc': 4}, 'MCQ', 'AI2D_MINI').kwargs['model'] == 'exact_matching'
    assert K.rc_judge({}, 'Y/N', 'POPE').name == 'exact_matching'
    offline = K.rc_judge({'model': 'offline'}, 'MCQ', 'AI2D_MINI')
    assert offline.name == 'exact_matching' and 'no offline judge' in offline.mode
    vqa = K.rc_judge({'model': 'gpt-4o'}, 'VQA', 'TextVQA_VAL')
    assert vqa.name == 'none' and 'model' not in vqa.kwargs and '--judge gpt-4o is not used' in vqa.mode
    with pytest.raises(DataError, match='--use-verifier'):
        K.rc_judge({'use_verifier': True}, 'VQA', 'TextVQA_VAL')


def test_a_base_the_rc_cannot_score_stops_before_inference(lmu, tmp_path):
    """MathVista_MINI is scored by its own evaluate (an LLM extraction with its own files): refused, one line."""
    base = textvqa_tsv()
    base.to_csv(lmu / 'MathVista_MINI.tsv', sep='\t', index=False)
    write_kit_tsv(build_rc_frame(base, [16], [1], progress=False), lmu / 'MathVista_MINI-RC.tsv')
    with pytest.raises(DataError, match=r'MathVista_MINI-RC: base dataset MathVista_MINI is scored by '
                                        r'\w+\.evaluate, whose per-row scores an -RC cannot read'):
        CorruptedDataset('MathVista_MINI-RC')


def test_a_base_copy_is_never_replaced_and_its_rows_must_match(lmu, tmp_path):
    """TextVQA_VAL.tsv here is not the kit's file: the kit's class gets the -RC's own rows, the file stays as it
    is. A predictions row whose question the base rows do not have is an error naming the -RC's base."""
    rc_name, pred = build(lmu, 'VQA')
    before = (lmu / 'TextVQA_VAL.tsv').read_bytes()
    ds = CorruptedDataset(rc_name)
    assert type(ds.base).__name__ == 'ImageVQADatasetFromRows' and ds.base.dataset_name == 'TextVQA_VAL'
    assert ds.base.img_root == str(lmu / 'images' / rc_name)
    assert (lmu / 'TextVQA_VAL.tsv').read_bytes() == before
    prompt = ds.build_prompt(ds.data.iloc[len(ds.data) - 1])
    assert prompt[0]['value'].startswith(str(lmu / 'images' / rc_name)) and 'single word' in prompt[-1]['value']
    wrong = split_by_slot(pred)[0].assign(question='another question')
    with pytest.raises(DataError, match=r'p\.xlsx: index 0: the question differs from TextVQA_VAL'):
        base_rows(ds.base, wrong, 'p.xlsx')
    with pytest.raises(DataError, match=r'p\.xlsx: index 7 is not in TextVQA_VAL'):
        base_rows(ds.base, split_by_slot(pred)[0].assign(index=7), 'p.xlsx')
