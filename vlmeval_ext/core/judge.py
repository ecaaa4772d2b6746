"""The judge protocol runner shared by every LLM-judged score of vlmeval-ext, and its verdict cache.

A benchmark describes each judged score as a JudgeTask (pure: prompts + a step function that says which calls
it still needs or what the score is). The runner asks the judge in parallel, reuses every verdict it already has,
stores every new verdict the moment it arrives, retries failed calls, and never turns a failure into a score: a
task whose call still fails after the retries is reported as failed, excluded from means and asked again by the
next run.

Verdict cache. One SQLite database per user (WAL mode, so several evaluations read and write it at once):
`$VLMEVAL_EXT_CACHE/verdicts.sqlite`, where VLMEVAL_EXT_CACHE defaults to `$XDG_CACHE_HOME/vlmeval-ext` (else
`~/.cache/vlmeval-ext`). Put it on a local disk (SQLite's WAL mode does not work on network file systems). A
verdict is the judge's raw reply, keyed by what determines it:
  - the judge model name,
  - the judge endpoint as host:port/path (see `endpoint_identity`): two servers on one host, or two routes of one
    gateway, are different judges; credentials and the query string are never stored,
  - the SHA-256 of the exact prompt text,
  - the call id within its task, which carries the repeat number of a repeated prompt ('q#r3': repeat 3), so the
    repeats of a protocol stay distinct verdicts.
The task is not part of the key: the same call asked again (another work dir, a colleague's run, a subset of the
benchmark, another mode) reuses the verdict, and a changed prediction changes only its own prompts. A protocol that
wants independent verdicts for one prompt text gives them distinct call ids (R-Bench's official mode numbers the
repeats on across scores). Replies are parsed when used, never when stored, so a parser change applies to stored
verdicts too.
Bypass it with `--judge-args '{"cache": false}'`: nothing is read from or written to the database.

Beside the predictions, `<stem>_<judge>_verdicts.jsonl` logs the calls made by evaluations of that file (one line
per call: task, call id, prompt hash, judge, endpoint, reply): a readable record of what was paid for. It is never
read back.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import queue
import sqlite3
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Protocol, TextIO
from urllib.parse import urlsplit

from tqdm import tqdm

from vlmeval_ext.errors import ExtError

logger = logging.getLogger('vlmeval_ext.judge')

MODES = ('official', 'efficient')
CACHE_ENV = 'VLMEVAL_EXT_CACHE'
STORE_FILE = 'verdicts.sqlite'
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 60.0


@dataclass
class Step:
    """What a task says after seeing the verdicts so far."""
    score: float | None = None                         # final score when decided
    need: list[str] = field(default_factory=list)     # call ids still to ask
    failed: str | None = None                         # reason when the task cannot be scored
    more: int = 0                                     # calls it may ask after `need` (upper bound; progress only)


class JudgeTask(Protocol):
    """One judged score. Call ids name the task's calls and carry the repeat number of a repeated prompt ('q#r3'):
    the runner treats two calls with the same prompt text and call id as one verdict (asked once, cached), within
    a run and across runs, so a protocol that wants two independent verdicts gives them two ids."""
    key: str                                          # unique and stable within one evaluation

    def prompt(self, call_id: str) -> str: ...

    def step(self, verdicts: dict[str, str]) -> Step: ...

    def decide_without_judge(self) -> float | None: ...


class JudgeCallError(RuntimeError):
    """A judge call that failed (HTTP error, timeout, empty or unusable reply)."""


class JudgeUnavailable(ExtError, RuntimeError):
    """The judge answered nothing usable to the preflight call: stop before the run spends time."""


class VerdictCacheError(RuntimeError):
    """The verdict database cannot be opened or was written by an incompatible version."""


@dataclass
class RunStats:
    tasks: int = 0
    decided_without_judge: int = 0
    calls_made: int = 0           # distinct calls sent that returned a verdict in this run
    calls_cached: int = 0         # distinct verdicts reused from the cache
    calls_shared: int = 0         # further uses of a verdict by another task asking the very same call
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


# ------------------------------------------------------------------------------------------ verdict keys
def prompt_sha256(prompt: str) -> str:
    return hashlib.sha256(prompt.encode('utf-8')).hexdigest()


def endpoint_identity(url: str | None) -> str:
    """The part of a judge URL that tells judge services apart: 'host:port/path' ('' when there is no URL).

    The port is kept because one host serves several models on several ports (two vLLM servers on :8000 and
    :8001), the path because one gateway routes paths to different backends; the scheme's default port is written
    out, so 'https://h/v1' and 'https://h:443/v1' are one endpoint. User, password and query are dropped: they can
    hold credentials, which are never stored. A value without a scheme is read as host[:port][/path].
    """
    if not url:
        return ''
    text = str(url).strip()
    parts = urlsplit(text if '://' in text else f'//{text}')
    try:
        port = parts.port
    except ValueError as err:
        raise ValueError(f'judge endpoint {parts.hostname!r}: invalid port ({err})') from None
    port = port or {'http': 80, 'https': 443}.get(parts.scheme.lower())
    host = (parts.hostname or '').lower()
    if ':' in host:
        host = f'[{host}]'           # IPv6: bracketed, so host and port stay apart
    path = parts.path.rstrip('/')
    return f'{host}:{port}{path}' if port else f'{host}{path}'


def endpoint_hostname(identity: str | None) -> str | None:
    """The host of an endpoint identity or URL (what results record as `endpoint_host`); None without one."""
    if not identity:
        return None
    text = str(identity).strip()
    return urlsplit(text if '://' in text else f'//{text}').hostname or None


def cache_dir() -> Path:
    """The per-user cache folder: $VLMEVAL_EXT_CACHE, else $XDG_CACHE_HOME/vlmeval-ext, else ~/.cache/vlmeval-ext."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return Path(base) / 'vlmeval-ext'


def shared_store_path() -> Path:
    return cache_dir() / STORE_FILE


# ------------------------------------------------------------------------------------------ the store
_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    judge TEXT NOT NULL,           -- judge model name
    endpoint TEXT NOT NULL,        -- host:port/path of the judge service ('' for a local judge)
    prompt_sha256 TEXT NOT NULL,   -- SHA-256 (hex) of the exact prompt text
    call TEXT NOT NULL,            -- call id within its task, with the repeat number ('q#r3')
    reply TEXT NOT NULL,           -- the judge's raw reply
    created_at REAL NOT NULL,      -- unix time
    PRIMARY KEY (judge, endpoint, prompt_sha256, call)
) WITHOUT ROWID
"""


class VerdictStore:
    """The SQLite verdict database (WAL mode: readers never block, writers queue on a busy timeout)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                       check_same_thread=False)
            self._setup()
        except (OSError, sqlite3.Error) as err:
            raise VerdictCacheError(
                f'verdict cache {self.path}: cannot use it ({err}); set {CACHE_ENV} to a writable folder on a local '
                'disk, or pass --judge-args \'{"cache": false}\'') from err

    def _setup(self) -> None:
        db = self._db
        db.execute(f'PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}')
        if db.execute('PRAGMA journal_mode').fetchone()[0].lower() != 'wal':
            mode = db.execute('PRAGMA journal_mode = WAL').fetchone()[0]
            if mode.lower() != 'wal':
                raise sqlite3.OperationalError(f'cannot switch to WAL mode (journal mode stays {mode!r})')
        db.execute('PRAGMA synchronous = NORMAL')     # WAL + NORMAL: a killed process loses no committed verdict
        version = db.execute('PRAGMA user_version').fetchone()[0]
        if version == 0:
            db.execute('BEGIN IMMEDIATE')
            try:
                db.execute(_SCHEMA)
                db.execute(f'PRAGMA user_version = {SCHEMA_VERSION}')
                db.execute('COMMIT')
            except sqlite3.Error:
                db.execute('ROLLBACK')
                raise
        elif version != SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f'schema version {version}, this vlmeval-ext reads version {SCHEMA_VERSION} '
                                        '(written by another version: point VLMEVAL_EXT_CACHE elsewhere)')

    def get(self, judge: str, endpoint: str, prompt_sha: str, call: str) -> str | None:
        with self._lock:
            row = self._db.execute('SELECT reply FROM verdicts WHERE judge = ? AND endpoint = ? AND prompt_sha256 = ? '
                                   'AND call = ?', (judge, endpoint, prompt_sha, call)).fetchone()
        return None if row is None else row[0]

    def put(self, judge: str, endpoint: str, prompt_sha: str, call: str, reply: str) -> str:
        """Store a verdict unless one is already stored for this key; returns the stored one (the first writer
        wins, so two evaluations asking the same call at once go on with the same verdict)."""
        key = (judge, endpoint, prompt_sha, call)
        with self._lock:
            cur = self._db.execute('INSERT OR IGNORE INTO verdicts VALUES (?, ?, ?, ?, ?, ?)',
                                   (*key, reply, time.time()))
            if cur.rowcount == 1:
                return reply
            row = self._db.execute('SELECT reply FROM verdicts WHERE judge = ? AND endpoint = ? AND '
                                   'prompt_sha256 = ? AND call = ?', key).fetchone()
        return reply if row is None else row[0]

    def count(self, judge: str | None = None, endpoint: str | None = None) -> int:
        query, args = 'SELECT COUNT(*) FROM verdicts', []
        clauses = [(col, val) for col, val in (('judge', judge), ('endpoint', endpoint)) if val is not None]
        if clauses:
            query += ' WHERE ' + ' AND '.join(f'{col} = ?' for col, _ in clauses)
            args = [val for _, val in clauses]
        with self._lock:
            return self._db.execute(query, args).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class VerdictCache:
    """The verdicts of one judge at one endpoint, as run_tasks reads and writes them.

    store: the SQLite file (use `VerdictCache.shared` for the per-user one); endpoint: the judge's URL or host
    (reduced to endpoint_identity); log: the work dir's JSONL log of calls made (optional); enabled=False bypasses
    the store (nothing read or written; the log still records the calls).
    """

    def __init__(self, store: str | os.PathLike | None, judge: str, endpoint: str | None = None, *,
                 log: str | os.PathLike | None = None, enabled: bool = True):
        if not isinstance(enabled, bool):
            raise ValueError(f'--judge-args "cache" must be true or false, not {enabled!r}')
        if enabled and store is None:
            raise ValueError('VerdictCache: a store path is needed unless enabled=False')
        self.judge, self.endpoint, self.enabled = judge, endpoint_identity(endpoint), enabled
        self.store = VerdictStore(store) if enabled else None
        self.log_path = Path(log) if log else None

    @classmethod
    def shared(cls, judge: str, endpoint: str | None, *, log: str | os.PathLike | None = None,
               enabled: bool = True) -> 'VerdictCache':
        """The per-user verdict cache (see the module docstring for where it lives)."""
        return cls(shared_store_path(), judge, endpoint, log=log, enabled=enabled)

    @property
    def location(self) -> str:
        return str(self.store.path) if self.store else 'off'

    def get(self, prompt_sha: str, call_id: str) -> str | None:
        return self.store.get(self.judge, self.endpoint, prompt_sha, call_id) if self.store else None

    def put(self, task_key: str, call_id: str, prompt_sha: str, reply: str) -> str:
        """Store a new verdict (and log the call); returns the verdict to use (see VerdictStore.put)."""
        stored = self.store.put(self.judge, self.endpoint, prompt_sha, call_id, reply) if self.store else reply
        if self.log_path is not None:
            self._log({'task': task_key, 'call': call_id, 'prompt': prompt_sha, 'judge': self.judge,
                       'endpoint': self.endpoint, 'reply': reply})
        return stored

    def _log(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False) + '\n'
        # One locked append of a whole line: evaluations logging to one file interleave whole lines only.
        with open(self.log_path, 'a', encoding='utf-8') as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.write(line)
                f.flush()
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------------ judge calls
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


DEAD_JUDGE_ADVICE = (
    'check --judge, --judge-base-url / OPENAI_API_BASE and the API key. Without an API judge, `--judge offline` '
    "gives R-Bench's offline approximation (not comparable with the paper) and GRAB's official and normalized "
    'scores (llm_extracted skipped); ReMI and RoCOCO need no judge; `<Dataset>-RC` of a kit benchmark needs its '
    "base dataset's judge")


def preflight(call: Callable[[str], str], retries: int = 2, backoff: float = 0.5) -> None:
    """One tiny call before a long evaluation, so a dead judge stops the run at once with a clear message."""
    try:
        call_with_retries(call, 'Reply with the single word: ready', retries, backoff)
    except JudgeCallError as err:
        raise JudgeUnavailable(f'the judge did not answer a test call ({err}); {DEAD_JUDGE_ADVICE}') from err


def resume_line(desc: str, reused: int, to_ask: int, bounded: bool, cache: VerdictCache) -> str:
    """'<desc>: N verdicts reused, M to ask' (efficient protocols: 'at most M', as they may stop early)."""
    ask = f'at most {to_ask}' if bounded else f'{to_ask}'
    where = f'verdict cache {cache.location}' if cache.enabled else 'verdict cache off'
    return f'[{desc}] {reused} verdicts reused, {ask} to ask ({where})'


class _Run:
    """One run_tasks call: tasks advance as far as known verdicts allow; each distinct call is asked once."""

    def __init__(self, tasks: list, call, cache: VerdictCache, stats: RunStats, retries: int, backoff: float):
        self.call, self.cache, self.stats, self.retries, self.backoff = call, cache, stats, retries, backoff
        self.pending: dict[str, JudgeTask] = {t.key: t for t in tasks}
        self.results: dict[str, Step] = {}
        self.verdicts: dict[str, dict[str, str]] = {k: {} for k in self.pending}
        self.asking: dict[str, set[str]] = {k: set() for k in self.pending}     # call ids waited for, per task
        self.known: dict[tuple[str, str], str] = {}                           # (prompt sha, call) -> verdict
        self.waiting: dict[tuple[str, str], list[tuple[str, str]]] = {}         # call key -> [(task key, call id)]
        self.to_submit: list[tuple[tuple[str, str], str, str]] = []             # (call key, prompt, task key)
        self.more: dict[str, int] = {}
        self.asked = 0                                                        # calls answered or failed

    def finish(self, key: str, step: Step) -> None:
        self.results[key] = step
        del self.pending[key]
        self.more.pop(key, None)

    def advance(self, key: str) -> None:
        """Step one task with every verdict known; queue the calls nobody has asked yet."""
        task = self.pending[key]
        while True:
            step = task.step(self.verdicts[key])
            if step.score is not None or step.failed:
                self.finish(key, step)
                return
            if not step.need:
                raise RuntimeError(f'judge task {key} neither decided nor asked for calls')
            progressed = False
            for call_id in step.need:
                if call_id in self.verdicts[key]:
                    raise RuntimeError(f'judge task {key} asked again for call {call_id}')
                if call_id in self.asking[key]:
                    continue
                prompt = task.prompt(call_id)
                ckey = (prompt_sha256(prompt), call_id)
                if ckey in self.known:
                    self.verdicts[key][call_id] = self.known[ckey]
                    self.stats.calls_shared += 1
                    progressed = True
                elif ckey in self.waiting:
                    self.waiting[ckey].append((key, call_id))
                    self.asking[key].add(call_id)
                    self.stats.calls_shared += 1
                else:
                    reply = self.cache.get(*ckey)
                    if reply is not None:
                        self.known[ckey] = self.verdicts[key][call_id] = reply
                        self.stats.calls_cached += 1
                        progressed = True
                    else:
                        self.waiting[ckey] = [(key, call_id)]
                        self.asking[key].add(call_id)
                        self.to_submit.append((ckey, prompt, key))
            if not progressed:
                self.more[key] = max(0, int(step.more))
                return

    def receive(self, ckey: tuple[str, str], outcome: str | JudgeCallError) -> list[str]:
        """A call came back (a reply or its final failure): hand it to every task waiting for it."""
        waiters = self.waiting.pop(ckey)
        self.asked += 1
        if isinstance(outcome, JudgeCallError):
            self.stats.call_failures += 1
            for key, call_id in waiters:
                if key in self.pending:
                    self.finish(key, Step(failed=f'judge call {call_id}: {outcome}'))
            return []
        first_key, first_call = waiters[0]
        reply = self.cache.put(first_key, first_call, ckey[0], outcome)
        self.known[ckey] = reply
        self.stats.calls_made += 1
        touched = []
        for key, call_id in waiters:
            if key in self.pending:
                self.verdicts[key][call_id] = reply
                self.asking[key].discard(call_id)
                touched.append(key)
        return touched

    def remaining(self) -> int:
        """Calls still to ask as far as known now: queued + in flight + what unfinished tasks may still ask."""
        return len(self.waiting) + sum(self.more.get(k, 0) for k in self.pending)


def run_tasks(tasks: Iterable[JudgeTask], call: Callable[[str], str], cache: VerdictCache, *,
              mode: str = 'official', nproc: int = 4, retries: int = 3, backoff: float = 0.5,
              desc: str = 'judging', progress: TextIO | None | bool = True) -> tuple[dict[str, Step], RunStats]:
    """Drive every task to a score or a failure. Returns ({task key: final Step}, stats).

    Before the first call it prints one line, '<desc>: N verdicts reused, M to ask', and then shows progress in
    calls (done/total, rate, ETA), left on screen. progress: a stream for both (default stderr/stdout), False: none.
    """
    if mode not in MODES:
        raise ValueError(f'unknown judge mode {mode!r}; choose one of {MODES}')
    tasks = list(tasks)
    stats = RunStats(tasks=len(tasks))
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError('judge task keys must be unique')
    decided: dict[str, Step] = {}
    judged = []
    for task in tasks:
        certain = task.decide_without_judge() if mode == 'efficient' else None
        if certain is not None:
            decided[task.key] = Step(score=float(certain))
            stats.decided_without_judge += 1
        else:
            judged.append(task)

    run = _Run(judged, call, cache, stats, retries, backoff)
    for key in list(run.pending):
        run.advance(key)
    bounded = any(run.more.values())
    to_ask = run.remaining()
    if progress is not False:
        out = progress if progress not in (True, None) else sys.stdout
        print(resume_line(desc, stats.calls_cached, to_ask, bounded, cache), file=out, flush=True)
    bar = tqdm(total=to_ask, desc=desc, unit=' call', leave=True, disable=progress is False or not to_ask,
               file=None if progress in (True, None) else progress, dynamic_ncols=True,
               bar_format='{desc}: {n_fmt}/{total_fmt} calls [{elapsed}<{remaining}, {rate_fmt}]')
    finished: queue.SimpleQueue = queue.SimpleQueue()      # (call key, future), put by the worker threads
    with ThreadPoolExecutor(max_workers=max(1, nproc)) as pool:
        in_flight = 0

        def submit_queued() -> int:
            for ckey, prompt, _task_key in run.to_submit:
                future = pool.submit(call_with_retries, call, prompt, retries, backoff, stats)
                future.add_done_callback(lambda fut, ckey=ckey: finished.put((ckey, fut)))
            submitted = len(run.to_submit)
            run.to_submit.clear()
            return submitted

        in_flight += submit_queued()
        while in_flight:
            batch = [finished.get()]
            while not finished.empty():          # everything that came back meanwhile, in one pass
                batch.append(finished.get())
            in_flight -= len(batch)
            touched = []
            for ckey, fut in batch:
                try:
                    outcome = fut.result()
                except JudgeCallError as err:
                    outcome = err
                touched.extend(run.receive(ckey, outcome))
            for key in dict.fromkeys(touched):
                if key in run.pending:
                    run.advance(key)
            in_flight += submit_queued()
            bar.total = run.asked + run.remaining()
            if run.asked > bar.n:
                bar.update(run.asked - bar.n)     # redraws at most every 0.1 s: log files stay small
    bar.close()
    if run.pending:    # every call came back, yet a task still waits: a task that broke the protocol
        raise RuntimeError(f'judge tasks left undecided: {sorted(run.pending)[:5]}')
    results = {**decided, **run.results}
    stats.failed_keys = sorted(k for k, s in results.items() if s.failed)
    stats.failed_tasks = len(stats.failed_keys)
    return {t.key: results[t.key] for t in tasks}, stats
