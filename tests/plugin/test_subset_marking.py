"""A dataset prepared from a partial source (`prepare GRAB --allow-subset`) is marked as a subset everywhere it
appears: `list`, the score file, `summary`, the leaderboard (not ranked against the paper, listed apart with the
reason) and the report."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from PIL import Image

from helpers.kit_run import kit_environment, run_kit

PIDS = (0, 570, 480)


def _cli(args, env):
    proc = run_kit(list(map(str, args)), env, entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


def test_a_subset_is_marked_in_list_score_summary_leaderboard_and_report(tmp_path, fixtures_dir):
    records = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text(encoding='utf-8'))
    src = tmp_path / 'src'
    (src / 'images').mkdir(parents=True)
    (src / 'grab.json').write_text(json.dumps({str(i): records[str(p)] for i, p in enumerate(PIDS)}))
    for pid in PIDS:
        Image.new('RGB', (64, 48), (pid % 255, 0, 0)).save(src / records[str(pid)]['image'])
    env = kit_environment(tmp_path)
    _cli(['prepare', 'GRAB', '--from', src, '--allow-subset'], env)

    listed = _cli(['list'], env).stdout
    row = next(line for line in listed.splitlines() if line.split()[:1] == ['GRAB'])
    assert 'subset: 3 of 2,170 items' in row, row

    tsv = pd.read_csv(Path(env['LMUData']) / 'GRAB.tsv', sep='\t', dtype=str, keep_default_na=False)
    preds = tsv.drop(columns=['image']).assign(prediction=tsv['answer'])
    folder = tmp_path / 'work' / 'MyVLM'
    folder.mkdir(parents=True)
    preds.to_csv(folder / 'MyVLM_GRAB.tsv', sep='\t', index=False)
    _cli(['eval', '--data', 'GRAB', '--pred', folder / 'MyVLM_GRAB.tsv'], env)
    score = json.loads((folder / 'MyVLM_GRAB_score.json').read_text())
    assert any('subset: 3 of 2,170 items' in n for n in score['notes']), score['notes']

    summary = _cli(['summary', tmp_path / 'work'], env).stdout
    assert 'subset' in summary, summary

    board = _cli(['leaderboard', '--data', 'GRAB', '--work-dir', tmp_path / 'work'], env)
    frame = pd.read_csv(tmp_path / 'work' / 'leaderboard_GRAB.csv')
    ours = frame[frame.kind == 'ours'].iloc[0]
    assert not ours['comparable'] and pd.isna(ours['rank']), ours.to_dict()
    ranked = frame[frame.kind == 'paper']['rank']
    assert ranked.notna().all() and sorted(ranked) == list(range(1, len(ranked) + 1))   # ours takes no rank
    md = (tmp_path / 'work' / 'leaderboard_GRAB.md').read_text()
    assert 'not ranked' in md and 'subset' in md, md
    assert board.returncode == 0

    _cli(['report', tmp_path / 'work'], env)
    assert 'subset: 3 of 2,170 items' in (tmp_path / 'work' / 'report.html').read_text(encoding='utf-8')
