"""Reliability of `vlmeval-ext eval` (no inference, so in-process; imports the kit once): a dead judge stops the
evaluation before any work, and two evaluations of the same predictions in one work dir share the verdict
cache without corrupting it (issue 8).
"""
from __future__ import annotations

import json
import multiprocessing
import time

import pandas as pd
import pytest

from helpers.kit_run import FAKE_KEY
from helpers.loopback_server import LoopbackServer

JUDGE_MARK = 'A generative model has been asked this question'


@pytest.fixture(scope='module')
def grab_cls():
    from vlmeval_ext.datasets import GRAB
    return GRAB


def _predictions(tmp_path):
    """GRAB_DEMO predictions: a third exact, a third in prose, a third wrong."""
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
    data = pd.read_csv(DEMO_TSV, sep='\t', dtype={'answer': str}).drop(columns=['image'])
    kinds = ['exact', 'prose', 'wrong']
    data['prediction'] = [{'exact': a, 'prose': f'Reading the plot, the answer is {a}.', 'wrong': 'It is 12345'}
                          [kinds[i % 3]] for i, a in enumerate(data['answer'])]
    path = tmp_path / 'LoopbackGPT_GRAB_DEMO.tsv'
    data.to_csv(path, sep='\t', index=False)
    return path, data


def _judge(body):
    time.sleep(0.02)
    prompt = body['messages'][-1]['content']
    # Kit difference: ms-vlmeval sends a text-only prompt as a string, upstream VLMEvalKit as a list of text parts.
    prompt = prompt if isinstance(prompt, str) else ' '.join(p.get('text', '') for p in prompt)
    out = prompt.split('The output from the model answering the question is: "')[1].split('"\n')[0]
    return out.split('answer is ')[-1].rstrip('.') if 'answer is ' in out else out


@pytest.fixture
def judge_server(monkeypatch):
    server = LoopbackServer().start()
    server.script(JUDGE_MARK, _judge)
    server.default = 'ready'
    monkeypatch.setenv('OPENAI_API_BASE', server.chat_url)
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    try:
        yield server
    finally:
        server.stop()


def test_judge_down_is_a_clear_error_before_any_work(grab_cls, judge_server, tmp_path, capsys):
    from vlmeval_ext.cli import main
    path, data = _predictions(tmp_path)
    judge_server.down = True
    start = time.time()
    with pytest.raises(SystemExit) as exit_info:
        main(['eval', '--data', 'GRAB_DEMO', '--pred', str(path), '--judge', 'loopback-judge',
              '--judge-args', json.dumps({'judge_backoff': 0.05})])
    elapsed = time.time() - start
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith('[vlmeval-ext]')]
    assert exit_info.value.code == 2 and 'Traceback' not in err
    assert len(lines) == 1 and 'the judge loopback-judge at 127.0.0.1:' in lines[0]
    assert 'did not answer a test call (HTTP 503' in lines[0]
    # The advice is true for GRAB (test_scoring_grab_offline_judge runs what it says): offline gives official and
    # normalized, llm_extracted skipped; no blanket "choose the offline judge".
    assert "GRAB's official and normalized scores (llm_extracted skipped)" in lines[0]
    assert 'choose the offline judge' not in lines[0]
    assert elapsed < 15                                   # 4 preflight attempts, not 41 items x retries
    # Nothing was scored: no score file, no verdict cache, no silent exact-matching result.
    assert not list(tmp_path.glob('*_score.json')) and not list(tmp_path.glob('*_verdicts.jsonl'))
    # The kit's fallback name ('exact_matching') means "no judge" to GRAB: the rule-based scorings only, and
    # no llm_extracted column filled by another scorer.
    judge_server.down = False
    grab_cls.for_predictions('GRAB_DEMO', path).evaluate(str(path), model='exact_matching')
    scores = json.loads((tmp_path / 'LoopbackGPT_GRAB_DEMO_score.json').read_text())
    assert {'official', 'normalized', 'counts', 'judge', 'notes', 'coverage'} <= set(scores)
    assert 'llm_extracted' not in scores and 'judge_calls' not in scores and scores['judge'] is None


def _evaluate_in_child(pred_path: str, queue) -> None:
    from vlmeval_ext.datasets import GRAB
    GRAB.for_predictions('GRAB_DEMO', pred_path).evaluate(pred_path, model='loopback-judge', nproc=4,
                                                          judge_backoff=0.05)
    queue.put(json.loads(open(pred_path.replace('.tsv', '_score.json')).read())['llm_extracted']['Overall'])


def test_two_parallel_evaluations_share_the_cache_without_corrupting_it(grab_cls, judge_server, tmp_path):
    path, data = _predictions(tmp_path)
    n = len(data)
    ctx = multiprocessing.get_context('fork')
    queue = ctx.Queue()
    children = [ctx.Process(target=_evaluate_in_child, args=(str(path), queue)) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=300)
        assert child.exitcode == 0
    overall = [queue.get(timeout=5) for _ in children]
    expected = 100 * sum(1 for i in range(n) if i % 3 < 2) / n
    assert overall == [pytest.approx(expected, abs=1e-3)] * 2
    # Every line of the call log is a whole record; both writers went on with the one stored verdict of a prompt.
    cache = tmp_path / 'LoopbackGPT_GRAB_DEMO_loopback-judge_verdicts.jsonl'
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    prompts = {r['prompt_sha256'] for r in records}
    judge_calls = judge_server.count(JUDGE_MARK)
    distinct = len({p for p in (r.prompt for r in judge_server.log) if JUDGE_MARK in p})
    assert len(prompts) == distinct and distinct <= judge_calls <= 2 * distinct and len(records) == judge_calls
    # A third evaluation reuses every verdict: no judge call, same score.
    judge_server.reset_log()
    grab_cls.for_predictions('GRAB_DEMO', path).evaluate(str(path), model='loopback-judge', nproc=4)
    scores = json.loads((tmp_path / 'LoopbackGPT_GRAB_DEMO_score.json').read_text())
    assert judge_server.count(JUDGE_MARK) == 0 and scores['judge_calls']['made'] == 0
    assert scores['llm_extracted']['Overall'] == pytest.approx(expected, abs=1e-3)
    print(f'\n[figures] parallel eval: 2 evaluators, {judge_calls} judge calls for {distinct} distinct prompts of '
          f'{n} items, {len(records)} call-log lines, 0 torn; third evaluation 0 calls')
