"""Reliability of `vlmeval-ext eval` (no inference, so in-process; imports the kit once): a dead judge stops the
evaluation before any work, and two evaluations of the same predictions at once take turns: the second waits
for the first, then takes its verdicts, so no judge call is paid twice and each returns a result of every item.
"""
from __future__ import annotations

import json
import multiprocessing
import re
import subprocess
import sys
import threading
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
    from vlmeval_ext.cli.main import main
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
    table = GRAB.for_predictions('GRAB_DEMO', pred_path).evaluate(pred_path, model='loopback-judge', nproc=4,
                                                                  judge_backoff=0.05)
    row = table[table['GRAB scoring'] == 'llm_extracted'].iloc[0]
    queue.put((float(row['Overall (%)']), int(row['scored (items)'])))


def test_two_evaluations_of_the_same_predictions_at_once_take_turns_and_pay_each_call_once(
        grab_cls, judge_server, tmp_path, capfd):
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
    results = [queue.get(timeout=5) for _ in children]
    expected = 100 * sum(1 for i in range(n) if i % 3 < 2) / n
    # Each evaluation's own result (the table it returned) holds every item, not a progress file another wrote.
    assert results == [(pytest.approx(expected, abs=0.05), n)] * 2
    # One judge call per distinct prompt in all: the second evaluation took the first one's verdicts.
    out = capfd.readouterr().out
    cache = tmp_path / 'LoopbackGPT_GRAB_DEMO_loopback-judge_verdicts.jsonl'
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    judge_calls = judge_server.count(JUDGE_MARK)
    distinct = len({p for p in (r.prompt for r in judge_server.log) if JUDGE_MARK in p})
    assert distinct == n and judge_calls == distinct and len(records) == judge_calls
    assert len({r['prompt_sha256'] for r in records}) == distinct
    paid = sorted(int(m) for m in re.findall(r'judge loopback-judge: (\d+) call\(s\) made', out))
    assert paid == [0, n], out[-2000:]
    assert out.count('another evaluation of it is running') <= 1
    # A third evaluation reuses every verdict: no judge call, same score.
    judge_server.reset_log()
    grab_cls.for_predictions('GRAB_DEMO', path).evaluate(str(path), model='loopback-judge', nproc=4)
    scores = json.loads((tmp_path / 'LoopbackGPT_GRAB_DEMO_score.json').read_text())
    assert judge_server.count(JUDGE_MARK) == 0 and scores['judge_calls']['made'] == 0
    assert scores['llm_extracted']['Overall'] == pytest.approx(expected, abs=1e-3)
    print(f'\n[figures] two evaluations at once: {judge_calls} judge calls for {distinct} distinct prompts of '
          f'{n} items, {len(records)} call-log lines; third evaluation 0 calls')


def _hold_the_evaluation_lock(pred_path: str) -> subprocess.Popen:
    """Another process holding the evaluation lock of `pred_path` until its stdin closes."""
    code = ('import sys\nfrom vlmeval_ext.locks import evaluation_lock\n'
            f'with evaluation_lock({pred_path!r}, "holder"):\n'
            '    print("held", flush=True)\n    sys.stdin.read()\n')
    holder = subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == 'held'
    return holder


def test_an_evaluation_waits_while_another_holds_its_predictions_then_finishes(
        grab_cls, judge_server, tmp_path, capsys):
    path, data = _predictions(tmp_path)
    holder = _hold_the_evaluation_lock(str(path))
    outcome = {}

    def evaluate():
        try:
            outcome['table'] = grab_cls.for_predictions('GRAB_DEMO', path).evaluate(str(path), model='loopback-judge')
        except BaseException as err:       # reported by the assertions below
            outcome['error'] = err
    worker = threading.Thread(target=evaluate)
    try:
        worker.start()
        said, deadline = '', time.time() + 120
        while 'another evaluation of it is running' not in said and worker.is_alive() and time.time() < deadline:
            time.sleep(0.1)
            said += capsys.readouterr().out
        assert f'another evaluation of it is running (pid {holder.pid})' in said, (said[-2000:], outcome)
        worker.join(timeout=2)
        assert worker.is_alive() and not outcome, outcome        # waiting: no result, no call to the judge
        assert judge_server.count(JUDGE_MARK) == 0 and not (tmp_path / 'LoopbackGPT_GRAB_DEMO_score.json').exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    worker.join(timeout=120)
    assert not worker.is_alive() and 'error' not in outcome, outcome
    assert judge_server.count(JUDGE_MARK) == len(data)
    assert (tmp_path / '.vlmeval-ext-locks' / 'LoopbackGPT_GRAB_DEMO.tsv.lock').read_text() == ''   # released
