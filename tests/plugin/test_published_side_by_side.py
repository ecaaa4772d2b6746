"""Side-by-side report (ours vs paper) on score files whose numbers are known. Pure: no kit import."""
import csv
import json
from collections import defaultdict

import pytest

from vlmeval_ext.records.published import load_published, side_by_side_for_run
from vlmeval_ext.spec import load_spec

GPT4O_ABSOLUTE = [0.8176, 0.7744, 0.7391, 0.7184, 0.7291, 0.6898, 0.4235, 0.4200, 0.3997, 0.6348]
CELLS = ['MCQ-low', 'MCQ-mid', 'MCQ-high', 'VQA-low', 'VQA-mid', 'VQA-high', 'CAP-low', 'CAP-mid', 'CAP-high',
         'Overall']


# What a complete run records beside its numbers (compare_run checks it against the paper's protocol).
RBENCH_FULL_RUN = {'counts': {'items': 1485, 'scored': 1485},
                   'judge': {'name': 'chatgpt-0125', 'mode': 'official', 'endpoint_host': 'api.openai.com'}}
GRAB_FULL_RUN = {'counts': {'items': 2170, 'scored': 2170}, 'judge': None}


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def test_rbench_cells_judged_by_rounding_and_judge_noise_not_by_a_sampling_interval(tmp_path, capsys):
    """On the paper's own items the gap is judge or protocol, not item sampling: a cell is reproduced when it lies
    within the published rounding plus twice the judge noise the run measured, whatever our 95 % interval says."""
    offsets = [0.0, 0.01, -0.02, 0.0, 0.05, 0.0, 0.0, -0.029, 0.0, 0.001]
    absolute = {c: round(p + o, 4) for c, p, o in zip(CELLS, GPT4O_ABSOLUTE, offsets)}
    absolute.update({'MCQ': 0.77, 'low': 0.6})          # extra dimensions are ignored by the Table 3 layout
    noise = {c: 0.0 for c in CELLS}
    noise['MCQ-mid'] = 0.006                             # +0.01 within 2 x 0.006 of judge noise
    wide = {c: [v - 0.1, v + 0.1] for c, v in absolute.items()}     # a wide interval holds every paper number
    score = _write(tmp_path / 'GPT4o' / 'GPT4o_R-Bench-Full_score.json',
                   {'absolute': absolute, 'relative': {c: None for c in CELLS}, 'items': 1485,
                    'ci95': {'absolute': wide}, 'judge_noise': {'absolute': noise}, **RBENCH_FULL_RUN})
    df = side_by_side_for_run('R-Bench-Full', 'GPT4o', score)
    assert df is not None
    abs_rows = df[df.table == 'absolute'].set_index('column')
    assert list(abs_rows.index) == ['MCQ low', 'MCQ mid', 'MCQ high', 'VQA low', 'VQA mid', 'VQA high', 'CAP low',
                                    'CAP mid', 'CAP high', 'Overall']
    assert abs_rows['diff'].tolist() == pytest.approx(offsets, abs=1e-9)
    assert abs_rows.index[abs_rows.flag].tolist() == ['MCQ high', 'VQA mid', 'CAP mid', 'Overall']
    assert abs_rows.loc['MCQ mid', 'verdict'] == 'reproduced within 0.01205'
    assert abs_rows.loc['MCQ low', 'verdict'] == 'reproduced within 5e-05'
    assert abs_rows.loc['VQA mid', 'verdict'] == 'differs by +0.05: judge or protocol'
    assert abs_rows.loc['Overall', 'allowed'] == pytest.approx(5e-05)
    # relative: our run has no relative numbers -> shown, not compared, not flagged
    rel_rows = df[df.table == 'relative']
    assert rel_rows['ours'].isna().all() and not rel_rows.flag.any() and (rel_rows.paper_row == 'GPT4o').all()
    with open(tmp_path / 'GPT4o' / 'GPT4o_R-Bench-Full_vs_paper.csv', encoding='utf-8') as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 20 and sum(r['flag'] == 'True' for r in rows) == 4
    assert 'ci95_low' not in rows[0] and 'verdict' in rows[0]
    md = (tmp_path / 'GPT4o' / 'GPT4o_R-Bench-Full_vs_paper.md').read_text()
    assert '**+0.0500 !**' in md and '| paper (GPT4o) | 0.8176 |' in md and 'interval' not in md
    assert '| judge noise (sd) | 0.0000 | 0.0060 |' in md
    assert 'Reproduced in 6 of 10 compared cells; 4 differ beyond the rounding and the measured judge noise' in md
    assert 'Model correspondence is assumed' in md
    assert 'Items scored: 1485 of 1485 in the predictions file; the paper: 1485.' in md
    assert 'Judge: chatgpt-0125, official mode; the paper: GPT-3.5-turbo, official mode.' in md
    assert "Comparable: the paper's items, judge and input mode." in md
    assert 'Reproduced in 6 of 10' in capsys.readouterr().out


def test_rbench_llava_run_from_official_verdicts_agrees_with_the_notebook(tmp_path, fixtures_dir):
    """A run whose scores are known: the official GPT-3.5 verdicts for LLaVA-1.5 aggregated per dimension."""
    spec = load_spec('rbench')
    step_of = {d['id']: d['step'] for d in spec['distortions']}
    group_of = {d['id']: d['group'] for d in spec['distortions']}
    strength = {int(k): v for k, v in spec['strengths'].items()}
    groups = defaultdict(list)
    with open(fixtures_dir / 'rbench' / 'Result_dis_llava15.csv', encoding='utf-8') as f:
        for rec in csv.DictReader(f):
            d, s, v = int(rec['distortion']), int(rec['strength']), float(rec['result'])
            for dim in ('Overall', rec['type'], strength[s], step_of[d], group_of[d], f'{rec["type"]}-{strength[s]}'):
                groups[dim].append(v)
    absolute = {dim: sum(vs) / len(vs) for dim, vs in groups.items()}
    score = _write(tmp_path / 'llava_v1.5_7b' / 'llava_v1.5_7b_R-Bench-Full_score.json',
                   {'absolute': absolute, **RBENCH_FULL_RUN})
    df = side_by_side_for_run('R-Bench-Full', 'llava_v1.5_7b', score, verbose=False)
    dims = df[df.table == 'llava15_absolute_by_dimension']
    assert len(dims) == 20 and dims['ours'].notna().all()
    assert dims['diff'].abs().max() < 6e-5 and not dims.flag.any()
    # the relative notebook row has no counterpart in this run
    assert df[df.table == 'llava15_relative_by_dimension']['ours'].isna().all()


def test_grab_flags_and_unverified_rows(tmp_path):
    score = _write(tmp_path / 'GPT4o' / 'GPT4o_GRAB_score.json',
                   {'official': {'Overall': 16.0, 'task': {'properties': 24.0, 'function': 10.8, 'series': 12.0,
                                                          'transform': 3.5}},
                    'normalized': {'Overall': 30.0, 'task': {}}, **GRAB_FULL_RUN})
    df = side_by_side_for_run('GRAB', 'GPT4o', score, verbose=False)
    by_col = df.set_index('column')
    # rule-scored: no judge noise, the published rounding (one decimal: +/-0.05) is the whole allowance
    assert by_col.loc['Properties', 'diff'] == pytest.approx(-0.7) and by_col.loc['Properties', 'flag']
    assert by_col.loc['Series', 'diff'] == pytest.approx(2.8) and by_col.loc['Series', 'flag']
    assert by_col.loc['Series', 'verdict'] == 'differs by +2.8: model outputs or protocol'
    assert by_col.loc['Overall', 'diff'] == pytest.approx(2.4) and by_col.loc['Overall', 'flag']
    assert not by_col.loc['Overall', 'verified_by_us'] and by_col.loc['Series', 'verified_by_us']
    md = (tmp_path / 'GPT4o' / 'GPT4o_GRAB_vs_paper.md').read_text()
    assert 'Not verified by us' in md and 'differ beyond the rounding' in md


def test_no_report_when_the_model_or_split_has_no_published_row(tmp_path):
    score = _write(tmp_path / 'Unknown' / 'Unknown_GRAB_score.json', {'official': {'Overall': 1.0, 'task': {}}})
    assert side_by_side_for_run('GRAB', 'Unknown', score) is None
    demo = _write(tmp_path / 'GPT4o' / 'GPT4o_GRAB_DEMO_score.json', {'official': {'Overall': 1.0, 'task': {}}})
    assert side_by_side_for_run('GRAB_DEMO', 'GPT4o', demo) is None       # demo split: not the paper's split
    assert side_by_side_for_run('SomeOtherDataset', 'GPT4o', demo) is None
    assert not list(tmp_path.rglob('*_vs_paper.*'))


def test_rococo_clean_recall_compared_attack_not(tmp_path):
    # the layout RoCOCORetrieval.evaluate writes: the recalls under `metrics`, the image count at the top
    clean = _write(tmp_path / 'clip' / 'clip_RoCOCO-I2T-clean_score.json',
                   {'n_images': 5000, 'metrics': {'R@1': 50.3, 'R@5': 74.0, 'R@10': 83.04, 'R_mean': 69.1,
                                                  'false_rate': 0.0}})
    df = side_by_side_for_run('RoCOCO-I2T-clean', 'open_clip:ViT-B-32/openai', clean, verbose=False)
    by_col = df.set_index('column')
    assert by_col.loc['R@1', 'diff'] == pytest.approx(0.18) and by_col.loc['R@1', 'flag']      # > rounding 0.005
    assert by_col.loc['R@5', 'flag'] and by_col.loc['R@1', 'rounding'] == pytest.approx(0.005)
    exact = _write(tmp_path / 'clip2' / 'clip_RoCOCO-I2T-clean_score.json',
                   {'n_images': 5000, 'metrics': {'R@1': 50.123, 'R@5': 74.66}})
    by_col = side_by_side_for_run('RoCOCO-I2T-clean', 'open_clip:ViT-B-32/openai', exact,
                                  verbose=False).set_index('column')
    assert not by_col.loc['R@1', 'flag'] and by_col.loc['R@1', 'verdict'] == 'reproduced within 0.005'
    assert not by_col.loc['R@5', 'flag']
    # the published 'after' numbers of BLIP are never compared, even on an attack file
    attack = _write(tmp_path / 'blip' / 'blip_RoCOCO-I2T-danger_score.json', {'n_images': 5000,
                                                                              'metrics': {'R@1': 40.0}})
    assert side_by_side_for_run('RoCOCO-I2T-danger', 'hf-blip:Salesforce/blip-itm-base-coco', attack) is None
    blip_clean = _write(tmp_path / 'blip' / 'blip_RoCOCO-I2T-clean_score.json', {'n_images': 5000,
                                                                                 'metrics': {'R@1': 75.0}})
    df = side_by_side_for_run('RoCOCO-I2T-clean', 'hf-blip:Salesforce/blip-itm-base-coco', blip_clean, verbose=False)
    altered = df[df.column == 'R@1 altered']
    assert len(altered) == 2 and altered['ours'].isna().all() and not altered.flag.any()
    assert set(df[df.column == 'R@1 original']['paper']) == {81.9}
    # ITC ranking vs the paper's ITM re-ranked BLIP: shown with its difference, never judged
    original = df[df.column == 'R@1 original']
    assert original['diff'].tolist() == pytest.approx([-6.9, -6.9]) and not original.flag.any()
    assert not original['comparable'].any() and original['not_comparable_why'].str.contains('ITM').all()


def test_malformed_score_json_is_a_clear_error(tmp_path):
    bad = tmp_path / 'GPT4o' / 'GPT4o_GRAB_score.json'
    bad.parent.mkdir()
    bad.write_text('{"official": ')
    with pytest.raises(ValueError, match='GPT4o_GRAB_score.json: not valid JSON'):
        side_by_side_for_run('GRAB', 'GPT4o', bad)
    wrong = _write(tmp_path / 'GPT4o' / 'GPT4o_GRAB_score.json', {'official': {'Overall': 'high', 'task': {}}})
    with pytest.raises(ValueError, match=r"official\.Overall holds 'high'"):
        side_by_side_for_run('GRAB', 'GPT4o', wrong)
    assert load_published('grab').model_map['GPT4o']['row'] == 'GPT-4o'


def test_rbench_task_subset_compares_only_that_tasks_cells(tmp_path):
    # An MCQ-only run: its Overall is the MCQ mean, not the paper's three-task Overall -> not compared.
    score = _write(tmp_path / 'InternVL2-8B' / 'InternVL2-8B_R-Bench-Full-MCQ_score.json',
                   {'absolute': {'MCQ-low': 0.7118, 'MCQ-mid': 0.66, 'MCQ-high': 0.6280, 'Overall': 0.66,
                                 'MCQ': 0.66, 'low': 0.70}, **RBENCH_FULL_RUN, 'counts': {'items': 495, 'scored': 495}})
    df = side_by_side_for_run('R-Bench-Full-MCQ', 'InternVL2-8B', score, verbose=False)
    absolute = df[df.table == 'absolute'].set_index('column')
    assert absolute['ours'].notna().tolist() == [True] * 3 + [False] * 7
    assert absolute.index[absolute.flag].tolist() == ['MCQ mid']            # 0.66 vs 0.7019
    assert df[df.table == 'absolute']['paper_row'].eq('InternVL2').all()
