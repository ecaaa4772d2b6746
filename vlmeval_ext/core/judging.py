"""Bind the judge at evaluation time from the kit's judge kwargs (`--judge`, `--judge-base-url`, `--judge-args`).

`--judge NAME` is resolved by the kit's own `build_judge` (model name -> model id, api_base, key, temperature,
max_tokens, timeout; any OpenAI-compatible endpoint). The HTTP call itself is made by our small client,
`JudgeClient`: one keep-alive `requests.Session` per thread posting an OpenAI chat request to that endpoint (the
kit's wrapper opens a new connection per call, which halves judge throughput). Nothing of the kit is changed:
the model under test keeps the kit's own HTTP client. Judge classes whose request differs from the plain
OpenAI one (a local HF judge, vendor-specific headers or payloads) are called through the kit object's own
`generate_inner`.

The names in OFFLINE_JUDGES select a benchmark's local approximation instead. Protocol options come in
--judge-args, e.g. `--judge-args '{"judge_mode": "efficient"}'`; `"preflight": false` skips the test call (our
launcher passes it after making that call itself, before inference).
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Callable

from vlmeval_ext.core.judge import JudgeCallError, endpoint_hostname, endpoint_identity, preflight
from vlmeval_ext.errors import ExtError

OFFLINE_JUDGES = ('offline', 'offline-minilm')
# Judge kwargs that are ours, not build_judge's (they never reach the kit or the judge's HTTP payload).
PROTOCOL_KEYS = ('judge_mode', 'judge_retries', 'judge_backoff', 'preflight', 'cache')
# Kit run.py judge kwargs that are not arguments of the judge model.
KIT_RUN_KEYS = ('nproc', 'verbose', 'retry', 'use_verifier', 'use_vllm')


class JudgeConfigError(ExtError, ValueError):
    """A judge this benchmark cannot use (the message says which one it can)."""


@dataclass
class JudgeHandle:
    name: str                   # the judge model name (recorded in results, never the key)
    call: Callable[[str], str]  # prompt -> reply text; raises JudgeCallError
    mode: str                   # 'official' or 'efficient'
    nproc: int
    retries: int
    backoff: float
    offline: bool = False
    endpoint: str | None = None   # host:port/path (see core.judge.endpoint_identity): what the verdict cache keys on

    @property
    def endpoint_host(self) -> str | None:
        """The judge's host alone, as results record it."""
        return endpoint_hostname(self.endpoint)


@dataclass(frozen=True)
class JudgeEndpoint:
    """Everything one OpenAI-compatible chat request of the judge needs (resolved by the kit's build_judge)."""
    url: str
    model: str
    key: str | None = field(repr=False)
    temperature: float | None = 0.0
    max_tokens: int | None = None
    token_field: str = 'max_tokens'       # 'max_completion_tokens' for the kit's o-series / gpt-5 judges
    timeout: float = 300.0
    system_prompt: str | None = None
    auth_header: str = 'Authorization'    # 'api-key' for Azure
    extra: tuple = ()                     # further payload fields the kit would send, as (name, value) pairs

    def headers(self) -> dict:
        headers = {'Content-Type': 'application/json'}
        if self.key:
            headers[self.auth_header] = self.key if self.auth_header == 'api-key' else f'Bearer {self.key}'
        return headers

    def payload(self, prompt: str) -> dict:
        messages = [{'role': 'system', 'content': self.system_prompt}] if self.system_prompt else []
        messages.append({'role': 'user', 'content': prompt})
        body = {'model': self.model, 'messages': messages, **dict(self.extra)}
        if self.temperature is not None and self.token_field == 'max_tokens':
            body['temperature'] = self.temperature
        if self.max_tokens is not None:
            body[self.token_field] = self.max_tokens
        if 'openai.com' in self.url:
            body['n'] = 1
        return body


def _plain_openai_judge(judge) -> bool:
    """True when the kit built a judge whose request is the plain OpenAI chat request (what JudgeClient sends)."""
    from vlmeval.api.gpt import OpenAIWrapper
    if not isinstance(judge, OpenAIWrapper) or type(judge).generate_inner is not OpenAIWrapper.generate_inner:
        return False
    model = str(judge.model)
    return not (hasattr(judge, 'baidu_appid') or 'internvl2-pro' in model or 'gemini' in model
                or getattr(judge, 'stream', False))


def endpoint_of(judge) -> JudgeEndpoint | None:
    """The endpoint of a judge built by the kit's build_judge, or None when it must be called through the kit."""
    if not _plain_openai_judge(judge):
        return None
    max_completion = bool(getattr(judge, 'is_max_completion_tokens', False))
    return JudgeEndpoint(
        url=judge.api_base, model=judge.model, key=judge.key, temperature=judge.temperature,
        max_tokens=judge.max_tokens, token_field='max_completion_tokens' if max_completion else 'max_tokens',
        timeout=float(judge.timeout) * 1.1, system_prompt=judge.system_prompt,
        auth_header='api-key' if getattr(judge, 'use_azure', False) else 'Authorization',
        extra=tuple(sorted((getattr(judge, 'default_kwargs', None) or {}).items())))


class JudgeClient:
    """prompt -> reply over HTTP, one keep-alive session per thread; every fault raises JudgeCallError."""

    def __init__(self, endpoint: JudgeEndpoint):
        self.endpoint = endpoint
        self._local = threading.local()

    def _session(self):
        session = getattr(self._local, 'session', None)
        if session is None:
            import requests
            session = self._local.session = requests.Session()
        return session

    def __call__(self, prompt: str) -> str:
        import requests
        endpoint = self.endpoint
        try:
            response = self._session().post(endpoint.url, headers=endpoint.headers(),
                                            data=json.dumps(endpoint.payload(prompt)), timeout=endpoint.timeout)
        except requests.RequestException as err:
            raise JudgeCallError(f'{type(err).__name__}: {err}') from err
        if not 200 <= response.status_code < 300:
            raise JudgeCallError(f'HTTP status {response.status_code}')
        try:
            answer = response.json()['choices'][0]['message']['content']
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise JudgeCallError(f'malformed response ({type(err).__name__}: {err})') from err
        if not isinstance(answer, str) or not answer.strip():
            raise JudgeCallError('no usable reply (empty or malformed response)')
        return answer.strip()


def _kit_object_caller(judge) -> Callable[[str], str]:
    """For judges JudgeClient does not speak to: one call of the kit object's own generate_inner."""
    def call(prompt: str) -> str:
        try:
            ret_code, answer, _ = judge.generate_inner([{'type': 'text', 'value': prompt}])
        except Exception as err:  # the kit wrapper's requests/HTTP/JSON errors become counted call failures
            raise JudgeCallError(f'{type(err).__name__}: {err}') from err
        if ret_code != 0:
            raise JudgeCallError(f'HTTP status {ret_code}')
        if not isinstance(answer, str) or judge.fail_msg in answer or not answer.strip():
            raise JudgeCallError('no usable reply (empty or malformed response)')
        return answer
    return call


def kit_judge_caller(model: str, **kwargs) -> tuple[Callable[[str], str], str | None]:
    """(prompt -> reply, endpoint identity host:port/path without credentials) for judge `model`, resolved by the
    kit's build_judge. The identity tells two judge services apart; the verdict cache keys on it."""
    from vlmeval.dataset.utils import build_judge
    kwargs = {k: v for k, v in kwargs.items() if k not in PROTOCOL_KEYS and k not in KIT_RUN_KEYS}
    kwargs['retry'] = 1        # retries are ours (counted, with backoff); the kit's would hide failures
    judge = build_judge(model=model, **kwargs)
    endpoint = endpoint_of(judge)
    call = JudgeClient(endpoint) if endpoint is not None else _kit_object_caller(judge)
    return call, endpoint_identity(getattr(judge, 'api_base', '') or '') or None


def bind_judge(judge_kwargs: dict, default_model: str,
               offline_factory: Callable[[], Callable[[str], str]] | None = None) -> JudgeHandle:
    """Build the judge for an evaluation from the kit's judge kwargs; a dead judge stops here, before any work
    (unless `preflight` is False: the caller has checked the judge already)."""
    kwargs = dict(judge_kwargs)
    model = kwargs.pop('model', None) or default_model
    mode = kwargs.get('judge_mode', 'official')
    nproc = int(kwargs.pop('nproc', 4) or 4)
    retries = int(kwargs.get('judge_retries', 3))
    backoff = float(kwargs.get('judge_backoff', 0.5))
    if model in OFFLINE_JUDGES:
        if offline_factory is None:
            raise JudgeConfigError(f'this benchmark has no offline judge; choose an API judge instead of {model!r}')
        return JudgeHandle(name=model, call=offline_factory(), mode=mode, nproc=1, retries=0, backoff=0.0,
                           offline=True)
    if model == 'exact_matching':
        raise JudgeConfigError('this benchmark needs an LLM judge (the kit would silently fall back to exact '
                               'matching); pass --judge MODEL (OpenAI-compatible, see README) or --judge offline')
    call, endpoint = kit_judge_caller(model, **kwargs)
    handle = JudgeHandle(name=model, call=call, mode=mode, nproc=nproc, retries=retries, backoff=backoff,
                         endpoint=endpoint)
    if kwargs.get('preflight', True):
        preflight(call, retries=retries, backoff=backoff)
    return handle
