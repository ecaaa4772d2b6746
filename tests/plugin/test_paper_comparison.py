"""Paper comparisons say what they compare: items scored vs the paper's, the judge vs the paper's, the input mode;
a run on a subset, with another judge or another input mode is "not comparable: <why>" with no verdicts.
Plus the published rows that map the names users run (RoCOCO) and what ReMI has on file."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from vlmeval_ext.records.leaderboard import write_leaderboard
from vlmeval_ext.records.published import compare_run, load_published, map_model, side_by_side_for_run

GPT4O_ABSOLUTE = [0.8176, 0.7744, 0.7391, 0.7184, 0.7291, 0.6898, 0.4235, 0.4200, 0.3997, 0.6348]
CELLS = ['MCQ-low', 'MCQ-mid', 'MCQ-high', 'VQA-low', 'VQA-mid', 'VQA-high', 'CAP-low', 'CAP-mid', 'CAP-high',
         'Overall']


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def test_a_limit_run_of_grab_through_evaluate_is_not_compared(tmp_path, monkeypatch, fixtures_dir):
    """20 predictions (as `--limit 20` leaves): the side-by-side names 20 of 2,170 and flags nothing."""
    import vlmeval.dataset  # noqa: F401  (the kit, loaded as run.py loads it)

    from vlmeval_ext.datasets import GRAB
    monkeypatch.setenv('LMUData', str(tmp_path / 'LMUData'))
    (tmp_path / 'LMUData').mkdir()
    questions = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text(encoding='utf-8'))
    rows = [{'index': int(k), 'pid': q['pid'], 'question': q['question'], 'answer': str(q['answer']),
             'task': q['task'], 'category': q['category'], 'complexity': q['complexity'],
             'prediction': str(q['answer']) if i % 2 else '0'} for i, (k, q) in enumerate(list(questions.items())[:20])]
    pred = tmp_path / 'GPT4o' / 'GPT4o_GRAB.tsv'
    pred.parent.mkdir()
    pd.DataFrame(rows).to_csv(pred, sep='\t', index=False)
    GRAB.for_predictions('GRAB', pred).evaluate(str(pred))
    from vlmeval_ext.records.run_records import write_run_records   # the named step the launcher and `eval` run next
    write_run_records('GRAB', pred)
    md = (tmp_path / 'GPT4o' / 'GPT4o_GRAB_vs_paper.md').read_text()
    assert "Items scored: 20 of 20 in the predictions file; the paper: 2170." in md
    assert "**Not comparable: a subset: 20 of the paper's 2170 items (e.g. --limit).**" in md
    assert 'Judge: none needed by the compared scores (rule-based, as in the paper); this run used none.' in md
    assert '!' not in md.split('# GRAB', 1)[1].replace('**Not comparable', '') and 'number is outside our 95 % interval' not in md
    assert 'no verdicts' in md
    csv = pd.read_csv(tmp_path / 'GPT4o' / 'GPT4o_GRAB_vs_paper.csv')
    assert not csv['flag'].any() and csv['diff'].notna().any() and not csv['comparable'].any()
    assert set(csv['items_scored']) == {20} and set(csv['paper_items']) == {2170}


@pytest.mark.parametrize('judge, why', [
    ({'name': 'offline', 'mode': 'offline'},
     "judged by offline (an offline approximation), not the paper's GPT-3.5-turbo"),
    ({'name': 'gpt-4o-mini', 'mode': 'official'}, "judged by gpt-4o-mini, not the paper's GPT-3.5-turbo"),
    (None, 'the score file does not name its judge'),
])
def test_rbench_with_another_judge_is_not_compared(tmp_path, judge, why):
    absolute = {c: round(p + 0.1, 4) for c, p in zip(CELLS, GPT4O_ABSOLUTE)}     # every cell 0.1 off
    score = _write(tmp_path / 'GPT4o' / 'GPT4o_R-Bench-Full_score.json',
                   {'absolute': absolute, 'relative': {}, 'counts': {'items': 1485, 'scored': 1485},
                    **({'judge': judge} if judge else {})})
    df = side_by_side_for_run('R-Bench-Full', 'GPT4o', score, verbose=False)
    assert not df['flag'].any() and (df['not_comparable_why'] == why).all()
    md = (tmp_path / 'GPT4o' / 'GPT4o_R-Bench-Full_vs_paper.md').read_text()
    assert f'**Not comparable: {why}.**' in md and 'the paper: GPT-3.5-turbo, official mode.' in md
    if judge:
        assert f'Judge: {judge["name"]}, {judge["mode"]} mode;' in md


def test_rbench_with_the_papers_judge_and_all_items_is_compared(tmp_path):
    absolute = {c: round(p + 0.1, 4) for c, p in zip(CELLS, GPT4O_ABSOLUTE)}
    score = _write(tmp_path / 'GPT4o' / 'GPT4o_R-Bench-Full_score.json',
                   {'absolute': absolute, 'relative': {}, 'counts': {'items': 1485, 'scored': 1480},
                    'judge': {'name': 'chatgpt-0125', 'mode': 'efficient'}})
    df = side_by_side_for_run('R-Bench-Full', 'GPT4o', score, verbose=False)
    # 5 items failed (excluded from the means): not the paper's item set until a rerun fills them
    assert not df['flag'].any()
    assert df['not_comparable_why'].iloc[0].startswith('5 item(s) not scored (inference or judge failures')
    score = _write(score, {**json.loads(score.read_text()), 'counts': {'items': 1485, 'scored': 1485}})
    df = side_by_side_for_run('R-Bench-Full', 'GPT4o', score, verbose=False)
    assert df['comparable'].all() and df[df.table == 'absolute']['flag'].all()     # 0.1 beyond the rounding
    md = (tmp_path / 'GPT4o' / 'GPT4o_R-Bench-Full_vs_paper.md').read_text()
    assert 'Judge: chatgpt-0125, efficient mode; the paper: GPT-3.5-turbo, official mode.' in md


def test_remi_input_mode_is_compared_and_named(tmp_path):
    pub = load_published('remi')
    full = {'counts': {'items': 2600, 'scored': 2600}, 'accuracy': {'Overall': 40.0}}
    assert compare_run(pub, {**full, 'input_mode': 'interleaved'}, 'ReMI').comparable
    composite = compare_run(pub, {**full, 'input_mode': 'composite'}, 'ReMI_composite')
    assert composite.reasons == ["input mode composite, not the paper's interleaved"]
    assert 'Input mode: composite; the paper: interleaved.' in composite.facts
    # the leaderboard of the composite split keeps the paper's rows and marks our run
    work = tmp_path / 'w'
    _write(work / 'M' / 'M_ReMI_composite_score.json', {**full, 'input_mode': 'composite'})
    md = write_leaderboard('ReMI_composite', work, tmp_path / 'lb', plot=False)['markdown'].read_text()
    assert "| M | ours | - | 2600/2600 | 40.0 | not comparable: input mode composite, not the paper's interleaved |" \
        in md and '| Human | paper |' in md


def test_rococo_names_users_run_map_to_published_rows(tmp_path):
    pub = load_published('rococo')
    assert map_model(pub, 'RoCOCO-CLIP-B32')['row'] == 'CLIP ViT-B/32'
    assert map_model(pub, 'RoCOCO-CLIP-B32')['correspondence'] == 'assumed'
    assert map_model(pub, 'RoCOCO-OpenCLIP-B32')['row'] == 'CLIP ViT-B/32'
    blip = map_model(pub, 'RoCOCO-BLIP-ITC')
    assert blip['row'] == 'BLIP' and blip['comparable'] is False and 'ITM' in blip['why']
    assert map_model(pub, 'RoCOCO-CLIP-L14') is None                  # no published ViT-L/14 number on file
    # a clean-file run of the registered model name is compared with the official repo's log
    score = _write(tmp_path / 'RoCOCO-CLIP-B32' / 'RoCOCO-CLIP-B32_RoCOCO-I2T-clean_score.json',
                   {'dataset': 'RoCOCO-I2T-clean', 'direction': 'i2t', 'n_images': 5000, 'n_texts': 25010,
                    'metrics': {'R@1': 50.0, 'R@5': 74.7, 'R@10': 83.0, 'R_mean': 69.2, 'false_rate': 0.0}})
    df = side_by_side_for_run('RoCOCO-I2T-clean', 'RoCOCO-CLIP-B32', score, verbose=False)
    clip = df[df.table == 'clip_repo_clean'].set_index('column')
    assert clip['diff'].tolist() == pytest.approx([-0.12, 0.04, -0.04]) and clip['comparable'].all()
    md = (tmp_path / 'RoCOCO-CLIP-B32' / 'RoCOCO-CLIP-B32_RoCOCO-I2T-clean_vs_paper.md').read_text()
    assert 'Items scored: 5000 of 5000 in the predictions file; the paper: 5000.' in md


def test_remi_has_no_model_rows_without_a_primary_source():
    pub = load_published('remi')
    assert [r.model for t in pub.tables for r in t.rows] == ['Human'] and pub.model_map == {}
    assert any('primary source' in u['why'] for u in pub.unverified)
