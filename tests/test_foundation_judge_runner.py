"""The judge runner: rounds, caching, retries, failure accounting (pure: no kit import)."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import pytest

from vlmeval_ext.core.judge import (JudgeCallError, JudgeUnavailable, Step, VerdictCache, preflight, prompt_hash,
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
            return Step(need=[f'r{asked + i}' for i in range(3 - max(votes.count(1), votes.count(0)))])
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


def test_official_mode_asks_every_call_and_scores(tmp_path):
    judge = CountingJudge(reply=lambda p: '1' if 'yes' in p else '0')
    tasks = [MajorityTask('a', 'yes?'), MajorityTask('b', 'no?')]
    results, stats = run_tasks(tasks, judge, VerdictCache(str(tmp_path / 'v.jsonl'), 'j'), nproc=4, backoff=0)
    assert results['a'].score == 1.0 and results['b'].score == 0.0
    assert len(judge.calls) == 10 and stats.calls_made == 10 and stats.failed_tasks == 0


def test_efficient_mode_skips_certain_items_and_stops_early(tmp_path):
    judge = CountingJudge(reply='1')
    tasks = [MajorityTask('a', 'q', efficient=True), MajorityTask('b', 'q', certain=0.0, efficient=True)]
    results, stats = run_tasks(tasks, judge, VerdictCache(str(tmp_path / 'v.jsonl'), 'j'), mode='efficient',
                               backoff=0)
    assert results['b'].score == 0.0 and stats.decided_without_judge == 1
    assert results['a'].score == 1.0 and len(judge.calls) == 3


def test_failed_call_marks_task_failed_never_zero_and_rerun_retries_only_it(tmp_path):
    cache_path = str(tmp_path / 'v.jsonl')
    judge = CountingJudge(reply='1', fail_on=lambda p: 'bad' in p)
    tasks = [MajorityTask('good', 'fine'), MajorityTask('bad', 'bad one')]
    results, stats = run_tasks(tasks, judge, VerdictCache(cache_path, 'j'), retries=2, backoff=0)
    assert results['good'].score == 1.0
    assert results['bad'].score is None and 'judge call' in results['bad'].failed
    assert stats.failed_keys == ['bad'] and stats.call_failures >= 1
    # Rerun with a healthy judge: only the failed task's calls are asked again.
    judge2 = CountingJudge(reply='0')
    results2, stats2 = run_tasks(tasks, judge2, VerdictCache(cache_path, 'j'), backoff=0)
    assert results2['good'].score == 1.0 and stats2.calls_cached == 5
    assert results2['bad'].score == 0.0 and all('bad one' in p for p in judge2.calls)


def test_cache_survives_a_torn_last_line_and_ignores_other_judges(tmp_path):
    path = tmp_path / 'v.jsonl'
    cache = VerdictCache(str(path), 'judge-a')
    cache.put('t', 'r0', prompt_hash('p'), 'Score: 2')
    with open(path, 'a') as f:
        f.write('{"task": "t", "call": "r1", "pro')      # a run killed mid-write
    reread = VerdictCache(str(path), 'judge-a')
    assert reread.get('t', 'r0', prompt_hash('p')) == 'Score: 2'
    assert reread.torn_lines == 1
    assert VerdictCache(str(path), 'judge-b').get('t', 'r0', prompt_hash('p')) is None
    # A changed prompt never reuses a verdict.
    assert reread.get('t', 'r0', prompt_hash('p2')) is None


def test_parallel_writers_interleave_whole_lines(tmp_path):
    path = str(tmp_path / 'v.jsonl')
    caches = [VerdictCache(path, 'j') for _ in range(4)]
    threads = [threading.Thread(target=lambda c=c, n=n: [c.put(f't{n}', f'r{i}', 'h', 'x' * 500) for i in range(50)])
               for n, c in enumerate(caches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = open(path).read().splitlines()
    assert len(lines) == 200 and all(json.loads(line)['reply'] == 'x' * 500 for line in lines)


def test_empty_reply_is_a_failure_and_preflight_stops_a_dead_judge():
    with pytest.raises(JudgeUnavailable, match='did not answer'):
        preflight(lambda p: '', retries=1, backoff=0)
    preflight(lambda p: 'ready', retries=0, backoff=0)


def test_duplicate_keys_and_unknown_mode_are_refused(tmp_path):
    cache = VerdictCache(str(tmp_path / 'v.jsonl'), 'j')
    with pytest.raises(ValueError, match='unique'):
        run_tasks([MajorityTask('a', 'q'), MajorityTask('a', 'q')], CountingJudge(), cache)
    with pytest.raises(ValueError, match='mode'):
        run_tasks([], CountingJudge(), cache, mode='fast')
