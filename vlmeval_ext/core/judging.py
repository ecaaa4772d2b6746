"""Bind the judge at evaluation time from the kit's judge kwargs (`--judge`, `--judge-base-url`, `--judge-args`).

`--judge NAME` goes through the kit's own build_judge (any OpenAI-compatible endpoint). The names in
OFFLINE_JUDGES select a benchmark's local approximation instead. Extra protocol options come in --judge-args,
e.g. `--judge-args '{"judge_mode": "efficient"}'`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from vlmeval_ext.core.judge import JudgeCallError, preflight

OFFLINE_JUDGES = ('offline', 'offline-minilm')
# Kit judge kwargs that are ours, not build_judge's.
PROTOCOL_KEYS = ('judge_mode', 'judge_retries', 'judge_backoff', 'preflight')


@dataclass
class JudgeHandle:
    name: str                   # the judge model name (recorded in results, never the key)
    call: Callable[[str], str]  # prompt -> reply text; raises JudgeCallError
    mode: str                   # 'official' or 'efficient'
    nproc: int
    retries: int
    backoff: float
    offline: bool = False
    endpoint_host: str | None = None


class _KeepAliveRequests:
    """Stands in for the `requests` module inside the kit's gpt wrapper: `post` reuses one keep-alive Session per
    thread (the kit opens a new connection per call, which halves judge throughput); everything else is requests."""

    def __init__(self):
        import threading

        import requests
        self._requests, self._local = requests, threading.local()

    def post(self, *args, **kwargs):
        session = getattr(self._local, 'session', None)
        if session is None:
            session = self._local.session = self._requests.Session()
        return session.post(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._requests, name)


def _use_keep_alive_in_kit_wrapper() -> None:
    import vlmeval.api.gpt as gpt
    if not isinstance(getattr(gpt, 'requests', None), _KeepAliveRequests):
        gpt.requests = _KeepAliveRequests()


def kit_judge_caller(model: str, **kwargs) -> tuple[Callable[[str], str], str | None]:
    """A caller around the kit's build_judge that raises on failure (the kit returns a fail-message string)."""
    from urllib.parse import urlparse

    from vlmeval.dataset.utils import build_judge
    kwargs = {k: v for k, v in kwargs.items() if k not in PROTOCOL_KEYS}
    kwargs['retry'] = 1        # retries are ours (counted, with backoff); the kit's would hide failures
    judge = build_judge(model=model, **kwargs)
    _use_keep_alive_in_kit_wrapper()

    def call(prompt: str) -> str:
        try:
            ret_code, answer, _ = judge.generate_inner([{'type': 'text', 'value': prompt}])
        except Exception as err:  # requests/HTTP/JSON errors of the kit's wrapper become counted call failures
            raise JudgeCallError(f'{type(err).__name__}: {err}') from err
        if ret_code != 0:
            raise JudgeCallError(f'HTTP status {ret_code}')
        if not isinstance(answer, str) or judge.fail_msg in answer or not answer.strip():
            raise JudgeCallError('no usable reply (empty or malformed response)')
        return answer

    host = urlparse(getattr(judge, 'api_base', '') or '').hostname
    return call, host


def bind_judge(judge_kwargs: dict, default_model: str,
               offline_factory: Callable[[], Callable[[str], str]] | None = None) -> JudgeHandle:
    """Build the judge for an evaluation from the kit's judge kwargs; a dead judge stops here, before any work."""
    kwargs = dict(judge_kwargs)
    model = kwargs.pop('model', None) or default_model
    mode = kwargs.get('judge_mode', 'official')
    nproc = int(kwargs.pop('nproc', 4) or 4)
    retries = int(kwargs.get('judge_retries', 3))
    backoff = float(kwargs.get('judge_backoff', 0.5))
    if model in OFFLINE_JUDGES:
        if offline_factory is None:
            raise ValueError(f'this benchmark has no offline judge; choose an API judge instead of {model!r}')
        return JudgeHandle(name=model, call=offline_factory(), mode=mode, nproc=1, retries=0, backoff=0.0,
                           offline=True)
    if model == 'exact_matching':
        raise ValueError('this benchmark needs an LLM judge (the kit would silently fall back to exact matching); '
                         'pass --judge MODEL (OpenAI-compatible, see README) or --judge offline')
    for key in ('verbose', 'retry'):
        kwargs.pop(key, None)
    call, host = kit_judge_caller(model, **kwargs)
    handle = JudgeHandle(name=model, call=call, mode=mode, nproc=nproc, retries=retries, backoff=backoff,
                         endpoint_host=host)
    # The launcher checks an API judge once before inference; a direct evaluate() (or `vlmeval-ext eval`) checks here.
    checked_by_launcher = os.environ.get('VLMEVAL_EXT_JUDGE_CHECKED') == model
    if kwargs.get('preflight', True) and not checked_by_launcher:
        preflight(call, retries=retries, backoff=backoff)
    return handle
