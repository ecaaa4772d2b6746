"""The judge our datasets use: the kit's own judge (built by its `build_judge`) behind a verdict cache.

A kit-dialect `evaluate` builds its judge with the kit's `build_judge` and hands it to its scoring (GRAB's
`evaluate_with`, R-Bench's `score_items`); the plugin's classes (vlmeval_ext.datasets) hand the same scoring a
`CachedJudge` instead: it has the kit judge's `generate(prompt)` contract (a reply,
or the kit's failure text) and adds

- the verdict cache: one SQLite database per user, `$VLMEVAL_EXT_CACHE/verdicts.sqlite` (default
  `$XDG_CACHE_HOME/vlmeval-ext`, else `~/.cache/vlmeval-ext`; WAL mode, several evaluations at once; keep it on a
  local disk). A verdict is keyed by everything that decides it: the judge name, the endpoint (host:port/path,
  never credentials), the parameters sent (model id, system prompt, sampling parameters, extra body fields), the
  SHA-256 of the prompt, and the slot: the k-th time one evaluation asks the very same prompt is slot k, so the
  repeats of a protocol stay distinct verdicts and a rerun finds each of them. A verdict is stored the moment it
  arrives (a killed run loses none); configured API keys are masked out of a reply first.
- counted retries with backoff (`judge_retries`, `judge_backoff`); a call that still fails returns the kit's
  failure text, which our datasets count as a judge failure, never as a score;
- a prompt the judge rejects for good (HTTP 4xx other than 401, 402, 403, 404, 407, 408 and 429: a content
  filter, a prompt longer than its context) is that one item's judge failure, counted and reported; it is not a
  sign that the judge is down, and it is remembered in the verdict cache, so a rerun does not pay for it again
  (`--judge-args '{"judge_retry_rejected": true}'` asks the remembered ones again);
- rate limits (HTTP 429): the call waits (the server's `Retry-After`, else a backoff growing to 60 s) and is
  asked again, without using up its retries, and the number of calls in flight adapts: halved at each rate
  limit (never below 1), one more after as many answers in a row as calls are allowed, never above the number
  the kit's threads start with. A run under a rate limit is slower, never poorer. Only when no call at all has
  been answered for 10 minutes (or the server says the quota is used up) is the judge down;
- a judge that is down: after 10 consecutive failed calls, or when every call of the last 30 s failed, no
  further call is made; the evaluation reports the missing verdicts (vlmeval_ext.datasets) and the same command
  resumes;
- a store that fails (disk full, locked by another process for longer than its busy timeout): no further call
  is made, the verdicts already received are written to `<stem>_unstored_verdicts.jsonl` beside the
  predictions, and the next evaluation of that file imports them;
- Ctrl-C (vlmeval_ext.interrupt): no further call is made.

Beside the predictions, `<stem>_<judge>_verdicts.jsonl` logs the calls made (a readable record; never read back).
Protocol options of ours (PLUGIN_OPTIONS) never reach the kit's judge or its HTTP payload.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import sys
import threading
import time
from collections import deque
from pathlib import Path
from urllib.parse import urlsplit

from vlmeval_ext import run_context
from vlmeval_ext.dataset.utils.exact_io import FAIL_MSG
from vlmeval_ext.errors import ExtError
from vlmeval_ext.interrupt import STOP

CACHE_ENV = 'VLMEVAL_EXT_CACHE'
STORE_FILE = 'verdicts.sqlite'
SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 60.0
OFFLINE_JUDGES = ('offline', 'offline-minilm')
# Judge arguments that are ours: read by vlmeval_ext.datasets, never handed to the kit's judge.
PLUGIN_OPTIONS = ('cache', 'judge_retries', 'judge_backoff', 'judge_retry_rejected')
# The protocol option of our benchmarks that the kit dialect reads itself (R-Bench's and GRAB's evaluate).
PROTOCOL_OPTIONS = ('judge_mode', 'caption_seed')
JUDGE_MODES = ('official', 'efficient')
DOWN_AFTER_FAILURES = 10
DOWN_WINDOW_S = 30.0
# HTTP statuses that say "this judge, not this prompt": a bad key, no such model, a timeout, a rate limit. Every
# other 4xx rejects the one prompt (a content filter, a prompt over the context length): not asked again.
NOT_PROMPT_REJECTIONS = (401, 402, 403, 404, 407, 408, 429)
RATE_LIMIT_WAIT_MAX_S = 60.0        # one wait after a rate limit, at most (a longer Retry-After is capped)
RATE_LIMIT_DOWN_S = 600.0           # rate limited with no call answered for this long: the judge is down
MAX_IN_FLIGHT = 64                  # the concurrency the judge starts with (the kit's threads are fewer)
PROBE_PROMPT = 'Reply with the single word: ready'
DEAD_JUDGE_ADVICE = (
    "check --judge, --judge-base-url / OPENAI_API_BASE and the API key. Without an API judge, `--judge offline` gives "
    "R-Bench's offline approximation (not comparable with the paper) and GRAB's official and normalized scores "
    "(llm_extracted skipped); ReMI and RoCOCO need no judge; `<Dataset>-RC` of a kit benchmark needs its base "
    "dataset's judge")


class JudgeUnavailable(ExtError, RuntimeError):
    """The judge answered nothing usable to the test call: stop before the evaluation spends time."""


class VerdictCacheError(ExtError):
    """The verdict database cannot be used (one line: what is wrong and the way out)."""


class JudgeOptionError(ExtError, ValueError):
    """A judge argument of ours with a value we do not take."""


# ------------------------------------------------------------------------------------------------ options
_TRUE, _FALSE = ('true', 'yes', 'on', '1'), ('false', 'no', 'off', '0')


def flag(value, name: str) -> bool:
    """true / false, also as the obvious spellings ("false", "no", "off", 0, 1)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise JudgeOptionError(f'--judge-args "{name}" must be true or false, not {value!r}')


def check_judge_options(options: dict) -> dict:
    """Our judge arguments, checked and normalised: cache (bool), judge_retries (int >= 0), judge_backoff
    (seconds >= 0), judge_retry_rejected (bool), judge_mode (official / efficient), caption_seed (R-Bench's
    efficient mode: int >= 0). Every error is one line, before
    any work."""
    out = {}
    for name in ('cache', 'judge_retry_rejected'):
        if name in options:
            out[name] = flag(options[name], name)
    for name, kind, low in (('judge_retries', int, 0), ('judge_backoff', float, 0)):
        if name in options:
            value = options[name]
            try:
                number = kind(value)
            except (TypeError, ValueError):
                number = None
            if isinstance(value, bool) or number is None or number < low or (kind is int and number != value):
                raise JudgeOptionError(f'--judge-args "{name}" must be a {"whole " if kind is int else ""}number '
                                       f'>= {low}, not {value!r}')
            out[name] = number
    if 'judge_mode' in options:
        mode = options['judge_mode']
        if mode not in JUDGE_MODES:
            import difflib
            near = difflib.get_close_matches(str(mode), JUDGE_MODES, n=1)
            hint = f' (did you mean "{near[0]}"?)' if near else ''
            raise JudgeOptionError(f'--judge-args "judge_mode" must be one of {", ".join(JUDGE_MODES)}, not '
                                   f'{mode!r}{hint}')
        out['judge_mode'] = mode
    if 'caption_seed' in options:
        seed = options['caption_seed']
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise JudgeOptionError(f'--judge-args "caption_seed" must be a whole number >= 0, not {seed!r}')
        if out.get('judge_mode') != 'efficient':
            raise JudgeOptionError('--judge-args "caption_seed" picks the captions of R-Bench\'s efficient mode: give '
                                   'it with "judge_mode": "efficient"')
        out['caption_seed'] = seed
    return out


# ------------------------------------------------------------------------------------------------ identity
def endpoint_identity(url: str | None) -> str:
    """'host:port/path' of a judge URL ('' without one): two servers on one host, or two routes of one gateway,
    are two judges; the scheme's default port is written out; user, password and query (credentials) are
    dropped."""
    if not url:
        return ''
    text = str(url).strip()
    parts = urlsplit(text if '://' in text else f'//{text}')
    try:
        port = parts.port
    except ValueError as err:
        raise ExtError(f'judge endpoint {parts.hostname!r}: invalid port ({err})') from None
    port = port or {'http': 80, 'https': 443}.get(parts.scheme.lower())
    host = (parts.hostname or '').lower()
    host = f'[{host}]' if ':' in host else host
    path = parts.path.rstrip('/')
    return f'{host}:{port}{path}' if port else f'{host}{path}'


def endpoint_hostname(identity: str | None) -> str | None:
    """The host of an endpoint identity or URL (what results record as `endpoint_host`); None without one."""
    if not identity:
        return None
    text = str(identity).strip()
    return urlsplit(text if '://' in text else f'//{text}').hostname or None


_PARAMS = ('model', 'system_prompt', 'temperature', 'max_tokens', 'top_p', 'top_k', 'img_detail', 'use_azure')


def judge_parameters(judge) -> dict:
    """What the kit's judge sends beside the prompt and can change its reply: the model id, system prompt,
    sampling parameters and extra body fields (never a key). Part of every verdict's key, and recorded."""
    params = {name: getattr(judge, name) for name in _PARAMS if getattr(judge, name, None) is not None}
    extra = getattr(judge, 'default_kwargs', None) or {}
    if extra:
        params['extra_body'] = {k: v for k, v in sorted(extra.items()) if not _is_secret_name(k)}
    return json.loads(json.dumps(params, default=str, sort_keys=True))


def judge_identity(name: str, judge) -> dict:
    """What the keys of a judge's verdicts are made of: in the verdict cache (endpoint, parameters) and in the kit
    dialect's progress files (exact_io.judge_id)."""
    from vlmeval_ext.dataset.utils.exact_io import judge_id
    return {'endpoint': endpoint_identity(getattr(judge, 'api_base', '') or ''),
            'parameters': judge_parameters(judge), 'judge_id': judge_id(name, judge)}


def parameters_sha256(parameters: dict) -> str:
    return hashlib.sha256(json.dumps(parameters, sort_keys=True).encode()).hexdigest()


def verdict_key(name: str, endpoint: str, params_sha: str, prompt: str, slot: int) -> tuple:
    """A verdict's key in the cache: the judge (name, endpoint, parameters), the prompt, and which call of it."""
    return (name, endpoint, params_sha, hashlib.sha256(prompt.encode('utf-8')).hexdigest(), slot)


def _is_secret_name(name) -> bool:
    from vlmeval_ext.secrets import is_secret_key_name
    return is_secret_key_name(name)


def cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return Path(base) / 'vlmeval-ext'


# ------------------------------------------------------------------------------------------------ the store
_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    judge TEXT NOT NULL,           -- judge model name
    endpoint TEXT NOT NULL,        -- host:port/path of the judge service ('' for a local judge)
    params TEXT NOT NULL,          -- SHA-256 of the judge parameters (judge_parameters)
    prompt_sha256 TEXT NOT NULL,   -- SHA-256 (hex) of the exact prompt text
    slot INTEGER NOT NULL,         -- the k-th time one evaluation asks this prompt
    reply TEXT NOT NULL,           -- the judge's reply, configured keys masked
    created_at REAL NOT NULL,      -- unix time
    PRIMARY KEY (judge, endpoint, params, prompt_sha256, slot)
) WITHOUT ROWID
"""
# Prompts the judge rejected for good (see NOT_PROMPT_REJECTIONS), by the same key as a verdict: a rerun does not
# pay for them again. Added to stores of either age on opening (a table the earlier version does not read).
_REJECTIONS = """
CREATE TABLE IF NOT EXISTS rejections (
    judge TEXT NOT NULL, endpoint TEXT NOT NULL, params TEXT NOT NULL, prompt_sha256 TEXT NOT NULL,
    slot INTEGER NOT NULL,
    status INTEGER NOT NULL,       -- the HTTP status of the rejection
    reason TEXT NOT NULL,          -- the start of the server's answer, configured keys masked
    created_at REAL NOT NULL,
    PRIMARY KEY (judge, endpoint, params, prompt_sha256, slot)
) WITHOUT ROWID
"""
WAY_OUT = (f"set {CACHE_ENV} to a writable folder on a local disk, move the file aside, or pass --judge-args "
           "'{\"cache\": false}'")


class VerdictStore:
    """The SQLite verdict database; every error of opening it is one VerdictCacheError line."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise VerdictCacheError(f'verdict cache: {self.path.parent} is a file, not a folder; {WAY_OUT}')
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                       check_same_thread=False)
            self._setup()
        except (OSError, sqlite3.Error) as err:
            raise VerdictCacheError(f'verdict cache {self.path}: cannot use it ({type(err).__name__}: {err}); '
                                    f'{WAY_OUT}') from None

    def _setup(self) -> None:
        db = self._db
        db.execute(f'PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}')
        version = db.execute('PRAGMA user_version').fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise sqlite3.DatabaseError(f'it was written by another version of vlmeval-ext (schema {version}, this '
                                        f'one reads {SCHEMA_VERSION})')
        if db.execute('PRAGMA journal_mode').fetchone()[0].lower() != 'wal':
            mode = db.execute('PRAGMA journal_mode = WAL').fetchone()[0]
            if mode.lower() != 'wal':
                raise sqlite3.OperationalError(f'cannot switch to WAL mode (journal mode stays {mode!r})')
        db.execute('PRAGMA synchronous = NORMAL')      # WAL + NORMAL: a killed process loses no committed verdict
        if version == 0:
            db.execute('BEGIN IMMEDIATE')
            try:
                db.execute(_SCHEMA)
                db.execute(f'PRAGMA user_version = {SCHEMA_VERSION}')
                db.execute('COMMIT')
            except sqlite3.Error:
                db.execute('ROLLBACK')
                raise
        db.execute(_REJECTIONS)
        columns = [r[1] for r in db.execute('PRAGMA table_info(verdicts)')]
        if columns[:6] != ['judge', 'endpoint', 'params', 'prompt_sha256', 'slot', 'reply']:
            raise sqlite3.DatabaseError(f'its verdicts table has other columns ({columns})')
        db.execute('SELECT COUNT(*) FROM verdicts').fetchone()       # a damaged file fails here, before any call

    def get(self, key: tuple) -> str | None:
        with self._lock:
            row = self._db.execute('SELECT reply FROM verdicts WHERE judge = ? AND endpoint = ? AND params = ? '
                                   'AND prompt_sha256 = ? AND slot = ?', key).fetchone()
        return None if row is None else row[0]

    def put(self, key: tuple, reply: str) -> str:
        """Store a verdict unless one is stored for this key already; returns the stored one (the first writer
        wins, so two evaluations asking one call at once go on with the same verdict). Raises sqlite3.Error."""
        with self._lock:
            cur = self._db.execute('INSERT OR IGNORE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)',
                                   (*key, reply, time.time()))
            if cur.rowcount == 1:
                return reply
            row = self._db.execute('SELECT reply FROM verdicts WHERE judge = ? AND endpoint = ? AND params = ? '
                                   'AND prompt_sha256 = ? AND slot = ?', key).fetchone()
        return reply if row is None else row[0]

    def rejection(self, key: tuple) -> tuple[int, str] | None:
        """(HTTP status, reason) when the judge rejected this prompt for good earlier, else None."""
        with self._lock:
            return self._db.execute('SELECT status, reason FROM rejections WHERE judge = ? AND endpoint = ? AND '
                                    'params = ? AND prompt_sha256 = ? AND slot = ?', key).fetchone()

    def put_rejection(self, key: tuple, status: int, reason: str) -> None:
        with self._lock:
            self._db.execute('INSERT OR REPLACE INTO rejections VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
                             (*key, status, reason, time.time()))

    def forget_rejection(self, key: tuple) -> None:
        with self._lock:
            self._db.execute('DELETE FROM rejections WHERE judge = ? AND endpoint = ? AND params = ? AND '
                             'prompt_sha256 = ? AND slot = ?', key)

    def count(self, judge: str | None = None) -> int:
        with self._lock:
            if judge is None:
                return self._db.execute('SELECT COUNT(*) FROM verdicts').fetchone()[0]
            return self._db.execute('SELECT COUNT(*) FROM verdicts WHERE judge = ?', (judge,)).fetchone()[0]

    def stats(self) -> list[tuple]:
        """(judge, endpoint, verdicts, oldest, newest) per judge and endpoint, the most verdicts first (times: unix)."""
        with self._lock:
            return self._db.execute('SELECT judge, endpoint, COUNT(*), MIN(created_at), MAX(created_at) FROM verdicts '
                                    'GROUP BY judge, endpoint ORDER BY COUNT(*) DESC, judge, endpoint').fetchall()

    def judges(self) -> set[str]:
        """The judge names with a verdict or a remembered rejection."""
        with self._lock:
            return {r[0] for r in self._db.execute('SELECT judge FROM verdicts UNION SELECT judge FROM rejections')}

    def rejection_count(self) -> int:
        with self._lock:
            return self._db.execute('SELECT COUNT(*) FROM rejections').fetchone()[0]

    def clear(self, judge: str | None = None) -> tuple[int, int]:
        """Delete every verdict and remembered rejection (of one judge); returns how many of each."""
        where, args = ('WHERE judge = ?', (judge,)) if judge is not None else ('', ())
        with self._lock:
            self._db.execute('BEGIN IMMEDIATE')
            try:
                verdicts = self._db.execute(f'DELETE FROM verdicts {where}', args).rowcount
                rejections = self._db.execute(f'DELETE FROM rejections {where}', args).rowcount
                self._db.execute('COMMIT')
            except sqlite3.Error:
                self._db.execute('ROLLBACK')
                raise
        return verdicts, rejections

    def close(self) -> None:
        with self._lock:
            self._db.close()


_STORES: dict[str, VerdictStore] = {}


def shared_store() -> VerdictStore:
    """The per-user store (one connection per process and path)."""
    path = str(cache_dir() / STORE_FILE)
    if path not in _STORES:
        _STORES[path] = VerdictStore(path)
    return _STORES[path]


# ------------------------------------------------------------------------------------------------ the judge
def _message_text(message) -> str:
    if isinstance(message, str):
        return message
    return '\n'.join(str(m.get('value', '')) for m in message if isinstance(m, dict) and m.get('type') == 'text')


def _server_text(response) -> str:
    text = getattr(response, 'text', None) if response is not None else None
    text = text if isinstance(text, str) else ('' if response is None else str(response))
    return ' '.join(text.split())[:200]


class Rejected:
    """The judge's answer that rejects one prompt for good (an HTTP status not in NOT_PROMPT_REJECTIONS)."""

    def __init__(self, status: int, reason: str):
        self.status, self.reason = status, reason


class InFlight:
    """How many judge calls may be in flight at once: halved at a rate limit (once per round: a rate limit on a
    call admitted before the last cut does not cut again), never below 1; one more after as many answers in a row
    as calls are allowed, never above `start`."""

    def __init__(self, start: int = MAX_IN_FLIGHT):
        self.start = self.limit = self.lowest = start
        self.active = self.streak = self.epoch = 0
        self._cond = threading.Condition()

    def enter(self) -> int:
        with self._cond:
            while self.active >= self.limit:
                self._cond.wait(timeout=0.5)
            self.active += 1
            return self.epoch

    def leave(self) -> None:
        with self._cond:
            self.active -= 1
            self._cond.notify_all()

    def rate_limited(self, epoch: int) -> None:
        """A call admitted in round `epoch` was rate limited (called while it still counts as in flight)."""
        with self._cond:
            self.streak = 0
            if epoch == self.epoch:
                self.limit = max(1, min(self.limit, self.active) // 2)
                self.lowest = min(self.lowest, self.limit)
                self.epoch += 1

    def answered(self) -> None:
        with self._cond:
            self.streak += 1
            if self.streak >= self.limit and self.limit < self.start:
                self.limit, self.streak = self.limit + 1, 0
                self._cond.notify_all()


def retry_after(response) -> float | None:
    """The wait a rate-limited answer asks for, in seconds (`retry-after-ms`, else `Retry-After` as seconds or an
    HTTP date), or None."""
    headers = getattr(response, 'headers', None)
    if not headers:
        return None
    try:
        millis = headers.get('retry-after-ms')
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        value = headers.get('retry-after')
        if value is None:
            return None
        value = str(value).strip()
        if value.replace('.', '', 1).isdigit():
            return float(value)
        from email.utils import parsedate_to_datetime
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


class NotInCache(Exception):
    """A CacheReader was asked for a verdict the verdict cache does not hold."""


class CacheReader:
    """A judge's verdicts from the verdict cache alone: `generate` answers the n-th call of a prompt with the stored
    n-th verdict, as the judge itself would, counting its own calls (the judge's are untouched), and raises
    NotInCache for one not stored. It lets an evaluation settle, before its judging loop, the prompts whose every
    verdict is cached (vlmeval_ext.plugin.rbench.RBenchSteps).

    `judge` is a CachedJudge, or anything with its `store` and `key(prompt, slot)`."""

    def __init__(self, judge: 'CachedJudge'):
        self.judge, self._slots = judge, {}

    def generate(self, message, **kwargs) -> str:
        prompt = _message_text(message)
        slot = self._slots[prompt] = self._slots.get(prompt, 0) + 1
        reply = self.judge.store.get(self.judge.key(prompt, slot)) if self.judge.store is not None else None
        if reply is None:
            raise NotInCache(prompt[:60])
        return reply


class CachedJudge:
    """A kit judge behind the verdict cache (see the module docstring). `generate(prompt)` returns the reply, or
    the kit's failure text when no verdict could be had; every other attribute is the kit judge's."""

    def __init__(self, kit_judge, name: str, *, store: VerdictStore | None, log_path: str | None = None,
                 unstored_path: str | None = None, retries: int = 3, backoff: float = 0.5,
                 retry_rejected: bool = False):
        self.kit_judge, self.name = kit_judge, name
        self.store, self.log_path, self.unstored_path = store, log_path, unstored_path
        self.retries, self.backoff, self.retry_rejected = retries, backoff, retry_rejected
        self.endpoint = endpoint_identity(getattr(kit_judge, 'api_base', '') or '')
        self.parameters = judge_parameters(kit_judge)
        self.params_sha = parameters_sha256(self.parameters)
        self.fail_msg = FAIL_MSG
        self._lock = threading.Lock()
        self._slots: dict[str, int] = {}
        self._recent: deque = deque()
        self._consecutive = 0
        self._last_answer = self.created = time.monotonic()
        self.in_flight = InFlight()
        self.stopped: str | None = None            # why no further call is made ('judge down', 'cache failed')
        self.stats = dict(asked=0, cached=0, made=0, failed=0, refused=0, attempts=0, rejected=0,
                          rejected_before=0, rate_limited=0)
        self.unstored: list[dict] = []
        self.last_error = ''
        self.put_in_progress_file = 0              # cached verdicts handed to the progress file (CacheReader)
        self._import_unstored()
        run_context.current().judges.append(self)

    def __getattr__(self, name):
        return getattr(self.__dict__['kit_judge'], name)

    # -- keys
    def key(self, prompt: str, slot: int) -> tuple:
        return verdict_key(self.name, self.endpoint, self.params_sha, prompt, slot)

    def _next_slot(self, prompt: str) -> int:
        with self._lock:
            slot = self._slots[prompt] = self._slots.get(prompt, 0) + 1
            self.stats['asked'] += 1
        return slot

    def _count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1

    # -- the check before an evaluation
    def preflight(self) -> None:
        """One tiny call before a long evaluation (once per judge, endpoint and parameters in a process): a dead
        judge stops the run at once. The call goes exactly where the evaluation's calls will go."""
        identity = (self.name, self.endpoint, self.params_sha)
        checked = run_context.current().judges_checked
        if identity in checked:
            return
        retries, self.retries = self.retries, min(self.retries, 2)
        try:
            reply = self._call(PROBE_PROMPT)
        finally:
            self.retries = retries
            self._consecutive, self.stopped = 0, None
            self.stats['failed'] = 0
        if reply is None or isinstance(reply, Rejected):
            where = self.endpoint or 'its endpoint'
            raise JudgeUnavailable(f'the judge {self.name} at {where} did not answer a test call '
                                   f'({self.last_error[:200]}); {DEAD_JUDGE_ADVICE}')
        checked.add(identity)

    def working(self) -> bool:
        """The kit's judge check (`judge.working()`, which the kit dialect asks before judging): True once this
        judge, endpoint and parameters answered `preflight`'s test call in this process; else that call is made
        now (a failure raises JudgeUnavailable, one line)."""
        self.preflight()
        return True

    # -- the call
    def generate(self, message, **kwargs) -> str:
        prompt = _message_text(message)
        key = self.key(prompt, self._next_slot(prompt))
        if self.store is not None:
            reply = self.store.get(key)
            if reply is not None:
                self._count('cached')
                return reply
            if not self.retry_rejected and self.store.rejection(key) is not None:
                self._count('rejected_before')
                return FAIL_MSG
        reason = STOP.reason or self.stopped
        if reason:
            self._count('refused')
            return FAIL_MSG
        reply = self._call(prompt)
        if isinstance(reply, Rejected):
            self._reject(key, reply)
            return FAIL_MSG
        if reply is None:
            return FAIL_MSG
        return self._keep(key, reply)

    def _call(self, prompt: str) -> str | Rejected | None:
        """One verdict: the kit judge's single-attempt call, retried with backoff (a rate limit waits and asks again
        without using up a retry); a Rejected when the judge rejects this prompt for good; None when it stays
        failed."""
        attempt = rate_limits = 0
        while True:
            if STOP.reason or self.stopped:
                self._count('refused')
                return None
            epoch = self.in_flight.enter()
            if STOP.reason or self.stopped:             # stopped while waiting for a place in flight
                self.in_flight.leave()
                self._count('refused')
                return None
            self._count('attempts')
            try:
                try:
                    code, answer, response = self.kit_judge.generate_inner([{'type': 'text', 'value': prompt}])
                except Exception as err:  # the kit's wrappers raise anything from requests/json: a counted failure
                    code, answer, response = -1, None, f'{type(err).__name__}: {err}'
                status = getattr(response, 'status_code', None)
                # a 429 saying the quota is used up is a failure, not a rate limit
                rate_limited = status == 429 and 'insufficient_quota' not in _server_text(response).lower()
                if rate_limited:
                    self.in_flight.rate_limited(epoch)
            finally:
                self.in_flight.leave()
            if code == 0 and isinstance(answer, str) and answer.strip() and FAIL_MSG not in answer:
                self._healthy()
                return answer
            self.last_error = (f'HTTP {status}: ' if status else '') + (_server_text(response) or 'no reply')
            if rate_limited:
                self._count('rate_limited')
                if self._rate_limited_too_long():
                    return None
                asked = retry_after(response)
                wait = asked if asked is not None else max(self.backoff, 0.1) * 2 ** rate_limits
                self._wait(min(wait, RATE_LIMIT_WAIT_MAX_S) * (1 + 0.1 * random.random()))
                rate_limits += 1
                continue
            if status is not None and 400 <= status < 500 and status not in NOT_PROMPT_REJECTIONS:
                self._healthy()                        # the server is up and answered: about this prompt only
                return Rejected(status, self.last_error)
            if status == 404 and 'does not exist' in self.last_error.lower():
                break                                  # the server is up but serves no such model: asking again won't help
            if attempt >= self.retries:
                break
            if self.backoff:
                self._wait(self.backoff * (2 ** attempt))
            attempt += 1
        self._failed()
        return None

    def _wait(self, seconds: float) -> None:
        """Sleep, but wake at once when the run is stopped (Ctrl-C, the judge declared down)."""
        end = time.monotonic() + seconds
        while not (STOP.reason or self.stopped):
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.2))

    def _healthy(self) -> None:
        with self._lock:
            self._consecutive = 0
            self._last_answer = time.monotonic()
            self._recent.append((self._last_answer, True))
        self.in_flight.answered()

    def _rate_limited_too_long(self) -> bool:
        """True (and the judge down) when no call has been answered for RATE_LIMIT_DOWN_S while rate limited."""
        with self._lock:
            if time.monotonic() - self._last_answer < RATE_LIMIT_DOWN_S:
                return False
            self.stats['failed'] += 1
            if not self.stopped:
                self.stopped = 'judge down'
                self.last_error = (f'rate limited (HTTP 429) with no call answered for {RATE_LIMIT_DOWN_S:.0f} s; '
                                   f'last: {self.last_error}')
            return True

    def _reject(self, key: tuple, rejected: Rejected) -> None:
        """A prompt the judge rejected for good: this item's judge failure, remembered for later runs."""
        from vlmeval_ext.secrets import mask_configured_keys
        reason = mask_configured_keys(rejected.reason, extra=(getattr(self.kit_judge, 'key', None),))
        self._count('rejected')
        if self.store is not None:
            try:
                self.store.put_rejection(key, rejected.status, reason)
            except sqlite3.Error:
                pass        # not remembered: a later run asks this prompt again (the count above still holds)
        self._log(key, None, rejected=f'HTTP {rejected.status}: {reason}')

    def _failed(self) -> None:
        now = time.monotonic()
        with self._lock:
            self.stats['failed'] += 1
            self._consecutive += 1
            self._recent.append((now, False))
            while self._recent and now - self._recent[0][0] > DOWN_WINDOW_S:
                self._recent.popleft()
            window_dead = len(self._recent) >= 3 and not any(ok for _, ok in self._recent) and \
                now - self._recent[0][0] >= DOWN_WINDOW_S * 0.9
            if not self.stopped and (self._consecutive >= DOWN_AFTER_FAILURES or window_dead):
                self.stopped = 'judge down'

    def _keep(self, key: tuple, reply: str) -> str:
        from vlmeval_ext.secrets import mask_configured_keys
        reply = mask_configured_keys(reply, extra=(getattr(self.kit_judge, 'key', None),))
        self._count('made')
        stored = reply
        if self.retry_rejected and self.store is not None and not self.stopped:
            try:
                self.store.forget_rejection(key)
            except sqlite3.Error:
                pass
        if self.store is not None and not self.stopped:
            try:
                stored = self.store.put(key, reply)
            except sqlite3.Error as err:
                with self._lock:
                    if not self.stopped:
                        self.stopped = 'cache failed'
                        self.last_error = f'{type(err).__name__}: {err}'
                self._keep_unstored(key, reply)
        elif self.store is not None:
            self._keep_unstored(key, reply)
        self._log(key, reply)
        return stored

    # -- verdicts the store could not take
    def _keep_unstored(self, key: tuple, reply: str) -> None:
        record = {'key': list(key), 'reply': reply}
        with self._lock:
            self.unstored.append(record)
        if self.unstored_path:
            try:
                with open(self.unstored_path, 'a', encoding='utf-8') as f:
                    f.write(json.dumps(record, ensure_ascii=False) + '\n')
            except OSError:
                pass    # still held in memory: the end-of-evaluation line says how many could not be written

    def _import_unstored(self) -> None:
        """Verdicts an earlier evaluation of this file could not store: into the store now, the file kept aside."""
        path = Path(self.unstored_path) if self.unstored_path else None
        if self.store is None or path is None or not path.is_file():
            return
        taken = 0
        for line in path.read_text(encoding='utf-8').splitlines():
            try:
                record = json.loads(line)
                self.store.put(tuple(record['key']), record['reply'])
                taken += 1
            except (ValueError, KeyError, TypeError, sqlite3.Error):
                continue
        path.replace(path.with_name(path.name + '.imported'))
        print(f'[vlmeval-ext] INFO: {taken} verdict(s) an earlier evaluation could not store were added to the '
              f'verdict cache from {path.name}', file=sys.stderr, flush=True)

    def _log(self, key: tuple, reply: str | None, rejected: str | None = None) -> None:
        if not self.log_path:
            return
        record = {'judge': self.name, 'endpoint': self.endpoint, 'prompt_sha256': key[3], 'slot': key[4],
                  'reply': reply}
        if rejected:
            record['rejected'] = rejected
        line = json.dumps(record, ensure_ascii=False) + '\n'
        import fcntl
        try:
            with open(self.log_path, 'a', encoding='utf-8') as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                f.write(line)
        except OSError:
            pass        # the log is a readable record only; the verdict itself is stored

    # -- what happened
    def outcome(self) -> str | None:
        """What stopped the judge, in one clause (the caller adds how many results lack verdicts and how to
        resume), or None when every verdict it was asked for came."""
        reason = STOP.reason or self.stopped
        if not reason:
            return None
        missing = self.stats['refused'] + self.stats['failed']
        if reason == 'cache failed':
            where = f' and written to {Path(self.unstored_path).name}' if self.unstored_path else ''
            return (f'the verdict cache failed ({self.last_error[:120]}): no further judge call was made; '
                    f'{len(self.unstored)} verdict(s) received after it are kept{where} and the next run '
                    f'imports them; {missing} judge call(s) failed or not made')
        if reason == 'judge down':
            return (f'the judge {self.name} is down ({DOWN_AFTER_FAILURES} failed calls in a row or none answered '
                    f'for {DOWN_WINDOW_S:.0f} s; last: {self.last_error[:120]}): {missing} judge call(s) failed '
                    f'or not made, {self.stats["made"]} verdict(s) received this run are stored')
        return f'interrupted: {missing} judge call(s) not made'


# ------------------------------------------------------------------------------------------------ building
def kit_judge_arguments(kwargs: dict) -> dict:
    """What build_kit_judge hands the kit's build_judge besides the name: the kit's own retries off (ours count and
    back off), our options and the arguments the judge takes no part in left out."""
    kept = {k: v for k, v in kwargs.items() if k not in PLUGIN_OPTIONS + PROTOCOL_OPTIONS
            and k not in ('nproc', 'verbose', 'use_verifier', 'use_vllm')}
    return {**kept, 'retry': 1}


def build_kit_judge(name: str, **kwargs):
    """The kit's judge for `name` (build_judge) with `kit_judge_arguments(kwargs)`."""
    from vlmeval.dataset.utils import build_judge
    return build_judge(model=name, **kit_judge_arguments(kwargs))


