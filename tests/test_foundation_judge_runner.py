"""The judge runner: scheduling, verdict reuse, retries, failure accounting (pure: no kit import).

The judge here is a local function: these tests are about the runner's bookkeeping. Everything that involves a
judge over HTTP (the verdict cache across runs and endpoints, progress) is in test_judge_cache.py and
test_judge_progress.py, against the loopback server.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from vlmeval_ext.core.judge import (JudgeCallError, JudgeUnavailable, Step, VerdictCache, preflight, prompt_sha256,
                                    run_tasks)


@dataclass
class MajorityTask:
    """Five yes/no votes, majority of 5; efficient mode stops once 3 agree."""
    key: str
    question: str
    certain: float | None = None
    efficient: bool = False

    def prompt(self, call_id):
        return f'{self.question} [{call_id}]'

    def decide_without_judge(self):
        return self.certain

    def step(self, verdicts):
        votes = [1 if v.strip().startswith('1') else 0 for v in verdicts.values()]
        if self.efficient:
            if votes.count(1) >= 3 or votes.count(0) >= 3:
                return Step(score=float(votes.count(1) >= 3))
            asked = len(verdicts)
            need = 3 - max(votes.count(1), votes.count(0))
            return Step(need=[f'r{asked + i}' for i in range(need)], more=5 - asked - need)
        if not verdicts:
            return Step(need=[f'r{i}' for i in range(5)])
        return Step(score=float(votes.count(1) >= 3))


class CountingJudge:
    def __init__(self, reply='1', fail_on=None):
        self.calls, self.reply, self.fail_on = [], reply, fail_on or (lambda p: False)
        self.lock = threading.Lock()

    def __call__(self, prompt):
        with self.lock:
            self.calls.append(prompt)
        if self.fail_on(prompt):
            raise JudgeCallError('HTTP status 500')
        return self.reply(prompt) if callable(self.reply) else self.reply


def _cache(tmp_path, judge='j', endpoint=None, name='v.sqlite'):
    return VerdictCache(tmp_path / name, judge, endpoint)


def test_official_mode_asks_every_call_and_scores(tmp_path):
    judge = CountingJudge(reply=lambda p: '1' if 'yes' in p else '0')
    tasks = [MajorityTask('a', 'yes?'), MajorityTask('b', 'no?')]
    results, stats = run_tasks(tasks, judge, _cache(tmp_path), nproc=4, backoff=0, progress=False)
    assert results['a'].score == 1.0 and results['b'].score == 0.0
    assert len(judge.calls) == 10 and stats.calls_made == 10 and stats.failed_tasks == 0


def test_efficient_mode_skips_certain_items_and_stops_early(tmp_path):
    judge = CountingJudge(reply='1')
    tasks = [MajorityTask('a', 'q', efficient=True), MajorityTask('b', 'q', certain=0.0, efficient=True)]
    results, stats = run_tasks(tasks, judge, _cache(tmp_path), mode='efficient', backoff=0, progress=False)
    assert results['b'].score == 0.0 and stats.decided_without_judge == 1
    assert results['a'].score == 1.0 and len(judge.calls) == 3


def test_failed_call_marks_task_failed_never_zero_and_rerun_retries_only_it(tmp_path):
    judge = CountingJudge(reply='1', fail_on=lambda p: 'bad' in p)
    tasks = [MajorityTask('good', 'fine'), MajorityTask('bad', 'bad one')]
    results, stats = run_tasks(tasks, judge, _cache(tmp_path), retries=2, backoff=0, progress=False)
    assert results['good'].score == 1.0
    assert results['bad'].score is None and 'judge call' in results['bad'].failed
    assert stats.failed_keys == ['bad'] and stats.call_failures >= 1
    # Rerun with a healthy judge: only the failed task's calls are asked again.
    judge2 = CountingJudge(reply='0')
    results2, stats2 = run_tasks(tasks, judge2, _cache(tmp_path), backoff=0, progress=False)
    assert results2['good'].score == 1.0 and stats2.calls_cached == 5
    assert results2['bad'].score == 0.0 and all('bad one' in p for p in judge2.calls)


def test_verdicts_are_keyed_by_judge_endpoint_prompt_and_call_not_by_task(tmp_path):
    cache = _cache(tmp_path, 'judge-a', 'http://127.0.0.1:8000/v1/chat/completions')
    sha = prompt_sha256('p')
    assert cache.put('task-1', 'q#r1', sha, 'Score: 2') == 'Score: 2'
    assert cache.get(sha, 'q#r1') == 'Score: 2'
    assert cache.get(sha, 'q#r2') is None                                     # another repeat
    assert cache.get(prompt_sha256('p2'), 'q#r1') is None                     # another prompt
    assert _cache(tmp_path, 'judge-b', 'http://127.0.0.1:8000/v1/chat/completions').get(sha, 'q#r1') is None
    assert _cache(tmp_path, 'judge-a', 'http://127.0.0.1:8001/v1/chat/completions').get(sha, 'q#r1') is None
    assert _cache(tmp_path, 'judge-a', 'http://127.0.0.1:8000/v2/chat/completions').get(sha, 'q#r1') is None
    # The same judge at the same endpoint, written another way (a key in the URL, the default port spelled out),
    # from another task of another evaluation: the verdict is found.
    same = _cache(tmp_path, 'judge-a', 'http://user:secret@127.0.0.1:8000/v1/chat/completions/?key=secret')
    assert same.get(sha, 'q#r1') == 'Score: 2'
    # The first stored verdict wins: a second writer of the same key goes on with the stored one.
    assert same.put('task-9', 'q#r1', sha, 'Score: 0') == 'Score: 2'
    assert not any(b'secret' in p.read_bytes() for p in tmp_path.glob('v.sqlite*'))   # database and its WAL


def test_identical_calls_of_two_tasks_are_asked_once(tmp_path):
    judge = CountingJudge(reply='1')
    tasks = [MajorityTask('a', 'same'), MajorityTask('b', 'same'), MajorityTask('c', 'other')]
    results, stats = run_tasks(tasks, judge, _cache(tmp_path), nproc=8, backoff=0, progress=False)
    assert {k: s.score for k, s in results.items()} == {'a': 1.0, 'b': 1.0, 'c': 1.0}
    assert len(judge.calls) == 10 and stats.calls_made == 10 and stats.calls_shared == 5


def test_empty_reply_is_a_failure_and_preflight_stops_a_dead_judge():
    with pytest.raises(JudgeUnavailable, match='did not answer'):
        preflight(lambda p: '', retries=1, backoff=0)
    preflight(lambda p: 'ready', retries=0, backoff=0)


def test_duplicate_keys_and_unknown_mode_are_refused(tmp_path):
    cache = _cache(tmp_path)
    with pytest.raises(ValueError, match='unique'):
        run_tasks([MajorityTask('a', 'q'), MajorityTask('a', 'q')], CountingJudge(), cache, progress=False)
    with pytest.raises(ValueError, match='mode'):
        run_tasks([], CountingJudge(), cache, mode='fast', progress=False)
    with pytest.raises(ValueError, match='"cache" must be true or false'):
        VerdictCache(tmp_path / 'x.sqlite', 'j', enabled='no')
