"""Reliability of GRAB end to end through run.py (issue 8): random API faults, SIGKILL + resume.

The loopback server is the model (the kit's GPT4V class) and the llm_extracted judge. Every demo item gets a
known reply kind, so the scores of a clean run are known exactly (`expected_scores`), and every request the
server saw can be traced back to its item. Each scenario is one test (it starts run.py, ~40 s each).

Figures: run with `-s` to print the measured numbers (docs/RELIABILITY.md quotes them).
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import threading
import time
from collections import Counter

import pandas as pd
import pytest

from helpers.kit_run import REPO_ROOT, kit_environment, kit_output
from helpers.loopback_server import FAULT_KINDS

from helpers.grab_play import GrabPlay, JUDGE_MARK, KIT_FAIL_MSG, demo, expected_scores, judge_requests, kit_command, model_requests, results, run


# ------------------------------------------------------------------------------------------------ faults

def test_random_faults_are_counted_listed_and_retried_never_scored(tmp_path):
    """20 % seeded faults of every kind on model and judge: the run finishes; each item is scored from a real
    reply or listed as failed; the same command again asks only what failed and ends at the clean scores."""
    data = demo()
    play = GrabPlay(data)
    server = play.start_server(seed=2)
    server.fault_rate, server.fault_kinds, server.timeout_sleep = 0.2, FAULT_KINDS, 2.5
    env = kit_environment(tmp_path, server)
    # One attempt per judge call (no retries) so that failures happen and must be counted, not hidden.
    cmd = kit_command(tmp_path, server, '--api-nproc', '8',
                      '--judge-args', json.dumps({'judge_retries': 0, 'judge_backoff': 0}))
    try:
        t0 = time.time()
        proc = run(cmd, env)
        first_wall = time.time() - t0
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        first_log = list(server.log)
        model_log, judge_log = model_requests(server, play), judge_requests(server, play)
        scores, items = results(tmp_path)

        injected = Counter(r.outcome for r in first_log if r.outcome != 'ok')
        assert set(injected) == set(FAULT_KINDS), injected          # every kind of fault really happened
        # Predictions: each is a reply the server really sent for that item, or a counted + listed failure.
        replies_for = {}
        for item, outcome, reply in model_log:
            if outcome in ('ok', 'garbage'):     # garbage text is what the "model" said: a (wrong) answer
                replies_for.setdefault(item, set()).add(reply)
        infer_failed = set(items.loc[items['failed'].notna(), 'index'])          # listed in _items.tsv
        assert set(scores['llm_extracted']['counts']['inference_failed_items']) == infer_failed
        rows = items.to_dict('records')
        for pos, row in enumerate(rows):
            if row['prediction_kind'] == 'failed':          # the kit's failure text, kept as written and listed
                assert row['index'] in infer_failed and pd.isna(row['official']) and pd.isna(row['llm_extracted'])
                assert row['prediction'].startswith(KIT_FAIL_MSG)
            else:
                assert row['index'] not in infer_failed
                assert row['prediction'] in replies_for[pos], (row['index'], row['prediction'])
                assert KIT_FAIL_MSG not in row['prediction']
        assert scores['official']['counts']['inference_failures'] == len(infer_failed) == \
            (items.prediction_kind == 'failed').sum() == scores['counts']['inference_failures']
        assert len(infer_failed) > 0, 'one attempt per item at 20 % faults: some inference must fail'
        # Verdicts: every extracted answer is an 'ok' judge reply for that output; failures are listed.
        ok_judge = {(out, reply) for out, outcome, reply in judge_log if outcome == 'ok'}
        llm = scores['llm_extracted']['counts']
        judge_failed = set(llm['judge_failed_items'])
        assert llm['judge_failures'] == len(judge_failed) > 0
        for row in rows:
            if row['index'] in judge_failed:
                assert pd.isna(row['llm_extracted']) and isinstance(row['judge_failed'], str)
            elif row['prediction_kind'] != 'failed':
                assert not pd.isna(row['llm_extracted'])
                extracted = 'None' if row['extracted'] == '<None>' else row['extracted']
                assert (row['prediction'], extracted) in ok_judge, (row['index'], extracted)
        n = len(data)
        assert llm['scored'] + llm['not_scored'] == n
        assert llm['not_scored'] == len(judge_failed) + len(infer_failed)
        # The summary printed at the end of a run shows the failure counts.
        from vlmeval_ext.records.summary import format_score_file
        summary = format_score_file(kit_output(tmp_path / 'out' / 'LoopbackGPT', 'LoopbackGPT_GRAB_DEMO_score.json'))
        assert f'judge_failures={len(judge_failed)}' in summary
        assert f'inference_failures={len(infer_failed)}' in summary

        # The same command again, faults off: only the failed predictions and verdicts are asked.
        cached_verdicts = n - len(judge_failed) - len(infer_failed)
        server.fault_rate = 0.0
        server.reset_log()
        proc = run(cmd, env)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        second_model, second_judge = model_requests(server, play), judge_requests(server, play)
        asked_again = sorted(str(data['index'][item]) for item, _, _ in second_model)
        assert asked_again == sorted(infer_failed)                         # finished predictions not re-asked
        assert len(second_judge) == n - cached_verdicts                    # finished verdicts not re-asked
        scores, items = results(tmp_path)
        garbage = {item for item, outcome, reply in model_log if outcome == 'garbage'
                   and reply in set(items['prediction'])}
        for scoring, value in expected_scores(data, garbage).items():
            assert scores[scoring]['Overall'] == pytest.approx(value, abs=1e-3)
            assert scores[scoring]['counts']['not_scored'] == 0
        print(f'\n[figures] GRAB faults: {len(first_log)} requests, injected {dict(injected)} '
              f'({sum(injected.values())} faults); inference failures counted {len(infer_failed)}, judge failures '
              f'counted {len(judge_failed)}; rerun asked {len(asked_again)} predictions + {len(second_judge)} '
              f'verdicts (= the failed ones); {len(garbage)} garbage predictions kept as (wrong) answers; verdicts lost 0; duplicate calls 0; first run {first_wall:.0f} s')
    finally:
        server.stop()


# ------------------------------------------------------------------------------------------- kill + resume

def _popen(cmd, env):
    return subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _kill_when(proc, condition, timeout=300) -> None:
    """SIGKILL the run's whole process group once condition() holds (the run must still be going)."""
    drain = threading.Thread(target=proc.stdout.read, daemon=True)   # keep the pipe from filling up
    drain.start()
    deadline = time.time() + timeout
    while not condition():
        assert proc.poll() is None, 'the run ended before the kill point'
        assert time.time() < deadline, 'kill point never reached'
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_sigkill_during_inference_and_judging_loses_nothing_and_asks_nothing_twice(tmp_path):
    data = demo()
    n = len(data)
    play = GrabPlay(data, model_delay=0.15, judge_delay=0.15)
    server = play.start_server()
    env = kit_environment(tmp_path, server)
    cmd = kit_command(tmp_path, server, '--api-nproc', '2')
    out = tmp_path / 'out' / 'LoopbackGPT'
    try:
        # 1. Killed during inference, after 12 answers.
        _kill_when(_popen(cmd, env), lambda: sum(1 for r in list(server.log) if r.n_images and r.reply) >= 12)
        answered = {item for item, _, reply in model_requests(server, play) if reply}
        checkpoints = list(out.rglob('*checkpoint.pkl'))
        assert len(checkpoints) == 1, list(out.rglob('*'))
        with open(checkpoints[0], 'rb') as f:
            kept = {str(k) for k, v in pickle.load(f).items() if KIT_FAIL_MSG not in v}
        positions = {str(k): i for i, k in enumerate(data['index'])}
        assert len(kept) >= 10 and {positions[k] for k in kept} <= answered
        # answered by the server, not yet in the kit's checkpoint: the calls in flight plus the answers the kit's
        # main thread had not written yet (it writes one at a time, so a loaded machine leaves more): a figure,
        # not a bound; what the plugin owns is below (every saved answer kept, every unsaved one asked again once)
        in_flight_lost = len(answered) - len(kept)

        # 2. The same command: resumes inference, then killed during judging after 15 verdicts.
        server.wait_idle()          # requests the killed run left in flight belong to its log, not the next one's
        server.reset_log()
        _kill_when(_popen(cmd, env), lambda: server.count(JUDGE_MARK, outcome='ok') >= 15
                   and sum(1 for r in list(server.log) if JUDGE_MARK in r.prompt and r.reply) >= 15)
        second_model = [str(data['index'][item]) for item, _, _ in model_requests(server, play)]
        assert not set(second_model) & kept, 'a saved prediction was requested again'
        assert sorted(second_model) == sorted(set(data['index'].astype(str)) - kept)
        verdict_file = kit_output(out, 'LoopbackGPT_GRAB_DEMO_loopback-judge_verdicts.jsonl')
        lines = verdict_file.read_text().splitlines()
        saved_verdicts = {(json.loads(line)['prompt_sha256'], json.loads(line)['slot']) for line in lines if line.strip()}
        assert len(saved_verdicts) >= 13 and len(saved_verdicts) == len(lines)

        # 3. The same command again: no model call at all, only the verdicts not yet saved.
        server.wait_idle()
        server.reset_log()
        proc = run(cmd, env)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert model_requests(server, play) == []
        third_judge = judge_requests(server, play)
        assert len(third_judge) == n - len(saved_verdicts)
        scores, _ = results(tmp_path)
        llm = scores['llm_extracted']['counts']
        # Every saved verdict was reused (from the run's own progress file or from the verdict cache), and only
        # the others were asked (one call each).
        paid = scores['judge_calls']
        assert llm['calls_cached'] + paid['reused_from_cache'] == len(saved_verdicts)
        assert paid['made'] == len(third_judge) and paid['failed'] == 0
        for scoring, value in expected_scores(data).items():   # = an uninterrupted run (see test_secrets_run)
            assert scores[scoring]['Overall'] == pytest.approx(value, abs=1e-3)
            assert scores[scoring]['counts']['not_scored'] == 0
        print(f'\n[figures] GRAB SIGKILL: inference killed with {len(kept)} predictions saved '
              f'({in_flight_lost} in flight); resumed run asked {len(second_model)} predictions (0 saved ones '
              f'again); judging killed with {len(saved_verdicts)} verdicts saved; final run asked '
              f'{len(third_judge)} verdicts (0 saved ones again), 0 predictions; scores = clean run')
    finally:
        server.stop()
