"""Damaged files, runs that do not belong together and planted links, each through the command a user runs: damaged downloads and
sidecars, `compare` on runs that do not belong together, the report page on planted links and giant replies, and
the bootstrap's memory on large `-RC` runs. Each test names the defect it pins; docs/RELIABILITY.md has a row for
each."""
from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from helpers.kit_run import kit_environment, one_error_line, run_cli, run_kit


# ---- 11. a parquet download cut in half -------------------------------------------------------------------------
@pytest.mark.parametrize('name, file', [('R-Bench-Full', 'All.parquet'), ('ReMI', 'test.parquet')])
def test_prepare_of_a_parquet_cut_in_half_is_one_line_saying_download_it_again(tmp_path, name, file):
    from vlmeval_ext.prepare.demos import write_remi_parquet
    whole = write_remi_parquet(tmp_path / 'whole.parquet')
    src = tmp_path / 'snapshot'
    src.mkdir()
    raw = whole.read_bytes()
    (src / file).write_bytes(raw[:len(raw) // 2])
    line = one_error_line(run_cli(['prepare', name, '--from', src], kit_environment(tmp_path)))
    assert f'{src / file}: not a readable parquet file' in line and 'download it again' in line, line


# ---- 12. an md5 sidecar holding garbage -------------------------------------------------------------------------
def test_a_garbage_md5_sidecar_is_blamed_itself_and_its_bytes_are_not_echoed(tmp_path):
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV
    env = kit_environment(tmp_path)
    tsv = Path(env['LMUData']) / 'GRAB.tsv'
    shutil.copyfile(GRAB_DEMO_TSV, tsv)
    Path(f'{tsv}.md5').write_bytes(b'\x00\xff\xfe garbage \x1b[31m\n')
    proc = run_kit(['--data', 'GRAB', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'out'], env)
    failed = [line for line in proc.stderr.splitlines() if line.startswith('[vlmeval-ext] FAILED')]
    assert proc.returncode == 1 and len(failed) == 1, proc.stderr[-3000:]
    assert f'{tsv}.md5: not an md5 checksum' in failed[0] and 'does not match' not in proc.stderr, failed[0]
    assert not any(c in proc.stderr for c in ('\x00', '\xff', '\x1b', '\ufffd')), repr(proc.stderr[-500:])


# ---- 3-6. compare on runs that do not belong together ------------------------------------------------------------
def _evaluate(folder: Path, dataset: str, frame: pd.DataFrame, model: str = 'M', *extra, env=None) -> Path:
    """Write `<model>_<dataset>.tsv` in `folder` and evaluate it with `vlmeval-ext eval`."""
    folder.mkdir(parents=True, exist_ok=True)
    pred = folder / f'{model}_{dataset}.tsv'
    frame.to_csv(pred, sep='\t', index=False)
    proc = run_cli(['eval', '--data', dataset, '--pred', pred, *extra], env or kit_environment(folder))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return pred


def _remi(right: int = 13) -> pd.DataFrame:
    from vlmeval_ext.prepare.demos import REMI_DEMO_TSV
    data = pd.read_csv(REMI_DEMO_TSV, sep='\t', dtype=str, keep_default_na=False).drop(columns=['image'])
    data['prediction'] = [json.dumps({'explanation': 'worked it out', 'answer': a if k < right else 'nothing'})
                          for k, a in enumerate(data['answer'])]
    return data


def _grab(kind: str) -> pd.DataFrame:
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV
    data = pd.read_csv(GRAB_DEMO_TSV, sep='\t', dtype=str, keep_default_na=False).drop(columns=['image'])
    data['prediction'] = {'right': data['answer'], 'wrong': '12345.678', 'prose': 'The answer is ' + data['answer'],
                          'failed': 'Failed to obtain answer via API.'}[kind]
    return data


def _compare(tmp_path, *args, code=0):
    proc = run_cli(['compare', *args], kit_environment(tmp_path), cwd=tmp_path)
    if code:
        return one_error_line(proc, code)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def test_compare_refuses_evaluations_of_another_dataset(tmp_path):
    a = _evaluate(tmp_path / 'a', 'ReMI_DEMO', _remi())
    b = _evaluate(tmp_path / 'b', 'ReMI_DEMO', _remi(7))
    line = _compare(tmp_path, a, b, '--data', 'GRAB_DEMO', code=2)
    assert 'M_ReMI_DEMO.tsv is an evaluation of ReMI_DEMO, not GRAB_DEMO' in line, line


def test_compare_marks_judged_scores_of_two_judges_and_records_the_judges(tmp_path):
    from helpers.loopback_server import LoopbackServer
    paths = {}
    with LoopbackServer() as server:
        server.default = lambda body: 'ready' if 'ready' in json.dumps(body) else body['model'][-1]
        for side, judge in (('a', 'judge-1'), ('b', 'judge-2')):
            env = kit_environment(tmp_path / side, server)
            paths[side] = _evaluate(tmp_path / side, 'GRAB_DEMO', _grab('prose'), 'M', '--judge', judge, env=env)
    out = tmp_path / 'cmp'
    proc = _compare(tmp_path, paths['a'], paths['b'], '--data', 'GRAB_DEMO', '--out', out)
    assert 'Not comparable where marked' in proc.stdout and 'A was judged by judge-1' in proc.stdout
    result = json.loads(next(out.glob('*_compare.json')).read_text())
    assert result['judges']['a']['model'] == 'judge-1' and result['judges']['b']['model'] == 'judge-2'
    assert result['scores']['llm_extracted Overall']['not_comparable'] == 'different judges'
    assert 'not_comparable' not in result['scores']['official Overall']      # a rule: no judge in it


def test_compare_refuses_an_incomplete_evaluation(tmp_path):
    a = _evaluate(tmp_path / 'a', 'GRAB_DEMO', _grab('right'))
    b = _evaluate(tmp_path / 'b', 'GRAB_DEMO', _grab('wrong'))
    score = tmp_path / 'b' / 'M_GRAB_DEMO_score.json'
    score.rename(score.with_name('M_GRAB_DEMO_score_incomplete.json'))
    line = _compare(tmp_path, a, b, '--data', 'GRAB_DEMO', code=2)
    assert 'its evaluation is incomplete (M_GRAB_DEMO_score_incomplete.json' in line, line


def test_compare_reads_rbench_efficient_mode_and_names_the_mode(tmp_path, monkeypatch):
    from helpers.loopback_server import LoopbackServer
    from helpers.rbench_play import BROKEN, DATA, _demo, judge_reply, model_output
    demo = _demo()
    frame = demo.drop(columns=['image']).copy()
    frame['prediction'] = [model_output(demo[(demo.pair_id == r['pair_id']) & (demo.variant == 'ref')].iloc[0],
                                        r['variant']) for r in demo.to_dict('records')]
    monkeypatch.setitem(BROKEN, 'marker', None)     # every item judged: no reply without a verdict
    paths = {}
    with LoopbackServer() as server:
        server.default = lambda body: judge_reply(json.dumps(body['messages']))
        env = kit_environment(tmp_path, server)
        for side, modes in (('a', ('official', 'efficient')), ('b', ('efficient',))):
            for mode in modes:
                paths[side] = _evaluate(tmp_path / side, DATA, frame, 'M', '--judge', 'loopback-judge',
                                        '--judge-args', json.dumps({'judge_mode': mode}), env=env)
    proc = _compare(tmp_path, paths['a'], paths['b'], '--data', DATA, '--out', tmp_path / 'cmp')
    assert f'# {DATA} (efficient judge mode)' in proc.stdout
    assert json.loads(next((tmp_path / 'cmp').glob('*.json')).read_text())['mode'] == 'efficient'
    line = _compare(tmp_path, paths['a'], paths['b'], '--data', DATA, '--mode', 'official', code=2)
    assert 'has no official-mode evaluation (it has: efficient)' in line, line


def test_compare_of_nothing_scored_of_long_names_and_of_an_out_file(tmp_path):
    a = _evaluate(tmp_path / 'a', 'GRAB_DEMO', _grab('right'))
    failed = _evaluate(tmp_path / 'f', 'GRAB_DEMO', _grab('failed'))
    line = _compare(tmp_path, a, failed, '--data', 'GRAB_DEMO', code=2)
    assert 'no item is scored in both M_GRAB_DEMO.tsv and M_GRAB_DEMO.tsv' in line, line
    long_a = _evaluate(tmp_path / 'la', 'GRAB_DEMO', _grab('right'), 'A' * 120)
    long_b = _evaluate(tmp_path / 'lb', 'GRAB_DEMO', _grab('wrong'), 'B' * 120)
    _compare(tmp_path, long_a, long_b, '--data', 'GRAB_DEMO', '--out', tmp_path / 'cmp')
    written = sorted(p.name for p in (tmp_path / 'cmp').iterdir())
    assert len(written) == 3 and all(len(name.encode()) < 255 and name.startswith('AAAA') for name in written)
    (tmp_path / 'taken').write_text('x')
    line = _compare(tmp_path, long_a, long_b, '--data', 'GRAB_DEMO', '--out', tmp_path / 'taken', code=2)
    assert 'taken: a file, not a folder' in line, line


def test_compare_intervals_tiny_p_values_and_a_constant_run(tmp_path):
    # ReMI_DEMO: one item per task (13 strata of one item), 6 flipped: the interval has spread
    a = _evaluate(tmp_path / 'ra', 'ReMI_DEMO', _remi())
    b = _evaluate(tmp_path / 'rb', 'ReMI_DEMO', _remi(7))
    _compare(tmp_path, a, b, '--data', 'ReMI_DEMO', '--out', tmp_path / 'remi')
    low, high = json.loads(next((tmp_path / 'remi').glob('*.json')).read_text())['scores']['official Overall']['ci95']
    assert low < high and low < 0
    # GRAB_DEMO: every item wrong in A, right in B (as the official rule reads them): McNemar p = 2 / 2**n, never 0
    wrong = _evaluate(tmp_path / 'ga', 'GRAB_DEMO', _grab('wrong'))
    right = _evaluate(tmp_path / 'gb', 'GRAB_DEMO', _grab('right'))
    proc = _compare(tmp_path, wrong, right, '--data', 'GRAB_DEMO', '--out', tmp_path / 'grab')
    row = json.loads(next((tmp_path / 'grab').glob('*.json')).read_text())['scores']['official Overall']
    flips = row['wrong_to_right']
    assert flips >= 30 and row['right_to_wrong'] == 0
    assert row['p_value'] == pytest.approx(2 / 2 ** flips, rel=1e-2) and f'{2 / 2 ** flips:.1e}' in proc.stdout
    assert row['ci95'][0] > 0                          # the interval agrees with the test: excludes 0
    # an all-right run: the exact McNemar test still says which differences it could see, never 0.00
    score = json.loads((tmp_path / 'gb' / 'M_GRAB_DEMO_score.json').read_text())
    assert score['detectable_difference']['value'] > 10


# ---- 7. the report page and a per-item file planted as a link to a file outside the work dir ----------------------
def test_the_report_never_embeds_a_per_item_file_linked_from_outside_its_folder(tmp_path):
    work = tmp_path / 'work' / 'M'
    _evaluate(work, 'GRAB_DEMO', _grab('right'))
    outside = tmp_path / 'private.tsv'
    outside.write_text('index\tquestion\tprediction\n1\tSECRET-OUTSIDE-THE-WORK-DIR\tx\n')
    items = work / 'M_GRAB_DEMO_items.tsv'
    items.unlink()
    items.symlink_to(outside)
    (work / 'M_GRAB_DEMO_extra.png').symlink_to(outside)                 # a "plot" that is a link out too
    proc = run_cli(['report', tmp_path / 'work'], kit_environment(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = (tmp_path / 'work' / 'report.html').read_text()
    assert 'SECRET-OUTSIDE' not in page
    assert base64.b64encode(outside.read_bytes()).decode() not in page          # nor embedded as a plot
    assert 'M_GRAB_DEMO_items.tsv is a link to' in proc.stderr and 'outside its folder: not shown' in page


# ---- 13. the bootstrap's memory on a large -RC run ------------------------------------------------------------------
PAIRS = 60_000
# VmHWM: this process's peak resident memory (ru_maxrss would carry the forking test process's own peak over)
PEAK = '''
{body}
hwm = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))
print('PEAK_MB', int(hwm.split()[1]) / 1024)
'''


def _rc_scores(seed: int) -> pd.DataFrame:
    import numpy as np
    rng = np.random.default_rng(seed)
    ref = rng.random(PAIRS) < 0.8
    dis = ref & (rng.random(PAIRS) < 0.7)
    rows = np.arange(PAIRS)                  # the same pairs in every run; the scores differ by seed
    return pd.DataFrame({'pair_id': rows, 'type': 'MCQ', 'distortion': rows % 33 + 1,
                         'strength': rows // 33 % 3 + 1, 'score_ref': ref.astype(float),
                         'score_dis': dis.astype(float), 'score_com': (dis == ref).astype(float)})


def _peak_mb(body: str, tmp_path) -> float:
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, '-c', PEAK.format(body=body)], capture_output=True, text=True,
                          cwd=tmp_path, env=kit_environment(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return float(proc.stdout.split('PEAK_MB')[-1])


def test_rc_intervals_and_compare_on_60000_pairs_stay_under_half_a_gigabyte(tmp_path):
    for side, seed in (('a', 1), ('b', 2)):
        (tmp_path / side).mkdir()
        (tmp_path / side / 'M_AI2D_TEST-RC.tsv').write_text('index\tprediction\n')
        _rc_scores(seed).to_csv(tmp_path / side / 'M_AI2D_TEST-RC_rc_scores.csv', index=False)
    scores = str(tmp_path / 'a' / 'M_AI2D_TEST-RC_rc_scores.csv')
    intervals = _peak_mb(f"import pandas as pd\nfrom vlmeval_ext.plugin.corrupted import item_intervals\n"
                         f"block = item_intervals(pd.read_csv({scores!r}))\n"
                         "low, high = block['ci95']['absolute']['Overall']\nassert 0 < low < high < 1", tmp_path)
    compare = _peak_mb("from vlmeval_ext.records.compare import compare_main\n"
                       f"compare_main([{str(tmp_path / 'a' / 'M_AI2D_TEST-RC.tsv')!r}, "
                       f"{str(tmp_path / 'b' / 'M_AI2D_TEST-RC.tsv')!r}, '--data', 'AI2D_TEST-RC', "
                       f"'--out', {str(tmp_path / 'cmp')!r}])", tmp_path)
    print(f'\n[figures] peak memory on {PAIRS:,} -RC pairs: intervals {intervals:.0f} MB, compare {compare:.0f} MB')
    assert intervals < 512 and compare < 512
    result = json.loads(next((tmp_path / 'cmp').glob('*.json')).read_text())
    low, high = result['scores']['absolute Overall']['ci95']
    assert low < result['scores']['absolute Overall']['difference'] < high
