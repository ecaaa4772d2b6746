"""`<Dataset>-RC` end to end: build with `vlmeval-ext corrupt`, run through run.py with the loopback server as the
model and no judge reachable, evaluate with the base datasets' own scoring (a kit MCQ and a kit VQA dataset), and
check the paired robustness report number by number. Pure pieces of the report are tested without the kit."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlmeval_ext.io import DataError
from vlmeval_ext.corrupt.report import rc_table
from vlmeval_ext.corrupt.variants import (INDEX_SLOT, build_rc_frame, consistency_answer, is_graded, paired_rows,
                                          row_scores_from_result, split_by_slot)
from helpers.kit_run import loopback_model_config, run_kit, write_config

from helpers.kit_tables import TEXTVQA_ANSWERS, closed_port_url, mcq_tsv, scripted_model, textvqa_tsv


def test_rc_frame_pairs_and_split_back():
    base = mcq_tsv(3)
    rc = build_rc_frame(base, [5, 16], [1, 3], progress=False)
    assert len(rc) == 3 * (1 + 4) and rc['index'].is_unique
    assert (rc.groupby('pair_id').size() == 5).all()
    parts = split_by_slot(rc)
    assert sorted(parts) == [0, 1, 2, 3, 4]
    for slot, part in parts.items():
        assert part['index'].tolist() == [0, 1, 2] and 'pair_id' not in part
        same = part['image'].tolist() == base['image'].tolist()
        assert same == (slot == 0)
    assert rc.loc[rc['variant'] == 'dis', 'index'].min() >= INDEX_SLOT


def test_row_scores_are_the_kits_own_scores_and_reduce_matches_like_the_kit():
    # the kit's exact matching found no option (its 'Z'): the base rule scores it wrong, it is not a failure
    mcq = pd.DataFrame({'index': [0, 1, 2], 'hit': [1, 0, 0],
                        'log': ['Match Log: A. ', 'Match Log: Failed in Prefetch, no GPT-based answer matching',
                                'Failed to predict, thus randomly generate one. ']})
    assert row_scores_from_result(mcq, 'r.xlsx') == {0: 1.0, 1: 0.0, 2: 0.0}
    yorn = pd.DataFrame({'index': [3, 4, 5], 'score': [True, False, 'True']})
    assert row_scores_from_result(yorn, 'r.xlsx') == {3: 1.0, 4: 0.0, 5: 1.0}
    vqa = pd.DataFrame({'index': [5, 6], 'eval_match': ['[1.0, 0.0]', '[0, 0]'], 'eval_score': [0.5, 0.0]})
    assert row_scores_from_result(vqa, 'r.xlsx', max) == {5: 1.0, 6: 0.0}      # ChartQA-like: max
    assert row_scores_from_result(vqa, 'r.xlsx') == {5: 0.5, 6: 0.0}           # no reducer: eval_score
    with pytest.raises(DataError, match=r"r.xlsx: row 2, column 'hit'"):
        row_scores_from_result(pd.DataFrame({'index': [0], 'hit': [3]}), 'r.xlsx')


def test_prediction_kinds_follow_the_one_rule():
    from vlmeval_ext.predictions import ANSWER, EMPTY, FAILED
    from vlmeval_ext.corrupt.dataset import prediction_kind
    assert prediction_kind('') == EMPTY and prediction_kind('  ') == EMPTY and prediction_kind(float('nan')) == EMPTY
    assert prediction_kind('Failed to obtain answer via API.') == FAILED
    assert prediction_kind('Failed to obtain answer via API. xyz') == ANSWER   # an answer quoting the text
    assert prediction_kind('A') == ANSWER and prediction_kind(7) == ANSWER


def test_consistency_answer_and_graded():
    assert json.loads(consistency_answer('kitty', str(TEXTVQA_ANSWERS))) == ['kitty'] * 10
    assert consistency_answer('42', '41') == '42'
    assert is_graded('TextVQA_VAL', [1.0, 0.0]) and is_graded('ChartQA_TEST', [0.9])
    assert not is_graded('ChartQA_TEST', [1.0, 0.0, None])


def test_relative_uses_consistency_for_graded_and_excludes_failures():
    ref = {0: 1.0, 1: 0.9, 2: None}
    dis = {(26, 1): {0: 1.0, 1: 0.9, 2: None}, (26, 3): {0: 0.0, 1: 1.0, 2: 1.0}}
    com = {(26, 1): {0: 1.0, 1: 1.0}, (26, 3): {0: 0.0, 1: 0.0}}
    table = rc_table(paired_rows(ref, dis, com, task='VQA'), 'VQA')
    assert table['absolute']['Overall'] == pytest.approx((1 + 0.9 + 0 + 1 + 1) / 5)
    assert table['relative']['Overall'] == pytest.approx((1 + 0.9 + 0 + 0) / 4)
    assert table['relative']['VQA-low'] == pytest.approx(0.95) and table['relative']['high'] == 0.0
    # right/wrong metric: score_com = score_dis, relative = right on both
    binary = rc_table(paired_rows({0: 1.0, 1: 0.0}, {(5, 3): {0: 0.0, 1: 1.0}}, task='MCQ'), 'MCQ')
    assert binary['absolute']['Blur'] == 0.5 and binary['relative']['Camera'] == 0.0


# ------------------------------------------------------------------------------------------------ kit
def build_rc(tmp_path, kit_env) -> Path:
    """AI2D_MINI-RC and TextVQA_VAL-RC built with `vlmeval-ext corrupt` from small TSVs in the kit's formats."""
    lmu = tmp_path / 'LMUData'
    mcq_tsv().to_csv(lmu / 'AI2D_MINI.tsv', sep='\t', index=False)        # the kit lists no md5: used as it is
    textvqa_tsv().to_csv(lmu / 'TextVQA_VAL.tsv', sep='\t', index=False)  # md5 differs from the kit's
    (lmu / 'images' / 'AI2D_MINI-RC').mkdir(parents=True)
    (lmu / 'images' / 'AI2D_MINI-RC' / '100000000.jpg').write_bytes(b'stale')  # an earlier build's image
    proc = run_kit(['corrupt', '--data', 'AI2D_MINI', '--distortions', '3,5,26', '--strengths', '1,3', '--seed', '1'],
                   env=kit_env, entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'Distortions 3 are synthetic approximations' in proc.stdout
    proc = run_kit(['corrupt', '--data', 'TextVQA_VAL', '--distortions', '26', '--strengths', '1,3'],
                   env=kit_env, entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (lmu / 'images' / 'AI2D_MINI-RC').exists()  # stale decoded images dropped on rebuild
    return lmu


def test_mcq_and_vqa_rc_through_run_py_with_no_judge_reachable(tmp_path, loopback, kit_env):
    """AI2D_MINI-RC (kit MCQ) and TextVQA_VAL-RC (kit VQA score, graded) in ONE run.py call, no --judge, and the
    kit's judge address pointing at a closed port: the MCQ -RC uses the kit's exact matching, asks no judge,
    and says so."""
    lmu = build_rc(tmp_path, kit_env)
    textvqa_md5 = (lmu / 'TextVQA_VAL.tsv').read_bytes()
    env = {**kit_env, 'OPENAI_API_BASE': closed_port_url()}     # where the kit's default judge would go
    from vlmeval_ext.launcher import PROBE_PROMPT
    loopback.script(re.escape(PROBE_PROMPT), 'OK')         # the launcher's one test call to the model
    loopback.default = scripted_model
    cfg = loopback_model_config(loopback, {n: {'class': 'CorruptedDataset', 'dataset': n}
                                           for n in ('AI2D_MINI-RC', 'TextVQA_VAL-RC')}, wait=0)
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4'],
                   env=env, timeout=240)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    console = proc.stdout + proc.stderr
    assert 'OPENAI API is not working' not in console and 'gpt-4o-mini' not in console
    # the kit's evaluate runs once per variant and repeats its lines: each shown once, then counted in one line
    shown = console.count('Exact Matching mode, will not do GPT-based answer matching')
    assert shown <= 2, shown
    print(f'\n[figures] -RC console: the kit\'s "Exact Matching mode" line shown {shown} time(s)')
    assert shown == 0 or re.search(r'\[AI2D_MINI-RC\] the kit said this \d+ times \(once shown\): Exact Matching mode',
                                   console), console[-3000:]
    assert loopback.count(r'key=') == 4 * 7                 # every MCQ reference and distorted row was asked
    assert loopback.count(r'vqa item=[01]') == 3 * 2         # VQA items 0, 1: once per row
    items = [r for r in loopback.log if PROBE_PROMPT not in r.prompt]
    assert all(r.n_images == 1 for r in items)              # only the model was asked, never a judge
    assert all(len(r.parts) == 2 for r in items)            # the base dataset's prompt: one image + its text
    assert any('Answer the question using a single word' in r.prompt for r in loopback.log)  # TextVQA's prompt
    assert (lmu / 'TextVQA_VAL.tsv').read_bytes() == textvqa_md5    # the kit never downloaded over the copy

    out = tmp_path / 'out' / 'LoopbackGPT'
    mcq = json.loads(next(out.rglob('*AI2D_MINI-RC_score.json')).read_text())
    assert mcq['judge']['name'] == 'exact_matching' and 'no judge API' in mcq['judge']['mode']
    assert 'default without --judge' in mcq['judge']['mode']
    assert mcq['base_rows'].startswith("the kit's build_dataset('AI2D_MINI')")
    manifest = json.loads(next(out.rglob('*AI2D_MINI-RC_manifest.json')).read_text())
    assert manifest['judge']['model'] == 'exact_matching'
    # reference rows: items 0-2 right; item 3 names no option: wrong by the kit's exact matching, not a failure
    assert mcq['per_variant']['ref'] == {'kit_metric': 0.75, 'mean': 0.75, 'scored': 4, 'empty': 0, 'failed': 0}
    assert mcq['failures']['ref'] == {'inference_failed': 0, 'not_scored': 0, 'missing_row': 0}
    assert mcq['per_variant']['d26_s1']['mean'] == 0.75 and mcq['per_variant']['d26_s3']['mean'] == 0.25
    assert mcq['per_variant']['d05_s3']['mean'] == 0.25 and mcq['per_variant']['d03_s1']['mean'] == 0.25
    absolute, relative = mcq['absolute'], mcq['relative']
    assert absolute['Overall'] == pytest.approx(10 / 24)
    assert absolute['low'] == pytest.approx(7 / 12) and absolute['high'] == 0.25 and absolute['mid'] is None
    assert absolute['Environment'] == 0.25 and absolute['Wild'] == 0.25
    assert absolute['Camera'] == 0.5 and absolute['Luminance'] == 0.5
    assert relative['Overall'] == 0.25 and relative['low'] == 0.5
    assert relative['high'] == 0.0 and relative['Environment'] == 0.0 and relative['Blur'] == 0.375
    assert mcq['reference']['Overall'] == 0.75 and mcq['pairs_excluded_from_relative'] == 0
    assert mcq['task'] == 'MCQ' and mcq['relative_mode'].startswith('distorted row right')
    assert mcq['approximations'].startswith('Distortions 3 are synthetic approximations')
    report = next(out.rglob('*AI2D_MINI-RC_robustness.md')).read_text()
    assert '| relative | 0.5000 | - | 0.0000 | 0.2500 |' in report and 'Distortions 3 are synthetic' in report
    assert 'Judge: exact_matching' in report
    assert next(out.rglob('*AI2D_MINI-RC_radar.png')).stat().st_size > 10_000

    vqa = json.loads(next(out.rglob('*TextVQA_VAL-RC_score.json')).read_text())
    assert vqa['task'] == 'VQA' and vqa['relative_mode'].startswith('consistency')
    assert vqa['judge']['name'] == 'none'
    assert 'loaded by the kit\'s ImageVQADataset' in vqa['base_rows'] and 'not the kit\'s' in vqa['base_rows']
    # item 2 gave no answer on clean-looking images (the kit's failure value): counted, never scored
    assert vqa['failures']['ref'] == {'inference_failed': 1, 'not_scored': 0, 'missing_row': 0}
    assert vqa['per_variant']['ref']['kit_metric'] == pytest.approx(95.0)   # the kit's own VQA score (x100)
    assert vqa['per_variant']['ref']['mean'] == pytest.approx(0.95)
    assert vqa['per_variant']['d26_s3']['mean'] == pytest.approx(2 / 3)
    assert vqa['absolute']['Overall'] == pytest.approx(3.9 / 5)
    # consistency: item 1 'kitty' -> 'cat' scores 1.0 absolute but 0 consistency (the answer changed)
    assert vqa['relative']['Overall'] == pytest.approx(1.9 / 4)
    assert vqa['relative']['low'] == pytest.approx(0.95) and vqa['relative']['high'] == 0.0
    assert vqa['relative']['Receive'] == pytest.approx(1.9 / 4) and vqa['approximations'] is None
    assert vqa['failed_rows'] == 2 and vqa['empty_rows'] == 0
    rows = pd.read_csv(next(out.rglob('*TextVQA_VAL-RC_rc_scores.csv')))
    high = rows[rows['strength'] == 3].set_index('pair_id')
    assert high.loc[1, 'score_dis'] == 1.0 and high.loc[1, 'score_com'] == 0.0 and np.isnan(high.loc[2, 'score_ref'])


def test_empty_answers_are_scored_by_the_base_rule_and_only_kit_failures_are_excluded(tmp_path, kit_env):
    """`vlmeval-ext eval` of an AI2D_MINI-RC predictions file in the kit's format: an empty or blank answer goes
    to the kit's MCQ scoring (wrong) and is counted `empty`; the kit's failure value is counted and excluded."""
    lmu = tmp_path / 'LMUData'
    mcq_tsv().to_csv(lmu / 'AI2D_MINI.tsv', sep='\t', index=False)
    rc = build_rc_frame(mcq_tsv(), [16], [1], progress=False)
    from vlmeval_ext.io import write_kit_tsv
    write_kit_tsv(rc, lmu / 'AI2D_MINI-RC.tsv')
    pred = rc.drop(columns=['image'])
    pred['prediction'] = ['A', '', 'C', 'Failed to obtain answer via API.',     # reference rows (keys A B C D)
                          'A', 'B', '  ', 'D']                                  # d16_s1 rows
    pred_file = tmp_path / 'M' / 'M_AI2D_MINI-RC.xlsx'
    pred_file.parent.mkdir()
    pred.to_excel(pred_file, index=False)
    proc = run_kit(['eval', '--data', 'AI2D_MINI-RC', '--pred', pred_file], env=kit_env, entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stderr[-3000:]
    score = json.loads((tmp_path / 'M' / 'M_AI2D_MINI-RC_score.json').read_text())
    assert score['per_variant']['ref'] == {'kit_metric': pytest.approx(2 / 3), 'mean': pytest.approx(2 / 3),
                                           'scored': 3, 'empty': 1, 'failed': 1}
    assert score['failures']['ref'] == {'inference_failed': 1, 'not_scored': 0, 'missing_row': 0}
    assert score['per_variant']['d16_s1'] == {'kit_metric': 0.75, 'mean': 0.75, 'scored': 4, 'empty': 1,
                                              'failed': 0}
    assert score['empty_rows'] == 2 and score['failed_rows'] == 1
    # item 3's pair has no reference score: excluded from relative, counted
    assert score['pairs_excluded_from_relative'] == 1 and score['relative']['Overall'] == pytest.approx(1 / 3)
    report = (tmp_path / 'M' / 'M_AI2D_MINI-RC_robustness.md').read_text()
    assert '| ref | 0.6667 | 0.6667 | 3 | 1 | 1 |' in report and 'Empty answers are answers' in report


def test_rc_of_a_dataset_with_image_path_sends_each_distorted_image(tmp_path, loopback, kit_env):
    """A base TSV with an `image_path` column (one file name per row, as many kit TSVs have): the kit writes a
    row's image under that name and reuses an existing file, so every variant row needs its own name; the model
    must receive a different picture for each distortion, never the reference's."""
    lmu = tmp_path / 'LMUData'
    base = mcq_tsv(2)
    base['image_path'] = [f'item{k}.jpg' for k in range(len(base))]
    base.to_csv(lmu / 'AI2D_MINI.tsv', sep='\t', index=False)
    proc = run_kit(['corrupt', '--data', 'AI2D_MINI', '--distortions', '5,26', '--strengths', '3'],
                   env=kit_env, entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rc = pd.read_csv(lmu / 'AI2D_MINI-RC.tsv', sep='\t', dtype=str)
    assert rc['image_path'].is_unique, rc['image_path'].tolist()
    from vlmeval_ext.launcher import PROBE_PROMPT
    loopback.script(re.escape(PROBE_PROMPT), 'OK')
    loopback.default = 'A'
    cfg = loopback_model_config(loopback, {'AI2D_MINI-RC': {'class': 'CorruptedDataset',
                                                            'dataset': 'AI2D_MINI-RC'}}, wait=0)
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '2',
                    '--mode', 'infer'], env=kit_env, timeout=240)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    asked = [r for r in loopback.log if PROBE_PROMPT not in r.prompt]
    assert len(asked) == 2 * 3                                   # reference + 2 distortions per item
    for item in range(2):
        seen = [r.image_hashes[0] for r in asked if f'item={item}' in r.prompt]
        assert len(seen) == 3 and len(set(seen)) == 3, seen     # three different pictures


def test_rc_evaluated_again_asks_the_judge_nothing(tmp_path, loopback, kit_env):
    """AI2D_MINI-RC with an API judge (the kit's MCQ evaluation asks it for replies that name no option), then the
    same predictions evaluated again (`--mode eval`): the kit's own judge results are reused, no call is made."""
    lmu = tmp_path / 'LMUData'
    mcq_tsv().to_csv(lmu / 'AI2D_MINI.tsv', sep='\t', index=False)
    proc = run_kit(['corrupt', '--data', 'AI2D_MINI', '--distortions', '26', '--strengths', '3'], env=kit_env,
                   entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stderr[-3000:]
    from vlmeval_ext.launcher import PROBE_PROMPT
    loopback.script(re.escape(PROBE_PROMPT), 'OK')
    loopback.script('Reply with the single word: ready', 'ready')
    loopback.default = lambda body: ('A' if 'key=' not in json.dumps(body) else scripted_model(body))
    cfg = loopback_model_config(loopback, {'AI2D_MINI-RC': {'class': 'CorruptedDataset',
                                                            'dataset': 'AI2D_MINI-RC'}}, wait=0)
    config = write_config(tmp_path, cfg)
    argv = ['--config', config, '--work-dir', tmp_path / 'out', '--api-nproc', '4', '--judge', 'loopback-judge']
    proc = run_kit(argv, env=kit_env, timeout=300)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    def verdicts(log):       # the kit's judge checks itself with 'hello' before it works: not a verdict
        return [r for r in log if r.n_images == 0 and r.prompt not in ('hello', PROBE_PROMPT)
                and 'ready' not in r.prompt]
    judged = verdicts(loopback.log)
    assert judged, 'the kit never asked its judge: the test does not test anything'
    loopback.reset_log()
    again = run_kit([*argv, '--mode', 'eval'], env=kit_env, timeout=300)
    assert again.returncode == 0, (again.stdout[-3000:], again.stderr[-3000:])
    asked = verdicts(loopback.log)
    assert asked == [], [r.prompt[:80] for r in asked]
