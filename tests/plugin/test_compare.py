"""`vlmeval-ext compare`: paired differences between two evaluated runs of the same items, with the exact McNemar
test for 0/1 scores, a permutation test otherwise, and refusals when the runs are not of the same items."""
from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from vlmeval_ext.cli.main import main as cli_main
from vlmeval_ext.registry import benchmark_of


def evaluated(tmp_path, name, dataset, predictions, *extra):
    """A predictions file of the demo split, evaluated by `vlmeval-ext eval` (score, items and manifest files)."""
    folder = tmp_path / name
    folder.mkdir()
    data = pd.read_csv(benchmark_of(dataset).demo_file(dataset), sep='\t', dtype=str, keep_default_na=False)
    data = data.drop(columns=['image'])
    data['prediction'] = predictions(data)
    path = folder / f'{name}_{dataset}.tsv'
    data.to_csv(path, sep='\t', index=False)
    with pytest.raises(SystemExit) as done:
        cli_main(['eval', '--data', dataset, '--pred', str(path), *extra])
    assert done.value.code == 0
    return path


def run_compare(a, b, dataset, out, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        cli_main(['compare', str(a), str(b), '--data', dataset, '--out', str(out)])
    return done.value.code, capsys.readouterr()


def test_a_run_compared_with_itself_differs_by_nothing(tmp_path, capsys, lmu):
    a = evaluated(tmp_path, 'A', 'GRAB_DEMO', lambda d: d['answer'])
    b = evaluated(tmp_path, 'B', 'GRAB_DEMO', lambda d: d['answer'])
    code, out = run_compare(a, b.parent, 'GRAB_DEMO', tmp_path, capsys)        # B as a work dir
    assert code == 0, out.err
    result = json.loads((tmp_path / 'A_GRAB_DEMO_vs_B_GRAB_DEMO_compare.json').read_text())
    official = result['scores']['official Overall']
    assert official['difference'] == 0 and official['p_value'] == 1.0 and official['ci95'] == [0, 0]
    assert (official['right_to_wrong'], official['wrong_to_right'], official['n_matched']) == (0, 0, 41)
    assert official['test'] == 'exact McNemar'
    assert '| official Overall (%) | 100.0 | 100.0 | +0.0 |' in out.out


def test_k_changed_items_give_the_direct_mcnemar_numbers(tmp_path, capsys, lmu):
    worse, better = {1, 4, 9, 16, 25, 30, 33}, {0, 2}

    def a_preds(d):
        return [a if i not in better else 'no idea' for i, a in enumerate(d['answer'])]

    def b_preds(d):
        return [a if i not in worse else 'no idea' for i, a in enumerate(d['answer'])]
    a = evaluated(tmp_path, 'A', 'GRAB_DEMO', a_preds)
    b = evaluated(tmp_path, 'B', 'GRAB_DEMO', b_preds)
    code, out = run_compare(a, b, 'GRAB_DEMO', tmp_path, capsys)
    assert code == 0, out.err
    official = json.loads((tmp_path / 'A_GRAB_DEMO_vs_B_GRAB_DEMO_compare.json').read_text())['scores'][
        'official Overall']
    n = 41
    assert (official['right_to_wrong'], official['wrong_to_right']) == (len(worse), len(better))
    assert official['a'] == pytest.approx(100 * (n - len(better)) / n, abs=0.01)
    assert official['difference'] == pytest.approx(100 * (len(better) - len(worse)) / n, abs=0.01)
    discordant = len(worse) + len(better)
    direct = min(1.0, 2 * sum(math.comb(discordant, i) for i in range(len(better) + 1)) / 2 ** discordant)
    assert official['p_value'] == pytest.approx(direct, abs=1e-6)
    lo, hi = official['ci95']
    assert lo <= official['difference'] <= hi
    assert (lo > 0 or hi < 0) == (official['p_value'] < 0.05)          # the interval agrees with the test
    assert official['ci95_method'].startswith('inverted exact McNemar')
    csv_head = (tmp_path / 'A_GRAB_DEMO_vs_B_GRAB_DEMO_compare.csv').read_text().splitlines()[0]
    assert csv_head.startswith('score,unit,a,b,difference,ci95_low,ci95_high,ci95_method,p_value,test,n_matched')


def test_rbench_also_compares_reference_and_distorted_within_each_run(tmp_path, capsys, lmu):

    def preds(d):
        return [a if v == 'ref' else 'no idea' for a, v in zip(d['answer'], d['variant'])]
    a = evaluated(tmp_path, 'A', 'R-Bench-Full_DEMO', preds, '--judge', 'offline')
    b = evaluated(tmp_path, 'B', 'R-Bench-Full_DEMO', lambda d: d['answer'], '--judge', 'offline')
    code, out = run_compare(a, b, 'R-Bench-Full_DEMO', tmp_path, capsys)
    assert code == 0, out.err
    result = json.loads((tmp_path / 'A_R-Bench-Full_DEMO_vs_B_R-Bench-Full_DEMO_compare.json').read_text())
    absolute = result['scores']['absolute Overall']
    assert absolute['difference'] > 0 and absolute['test'].startswith('paired sign-flip permutation')
    assert absolute['p_value'] < 0.05 and absolute['n_matched'] == 24
    inside = result['reference_vs_distorted']
    assert inside['a']['difference'] < 0 and inside['b']['difference'] == pytest.approx(0, abs=1e-9)
    assert 'Within each run' in out.out


def test_runs_of_different_items_or_files_are_refused(tmp_path, capsys, lmu):
    a = evaluated(tmp_path, 'A', 'GRAB_DEMO', lambda d: d['answer'])
    b = evaluated(tmp_path, 'B', 'GRAB_DEMO', lambda d: d['answer'])
    items = b.with_name('B_GRAB_DEMO_items.tsv')
    pd.read_csv(items, sep='\t', dtype=str).iloc[:-3].to_csv(items, sep='\t', index=False)
    code, out = run_compare(a, b, 'GRAB_DEMO', tmp_path, capsys)
    assert code == 2 and 'score different items (3 only in A, 0 only in B' in out.err
    assert len(out.err.strip().splitlines()) == 1
    manifest = b.with_name('B_GRAB_DEMO_manifest.json')
    record = json.loads(manifest.read_text())
    record['dataset']['tsv_md5'] = '0' * 32
    manifest.write_text(json.dumps(record))
    code, out = run_compare(a, b, 'GRAB_DEMO', tmp_path, capsys)
    assert code == 2 and 'evaluated on different GRAB_DEMO files' in out.err
    code, out = run_compare(a, tmp_path / 'nowhere', 'GRAB_DEMO', tmp_path, capsys)
    assert code == 2 and 'neither a predictions file nor a work dir' in out.err


def test_output_goes_beside_a_and_a_dataset_that_matches_nothing_names_what_is_there(tmp_path, capsys, lmu,
                                                                                     monkeypatch):
    a = evaluated(tmp_path, 'A', 'GRAB_DEMO', lambda d: d['answer'])
    b = evaluated(tmp_path, 'B', 'GRAB_DEMO', lambda d: d['answer'].where(d.index % 4 > 0, '0'))
    here = tmp_path / 'here'
    here.mkdir()
    monkeypatch.chdir(here)
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        cli_main(['compare', str(a.parent), str(b.parent), '--data', 'GRAB_DEMO'])      # no --out
    assert done.value.code == 0
    assert list(here.iterdir()) == []                                              # nothing in the current folder
    written = sorted(p.name for p in a.parent.glob('*_compare.*'))
    assert written == [f'A_GRAB_DEMO_vs_B_GRAB_DEMO_compare.{ext}' for ext in ('csv', 'json', 'md')]
    assert f'written: {a.parent / "A_GRAB_DEMO_vs_B_GRAB_DEMO_compare"}.md' in capsys.readouterr().out
    code, out = run_compare(a.parent, b.parent, 'GRAB', tmp_path, capsys)       # the full split: not in these dirs
    assert code == 2 and len(out.err.strip().splitlines()) == 1
    assert 'no predictions file of GRAB' in out.err and 'it holds predictions of GRAB_DEMO: pass one of them' in out.err
    empty = tmp_path / 'empty'
    empty.mkdir()
    code, out = run_compare(empty, b.parent, 'GRAB', tmp_path, capsys)
    assert code == 2 and 'holds no predictions file of any dataset this plugin knows' in out.err


def test_a_model_name_typed_with_its_slash_finds_the_kits_safe_folder_and_is_shown_as_typed(tmp_path, capsys, lmu):
    a = evaluated(tmp_path, 'Qwen--Tiny-VL', 'GRAB_DEMO', lambda d: d['answer'])
    b = evaluated(tmp_path, 'B', 'GRAB_DEMO', lambda d: d['answer'])
    manifest = a.with_name('Qwen--Tiny-VL_GRAB_DEMO_manifest.json')      # as a run of a served model records it
    record = json.loads(manifest.read_text())
    record['model']['served_name'] = 'Qwen/Tiny-VL'
    manifest.write_text(json.dumps(record))
    code, out = run_compare(tmp_path / 'Qwen' / 'Tiny-VL', b.parent, 'GRAB_DEMO', tmp_path, capsys)
    assert code == 0, out.err
    result = json.loads((tmp_path / 'Qwen--Tiny-VL_GRAB_DEMO_vs_B_GRAB_DEMO_compare.json').read_text())
    assert result['a'] == str(a) and result['models'] == {'a': 'Qwen/Tiny-VL', 'b': 'B'}
    assert '# GRAB_DEMO: B = B vs A = Qwen/Tiny-VL' in out.out                # the safe form only in file names
    from vlmeval_ext.records.summary import main as summary_main
    assert summary_main([str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert '| Qwen/Tiny-VL / GRAB_DEMO |' in table and 'Qwen--Tiny-VL /' not in table
    # the leaderboard and the report name it as typed too
    from vlmeval_ext.records.leaderboard import leaderboard_main
    assert leaderboard_main(['--data', 'GRAB_DEMO', '--work-dir', str(tmp_path), '--no-plot']) == 0
    board = capsys.readouterr().out
    assert 'Qwen/Tiny-VL' in board and 'Qwen--Tiny-VL' not in board.split('run(s) of GRAB_DEMO')[0]
    from vlmeval_ext.records.report_html import build
    page = build(tmp_path)
    assert 'Qwen/Tiny-VL' in page
    assert re.findall(r'Qwen--Tiny-VL(.{10})', page) and all(                     # file names only
        after.startswith('_GRAB_DEMO') for after in re.findall(r'Qwen--Tiny-VL(.{10})', page))
    code, out = run_compare(tmp_path / 'Qwen' / 'Other', b.parent, 'GRAB_DEMO', tmp_path, capsys)
    assert code == 2 and f'{tmp_path / "Qwen" / "Other"}: neither a predictions file nor a work dir' in out.err
