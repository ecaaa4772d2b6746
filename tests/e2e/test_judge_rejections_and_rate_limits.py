"""A judge that rejects some prompts for good (HTTP 400 from a content filter) and one that rate-limits (HTTP 429
beyond 2 requests at once), through `vlmeval-ext eval` with the judge on a loopback server:

- a rejected prompt is that item's judge failure, counted and reported; the evaluation finishes; the rerun asks
  nothing again (the rejection is remembered in the verdict cache) and keeps the finished result;
  `judge_retry_rejected` asks the remembered ones again;
- a rate-limited call waits (Retry-After) and is asked again, with fewer calls in flight: every verdict arrives;
- a rerun that cannot finish (the judge down) never demotes a finished `_score.json`.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from helpers.kit_run import kit_environment, run_kit
from helpers.loopback_server import LoopbackServer
from helpers.rbench_play import (BROKEN, DATA as RBENCH_DEMO, _assert_scores, _demo, expected_rows, judge_reply,
                                 model_output, unparseable_item)

GRAB_MARK = 'A generative model has been asked this question'
PROBE = 'Reply with the single word: ready'


def _grab_judge(body):
    prompt = body['messages'][-1]['content']
    # Kit difference: ms-vlmeval sends a text-only prompt as a string, upstream VLMEvalKit as a list of text parts.
    prompt = prompt if isinstance(prompt, str) else ' '.join(p.get('text', '') for p in prompt)
    out = prompt.split('The output from the model answering the question is: "')[1].split('"\n')[0]
    return out.split('answer is ')[-1].rstrip('.') if 'answer is ' in out else out


def _grab_predictions(tmp_path: Path) -> Path:
    """GRAB_DEMO predictions, every one in prose, so that every item asks the judge to extract its answer."""
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV
    data = pd.read_csv(GRAB_DEMO_TSV, sep='\t', dtype={'answer': str}).drop(columns=['image'])
    data['prediction'] = [f'Row {k}: reading the plot, the answer is {a}.' for k, a in enumerate(data['answer'])]
    path = tmp_path / 'M_GRAB_DEMO.xlsx'
    data.to_excel(path, index=False)
    return path


def _eval(args, env, timeout=400):
    proc = run_kit(['eval', *map(str, args)], env=env, entry=('-m', 'vlmeval_ext'), timeout=timeout)
    return proc, proc.stdout + proc.stderr


def _verdict_calls(server) -> list:
    return [r for r in server.log if PROBE not in r.prompt]


@pytest.fixture
def server():
    with LoopbackServer() as s:
        s.default = 'ready'
        yield s


def test_grab_judge_rejecting_12_prompts_finishes_and_the_rerun_pays_nothing_and_keeps_the_result(server, tmp_path):
    server.script(GRAB_MARK, _grab_judge)
    rejected_items = list(range(1, 41, 3))[:12]              # 12 of the 41 extraction prompts: a content filter
    server.reject('|'.join(fr'Row {k}:' for k in rejected_items))
    env = kit_environment(tmp_path, server)
    pred = _grab_predictions(tmp_path)
    argv = ['--data', 'GRAB_DEMO', '--pred', pred, '--judge', 'loopback-judge',
            '--judge-args', json.dumps({'judge_backoff': 0.05})]
    proc, out = _eval(argv, env)
    assert proc.returncode == 0, out[-3000:]
    score_path = tmp_path / 'M_GRAB_DEMO_score.json'
    score = json.loads(score_path.read_text())
    assert score['counts']['judge_failures'] == 12
    assert score['judge_calls']['rejected_by_judge'] == 12 and score['judge_calls']['failed'] == 0
    assert sum(r.outcome == 'rejected' for r in server.log) == 12          # each rejection asked once, no retries
    assert 'rejected 12 prompt(s) for good (12 this run, 0 remembered' in out and 'is down' not in out
    first_score = {k: v for k, v in score['llm_extracted'].items() if k != 'counts'}

    # the same command again: nothing is asked again (29 verdicts from the cache, 12 rejections remembered)
    server.reset_log()
    proc, out = _eval(argv, env)
    assert proc.returncode == 0, out[-3000:]
    assert _verdict_calls(server) == []
    again = json.loads(score_path.read_text())
    assert not (tmp_path / 'M_GRAB_DEMO_score_incomplete.json').exists()
    assert {k: v for k, v in again['llm_extracted'].items() if k != 'counts'} == first_score
    assert again['llm_extracted']['counts']['scored'] == 29 and again['counts']['judge_failures'] == 12
    assert again['judge_calls']['made'] == 0 and again['judge_calls']['rejected_earlier_not_asked'] == 12
    assert '0 this run, 12 remembered from an earlier run and not asked again' in out

    # asked to, the remembered rejections are asked again; the filter lifted, each gets its verdict
    server.rejections.clear()
    server.reset_log()
    proc, out = _eval([*argv[:-1], json.dumps({'judge_backoff': 0.05, 'judge_retry_rejected': True})], env)
    assert proc.returncode == 0, out[-3000:]
    assert len(_verdict_calls(server)) == 12
    final = json.loads(score_path.read_text())
    assert final['counts']['judge_failures'] == 0 and final['judge_calls']['made'] == 12


def test_a_rerun_with_the_judge_down_keeps_the_finished_score_file(server, tmp_path):
    server.script(GRAB_MARK, _grab_judge)
    env = kit_environment(tmp_path, server)
    pred = _grab_predictions(tmp_path)
    argv = ['--data', 'GRAB_DEMO', '--pred', pred, '--judge', 'loopback-judge']
    proc, out = _eval([*argv, '--judge-args', json.dumps({'judge_backoff': 0.05})], env)
    assert proc.returncode == 0, out[-3000:]
    score_path = tmp_path / 'M_GRAB_DEMO_score.json'
    finished = score_path.read_bytes()
    items_path = tmp_path / 'M_GRAB_DEMO_items.tsv'
    items = items_path.read_bytes()
    # without the cache and the kit's progress file every verdict is asked again, and the judge now fails every
    # extraction (HTTP 500)
    (tmp_path / 'M_GRAB_DEMO_grab_extraction.pkl').unlink()
    server.reject(GRAB_MARK, status=500)
    proc, out = _eval([*argv, '--judge-args', json.dumps({'cache': False, 'judge_backoff': 0.01,
                                                          'judge_retries': 0})], env)
    assert proc.returncode != 0 and 'is down' in out, out[-3000:]
    assert 'the finished result of an earlier evaluation stays in M_GRAB_DEMO_score.json' in out
    assert score_path.read_bytes() == finished and items_path.read_bytes() == items     # the per-item table too
    assert json.loads((tmp_path / 'M_GRAB_DEMO_score_incomplete.json').read_text())['counts']['judge_failures'] > 0


def _rbench_predictions(tmp_path: Path) -> Path:
    demo = _demo()
    rows = demo.drop(columns=['image']).copy()
    rows['prediction'] = [model_output(demo[(demo.pair_id == r['pair_id']) & (demo.variant == 'ref')].iloc[0],
                                       r['variant']) for r in demo.to_dict('records')]
    path = tmp_path / f'M_{RBENCH_DEMO}.xlsx'
    rows.to_excel(path, index=False)
    return path


def _rejected(prompt: str) -> bool:
    """About 15 % of the judge's prompts, chosen by the prompt's hash (every time the same ones)."""
    return PROBE not in prompt and int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 100 < 15


def test_rbench_official_with_a_judge_that_rejects_15_percent_and_rate_limits_finishes_and_reruns_free(
        server, tmp_path, monkeypatch):
    monkeypatch.setitem(BROKEN, 'marker', None)
    server.default = lambda body: judge_reply(_text(body))
    server.rejection_rule = _rejected
    server.max_concurrent, server.retry_after, server.latency = 2, '0.2', 0.05
    env = kit_environment(tmp_path, server)
    pred = _rbench_predictions(tmp_path)
    argv = ['--data', RBENCH_DEMO, '--pred', pred, '--judge', 'loopback-judge', '--api-nproc', 8,
            '--judge-args', json.dumps({'judge_backoff': 0.05})]
    proc, out = _eval(argv, env, timeout=600)
    assert proc.returncode == 0, out[-3000:]
    score_path = tmp_path / f'M_{RBENCH_DEMO}_score.json'
    score = json.loads(score_path.read_text())
    rejected = sum(r.outcome == 'rejected' for r in server.log)
    limited = sum(r.outcome == 'rate_limited' for r in server.log)
    calls = score['judge_calls']
    assert rejected > 10 and limited > 0 and server.most_at_once == 2
    assert calls['rejected_by_judge'] == rejected and calls['rate_limited_answers'] == limited
    assert calls['failed'] == 0 and 'is down' not in out        # every other verdict arrived
    assert calls['lowest_concurrency'] <= 2
    # every score whose prompts all got verdicts is exactly the scripted one; the others are judge failures
    failed = score['judge']['failed_keys']
    assert 1 <= len(failed) == score['judge']['failures']['judge_failed_scores'] < 50
    demo = _demo()
    rows = expected_rows(demo)
    for row in rows:
        if row['pair_id'] == unparseable_item(demo):     # this judge parses every prompt: the scripted scores
            row['score_dis'] = row['score_com'] = 0.0
        for kind in ('ref', 'dis', 'com'):
            if f"{row['pair_id']}|{kind}" in failed:
                row[f'score_{kind}'] = None
    _assert_scores(score, rows)

    # the same command again: no verdict asked again, the finished result kept
    server.reset_log()
    proc, out = _eval(argv, env, timeout=600)
    assert proc.returncode == 0, out[-3000:]
    assert _verdict_calls(server) == []
    again = json.loads(score_path.read_text())
    assert not (tmp_path / f'M_{RBENCH_DEMO}_score_incomplete.json').exists()
    assert again['absolute'] == score['absolute'] and again['relative'] == score['relative']
    assert again['judge_calls']['made'] == 0 and again['judge_calls']['rejected_earlier_not_asked'] == rejected


def _text(body) -> str:
    content = body['messages'][-1]['content']
    return content if isinstance(content, str) else ' '.join(p.get('text', '') for p in content)
