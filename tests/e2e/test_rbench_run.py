"""R-Bench-Full end to end through run.py, the loopback server playing the model and the judge, on the shipped demo
split (24 real Ref_Release.csv items, generated reference images and their corrupt()ed versions).

Five subprocesses in all (each pays the kit's import):
  1. official mode, uninterrupted, judge faults injected once judging starts (transient HTTP faults + one
     prompt whose every reply is unparseable);
  2./3. efficient mode, SIGKILLed during judging, then the same command again with --reuse;
  4. `vlmeval-ext eval --judge offline` on a predictions file with failed / empty / unpaired rows;
  5. `run.py --data R-Bench-Full --model InternVL2-1B` reaches the kit's model builder and fails offline.
The model and judge replies are designed so that every expected score is known in advance (and efficient mode
must equal official mode on them).
"""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from vlmeval_ext.prepare.demos import RBENCH_DEMO_TSV as DEMO_TSV
from vlmeval_ext.dataset.utils.rbench_full import model_prompt
from vlmeval_ext.dataset.utils.rbench_full import parse_captions
from helpers.kit_run import REPO_ROOT, kit_environment, loopback_model_config, run_kit, write_config

from helpers.rbench_play import BROKEN, DATA, MODEL, ScriptedModel, _assert_scores, _cache_keys, _demo, _judge_requests, _logged_keys, _newest_kit_file, _score_json, expected_rows, unparseable_item


# ------------------------------------------------------------------------------------------ the runs
@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    from helpers.loopback_server import LoopbackServer

    tmp = tmp_path_factory.mktemp('rbench_e2e')
    demo = _demo()
    BROKEN['marker'] = f'[something else entirely {unparseable_item(demo)}]'
    out = {'demo': demo, 'tmp': tmp}
    server = LoopbackServer(seed=3).start()
    try:
        model = ScriptedModel(demo)
        from vlmeval_ext.launcher import PROBE_PROMPT
        server.script(re.escape(PROBE_PROMPT), 'OK')         # the launcher's one test call to the model
        server.default = model
        env = kit_environment(tmp, server)
        cfg = write_config(tmp, loopback_model_config(server, {DATA: {'class': 'RBenchFull', 'dataset': DATA}}))

        def args(work, mode):
            protocol = {'judge_mode': mode, 'judge_backoff': 0.02, 'judge_retries': 5}
            return ['--config', cfg, '--work-dir', work, '--judge', 'loopback-judge', '--api-nproc', '4',
                    '--reuse', '--judge-args', json.dumps(protocol)]

        def popen(argv):
            cmd = [sys.executable, str(REPO_ROOT / 'run.py'), *map(str, argv)]
            return subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True)

        # 1. official, faults injected as soon as inference is done (inference stays clean)
        proc = popen(args(tmp / 'official', 'official'))
        deadline = time.time() + 300
        while sum(1 for r in list(server.log) if r.n_images) < len(demo) and proc.poll() is None \
                and time.time() < deadline:
            time.sleep(0.05)
        # transient faults only ('garbage' replies would be stored verdicts and re-asked: not transient)
        server.fault_kinds = ('429', '500', 'malformed', 'empty')
        server.fault_rate = 0.05
        server.fail_next('500', 3)
        stdout, _ = proc.communicate(timeout=300)
        server.fault_rate = 0.0
        assert proc.returncode == 0, stdout[-4000:]
        out['official'] = {'stdout': stdout, 'log': list(server.log), 'seen': list(model.seen)}
        server.reset_log()
        model.seen.clear()

        # 2. efficient, killed during judging (its own verdict cache: it would reuse official mode's verdicts)
        env['VLMEVAL_EXT_CACHE'] = str(tmp / 'verdict-cache-efficient')
        server.latency = 0.05
        work = tmp / 'efficient'
        proc = popen(args(work, 'efficient'))
        deadline = time.time() + 300
        while len(_judge_requests(server.log)) < 12 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        server.wait_idle()          # the killed run's requests still in flight are logged as the killed run's
        out['killed'] = {'returncode': proc.returncode, 'cached': _cache_keys(tmp / 'verdict-cache-efficient'),
                         'judge_requests': len(_judge_requests(server.log))}
        server.reset_log()
        server.latency = 0.0

        # 3. the same command again
        proc = popen(args(work, 'efficient'))
        stdout, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, stdout[-4000:]
        out['resumed'] = {'stdout': stdout, 'log': list(server.log), 'seen': list(model.seen)}
    finally:
        server.stop()
        BROKEN['marker'] = None       # other modules on this worker use the same scripted judge
    return out


def test_model_saw_both_images_of_every_item_with_the_official_prompt(runs):
    demo, seen, log = runs['demo'], runs['official']['seen'], runs['official']['log']
    model_requests = [r for r in log if r.n_images]
    assert len(model_requests) == len(demo) == 48
    assert all(r.n_images == 1 for r in model_requests)
    by_size = {}
    for r in model_requests:
        (image,) = [p for p in r.parts if p[0] == 'image']
        by_size.setdefault(image[2], []).append(image[1])
    # one width per item: each item's two requests carried two different images
    assert len(by_size) == 24
    assert all(len(hashes) == 2 and hashes[0] != hashes[1] for hashes in by_size.values())
    assert Counter((pid, v) for pid, v, _ in seen) == Counter((int(p), v) for p, v in zip(demo.pair_id, demo.variant))
    rows = {int(r['pair_id']): r for r in demo.to_dict('records')}
    for pid, _, text in seen:
        r = rows[pid]
        assert text.strip() == model_prompt(r['type'], r['question'], r['choice']).strip()


def test_official_scores_with_faults(runs):
    demo, log = runs['demo'], runs['official']['log']
    score = _score_json(runs['tmp'] / 'official')
    _assert_scores(score, expected_rows(demo))
    judge = score['judge']
    # transient faults happened and were retried; the unparseable prompt failed dis and com of one item
    assert any(r.outcome != 'ok' for r in _judge_requests(log))
    assert judge['failures']['judge_failed_scores'] == 2
    assert judge['failures']['excluded_scores'] == {'score_ref': 0, 'score_dis': 1, 'score_com': 1}
    assert judge['mode'] == 'official' and judge['model'] == 'loopback-judge'
    # official protocol: MCQ/VQA 5 calls per score, CAP one per caption (+5 for com); re-asks on top
    caps = [len(parse_captions(a)) for a, t, v in zip(demo.answer, demo.type, demo.variant) if t == 'CAP' and v == 'ref']
    official_calls = 8 * 15 + 8 * 15 + sum(2 * n + 5 for n in caps)
    # dis and com of the broken item send the same prompt (its reference output is the answer): asked 3 times
    # without a verdict, then both scores fail and their other repeats are not asked
    assert judge['calls'] == official_calls - 2 * 5 + 3
    assert sum(1 for r in _judge_requests(log) if r.outcome == 'ok') == judge['calls']
    scores_csv = pd.read_csv(runs['tmp'] / 'official' / MODEL / f'{MODEL}_{DATA}_scores.csv')
    assert scores_csv['score_dis'].isna().sum() == 1           # failed: empty, never 0
    stdout = runs['official']['stdout']
    # before judging, one line says what the bar counts and how many calls are to come; after, what was paid
    assert re.search(rf'R-Bench-Full_DEMO: (\d+) of \1 distinct prompts to judge \({official_calls} judge calls, '
                     rf'official mode; 0 judged in {MODEL}_{DATA}_rbench_judge.pkl\); the bar counts prompts', stdout)
    assert re.search(r'judge loopback-judge: \d+ call\(s\) made, .* failed; judging took \d+ s', stdout)
    # the kit prints the returned table once, every row and column labelled (transposed: columns become rows)
    table = stdout.split('Evaluation Results:')[1]
    assert re.search(r'R-Bench\s+absolute\s+relative', table) and 'MCQ low (0-1)' in table
    assert stdout.count('MCQ low (0-1)') == 1
    for suffix in ('_robustness.csv', '_radar.png', '_task_strength.png', '_manifest.json'):
        assert (runs['tmp'] / 'official' / MODEL / f'{MODEL}_{DATA}{suffix}').is_file()
    manifest = json.loads((runs['tmp'] / 'official' / MODEL / f'{MODEL}_{DATA}_manifest.json').read_text())
    assert 'judge_VQA' in json.dumps(manifest) and 'sk-vlmevalext-FAKE' not in json.dumps(manifest)


def test_efficient_resume_after_kill(runs):
    demo, killed, resumed = runs['demo'], runs['killed'], runs['resumed']
    assert killed['returncode'] == -signal.SIGKILL
    assert killed['cached'], 'the kill came before any verdict was stored'
    work = runs['tmp'] / 'efficient'
    final = _cache_keys(runs['tmp'] / 'verdict-cache-efficient')
    # no verdict asked twice: each call made is logged once, so a (prompt, slot) asked again would show twice
    # (the cache's key is unique by construction); the log holds every call the rerun made and nothing the cache lacks
    logged = _logged_keys(work)
    assert len(logged) == len(set(logged)) and set(final) - set(killed['cached']) <= set(logged) <= set(final)
    # and the rerun asked only what was not stored
    assert set(killed['cached']) <= set(final)
    assert 0 < len(killed['cached']) < len(final)            # killed mid-judging, not before or after
    asked_again = [r for r in _judge_requests(resumed['log']) if r.outcome == 'ok']
    assert len(asked_again) == len(final) - len(killed['cached'])
    assert not [r for r in resumed['log'] if r.n_images]      # --reuse: no inference again
    # the resumed efficient run scores exactly as expected (official mode's scores but for the one sampled
    # reference caption of CAP dis/ref), with a third of the calls
    official, efficient = _score_json(runs['tmp'] / 'official'), _score_json(work, '_efficient')
    assert not (work / MODEL / f'{MODEL}_{DATA}_score.json').exists()      # never mistaken for official
    _assert_scores(efficient, expected_rows(demo, 'efficient', efficient['judge']['caption_seed']))
    judge = efficient['judge']
    assert judge['mode'] == 'efficient' and judge['calls'] == len(final)
    assert judge['calls'] < official['judge']['calls'] / 2
    assert judge['calls_per_item'] == pytest.approx(len(final) / 24, abs=1e-3)
    # every score asks the judge: an MCQ score until 3 verdicts agree, a 0/1/2 score once, CAP dis/ref one
    # caption; the unparseable prompt (dis and com of one item) is asked 3 times, then both fail
    assert judge['calls'] == 8 * 3 * 3 + (8 * 3 - 2 + 3) + 8 * 3
    assert judge['failures']['judge_failed_scores'] == 2


# ------------------------------------------------------------------------------ offline judge on a file
def test_eval_cli_offline_on_predictions_with_failures(runs, tmp_path):
    pred = pd.read_csv(runs['tmp'] / 'official' / MODEL / f'{MODEL}_{DATA}.tsv', sep='\t')   # run.py writes TSV
    pred.loc[pred['index'] == 1, 'prediction'] = 'Failed to obtain answer via API.'   # pair 0, dis
    pred.loc[pred['index'] == 16, 'prediction'] = ''                                   # pair 8, ref
    pred = pred[pred['index'] != 33]                                                    # pair 16 loses dis
    path = tmp_path / f'M_{DATA}.xlsx'
    pred.to_excel(path, index=False)
    env = kit_environment(tmp_path)
    proc = run_kit(['eval', '--data', DATA, '--pred', path, '--judge', 'offline'], env=env,
                   entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    score = json.loads((tmp_path / f'M_{DATA}_score.json').read_text())
    judge = score['judge']
    assert 'approximation' in judge['label'] and judge['mode'] == 'offline' and judge['calls'] == 0
    assert judge['failures']['inference_failed_rows'] == 1
    assert judge['failures']['missing_partner_items'] == 1
    # pair 0 (the kit's failure text): dis and com; pair 16 (no dis row): dis and com. Pair 8's empty reference
    # output is an answer: judged, counted as empty, nothing excluded.
    assert judge['failures']['excluded_scores'] == {'score_ref': 0, 'score_dis': 2, 'score_com': 2}
    assert score['counts'] == {'items': 24, 'rows': 47, 'scored': 22, 'empty': 1, 'inference_failures': 1,
                               'missing_partner': 1, 'judge_failures': 0}
    assert judge['name'] == 'offline' and judge['endpoint_host'] is None
    robustness = pd.read_csv(tmp_path / f'M_{DATA}_robustness.csv')
    assert list(robustness.columns) == ['dimension', 'absolute (0-1)', 'relative (0-1)', 'absolute 95 % CI low (0-1)',
                                        'absolute 95 % CI high (0-1)', 'relative 95 % CI low (0-1)',
                                        'relative 95 % CI high (0-1)', 'judge']
    assert robustness['judge'].eq('offline approximation').all()       # short on every row; the label once
    assert proc.stdout.count('approximation (MiniLM-L6') == 1 and 'Overall (0-1)' in proc.stdout
    # the scripted outputs are easy cases: the offline judge must rank right ones above wrong ones
    rows = pd.read_csv(tmp_path / f'M_{DATA}_scores.csv')
    mcq = rows[rows.type == 'MCQ']
    assert mcq['score_ref'].dropna().eq(1.0).all()
    vqa = rows[rows.type == 'VQA'].reset_index(drop=True)
    odd = [int(p) % 2 == 1 for p in runs['demo'][(runs['demo'].variant == 'ref') & (runs['demo'].type == 'VQA')].pair_id]
    assert vqa['score_dis'][[not o for o in odd]].dropna().min() > vqa['score_dis'][odd].dropna().max()


# ------------------------------------------------------------------------------ a real kit model
def test_full_name_reaches_the_kit_model_builder(tmp_path):
    env = kit_environment(tmp_path)
    lmu = Path(env['LMUData'])
    shutil.copyfile(DEMO_TSV, lmu / 'R-Bench-Full.tsv')
    from vlmeval_ext.io import file_md5
    (lmu / 'R-Bench-Full.tsv.md5').write_text(file_md5(lmu / 'R-Bench-Full.tsv') + '\n')
    proc = run_kit(['--data', 'R-Bench-Full', '--model', 'InternVL2-1B', '--work-dir', tmp_path / 'out'], env=env)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert '[vlmeval-ext] FAILED: InternVL2-1B x R-Bench-Full' in proc.stderr
    status = json.loads(_newest_kit_file(tmp_path / 'out' / 'InternVL2-1B', 'status.json').read_text())
    entry = status['datasets']['R-Bench-Full']
    # the dataset was built (prediction file planned) and the failure is the model's weights, offline
    assert entry['prediction_file'].endswith('InternVL2-1B_R-Bench-Full.tsv')
    assert re.search(r'InternVL2-1B|huggingface|offline|connect', entry['error_message'], re.I), entry
