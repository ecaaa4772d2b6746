"""The judge protocol runner shared by every LLM-judged score of vlmeval-ext.

A benchmark describes each judged score as a JudgeTask (pure: prompts + a step function that says which calls
it still needs or what the score is). The runner asks the judge in parallel rounds, caches every verdict the
moment it arrives (append-only JSONL, locked per line, so a killed run loses nothing and two evaluations in one
work dir do not corrupt each other), retries failed calls, and never turns a failure into a score: a task whose
call still fails after the retries is reported as failed, excluded from means and retried by the next run.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from tqdm import tqdm

from vlmeval_ext.errors import ExtError

logger = logging.getLogger('vlmeval_ext.judge')

MODES = ('official', 'efficient')


@dataclass
class Step:
    """What a task says after seeing the verdicts so far."""
    score: float | None = None                         # final score when decided
    need: list[str] = field(default_factory=list)     # call ids still to ask
    failed: str | None = None                         # reason when the task cannot be scored


class JudgeTask(Protocol):
    key: str                                          # unique and stable within one evaluation

    def prompt(self, call_id: str) -> str: ...

    def step(self, verdicts: dict[str, str]) -> Step: ...

    def decide_without_judge(self) -> float | None: ...


class JudgeCallError(RuntimeError):
    """A judge call that failed (HTTP error, timeout, empty or unusable reply)."""


class JudgeUnavailable(ExtError, RuntimeError):
    """The judge answered nothing usable to the preflight call: stop before the run spends time."""


@dataclass
class RunStats:
    tasks: int = 0
    decided_without_judge: int = 0
    calls_made: int = 0           # calls sent that returned a verdict in this run
    calls_cached: int = 0         # verdicts reused from the cache
    call_failures: int = 0        # calls that failed after all retries
    attempts: int = 0             # every HTTP attempt, retries included
    failed_tasks: int = 0
    failed_keys: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count_attempt(self) -> None:
        with self._lock:  # called from worker threads
            self.attempts += 1

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in self.__dict__.items() if k != '_lock'}


def prompt_hash(prompt: str) -> str:
    return hashlib.sha1(prompt.encode('utf-8')).hexdigest()[:16]


class VerdictCache:
    """Append-only JSONL of verdicts: {"task", "call", "prompt", "judge", "reply"} per line.

    A verdict is reused only for the same task, call, prompt hash and judge name, so a changed prompt or judge
    never reuses stale verdicts. A torn last line (a run killed mid-write) is reported and its call asked again.
    """

    def __init__(self, path: str, judge_name: str):
        self.path, self.judge_name = path, judge_name
        self._verdicts: dict[tuple[str, str, str], str] = {}
        self.torn_lines = 0
        if os.path.exists(path):
            self._load()

    def _load(self) -> None:
        with open(self.path, encoding='utf-8') as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    if rec['judge'] == self.judge_name:
                        self._verdicts[(rec['task'], rec['call'], rec['prompt'])] = rec['reply']
                except (ValueError, KeyError, TypeError):
                    self.torn_lines += 1
                    logger.warning('%s line %d is not a complete verdict record (a killed run?); '
                                   'its call will be asked again', self.path, lineno)

    def get(self, task_key: str, call_id: str, phash: str) -> str | None:
        return self._verdicts.get((task_key, call_id, phash))

    def put(self, task_key: str, call_id: str, phash: str, reply: str) -> None:
        self._verdicts[(task_key, call_id, phash)] = reply
        line = json.dumps({'task': task_key, 'call': call_id, 'prompt': phash, 'judge': self.judge_name,
                           'reply': reply}, ensure_ascii=False) + '\n'
        # One locked, flushed write per verdict: concurrent evaluators interleave whole lines only.
        with open(self.path, 'a', encoding='utf-8') as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def call_with_retries(call: Callable[[str], str], prompt: str, retries: int, backoff: float,
                      stats: RunStats | None = None) -> str:
    """Call the judge up to 1 + retries times; an empty reply counts as a failure. Raises JudgeCallError."""
    last = None
    for attempt in range(retries + 1):
        if stats is not None:
            stats.count_attempt()
        try:
            reply = call(prompt)
            if reply is None or not str(reply).strip():
                raise JudgeCallError('empty reply')
            return str(reply)
        except JudgeCallError as err:
            last = err
        if attempt < retries and backoff:
            time.sleep(backoff * (2 ** attempt))
    raise JudgeCallError(f'failed after {retries + 1} attempts: {last}')


def preflight(call: Callable[[str], str], retries: int = 2, backoff: float = 0.5) -> None:
    """One tiny call before a long evaluation, so a dead judge stops the run at once with a clear message."""
    try:
        call_with_retries(call, 'Reply with the single word: ready', retries, backoff)
    except JudgeCallError as err:
        raise JudgeUnavailable(f'the judge did not answer a test call ({err}); check --judge, --judge-base-url / '
                               'OPENAI_API_BASE and the API key, or choose the offline judge') from err


def run_tasks(tasks: Iterable[JudgeTask], call: Callable[[str], str], cache: VerdictCache, *,
              mode: str = 'official', nproc: int = 4, retries: int = 3, backoff: float = 0.5,
              desc: str = 'judging') -> tuple[dict[str, Step], RunStats]:
    """Drive every task to a score or a failure. Returns ({task key: final Step}, stats)."""
    if mode not in MODES:
        raise ValueError(f'unknown judge mode {mode!r}; choose one of {MODES}')
    tasks = list(tasks)
    stats = RunStats(tasks=len(tasks))
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError('judge task keys must be unique')
    results: dict[str, Step] = {}
    verdicts: dict[str, dict[str, str]] = {t.key: {} for t in tasks}
    pending: dict[str, JudgeTask] = {}
    for task in tasks:
        certain = task.decide_without_judge() if mode == 'efficient' else None
        if certain is not None:
            results[task.key] = Step(score=float(certain))
            stats.decided_without_judge += 1
        else:
            pending[task.key] = task

    bar = tqdm(total=len(pending), desc=desc, unit='item', leave=False, disable=not pending)
    with ThreadPoolExecutor(max_workers=max(1, nproc)) as pool:
        while pending:
            round_calls = []
            for key, task in list(pending.items()):
                step = task.step(verdicts[key])
                if step.score is not None or step.failed:
                    results[key] = step
                    del pending[key]
                    bar.update(1)
                    continue
                if not step.need:
                    raise RuntimeError(f'judge task {key} neither decided nor asked for calls')
                for call_id in step.need:
                    if call_id in verdicts[key]:
                        raise RuntimeError(f'judge task {key} asked again for call {call_id}')
                    prompt = task.prompt(call_id)
                    phash = prompt_hash(prompt)
                    cached = cache.get(key, call_id, phash)
                    if cached is not None:
                        verdicts[key][call_id] = cached
                        stats.calls_cached += 1
                    else:
                        round_calls.append((key, call_id, prompt, phash))
            if not round_calls:
                continue
            futures = {pool.submit(call_with_retries, call, prompt, retries, backoff, stats): (key, cid, phash)
                       for key, cid, prompt, phash in round_calls}
            for fut in as_completed(futures):
                key, cid, phash = futures[fut]
                try:
                    reply = fut.result()
                except JudgeCallError as err:
                    stats.call_failures += 1
                    if key in pending:
                        results[key] = Step(failed=f'judge call {cid}: {err}')
                        del pending[key]
                        bar.update(1)
                    continue
                cache.put(key, cid, phash, reply)
                stats.calls_made += 1
                verdicts[key][cid] = reply
    bar.close()
    stats.failed_keys = sorted(k for k, s in results.items() if s.failed)
    stats.failed_tasks = len(stats.failed_keys)
    return results, stats
