"""The judge: resolved by the kit's build_judge, called over HTTP by our own client; nothing of the kit changes."""
from __future__ import annotations

import threading

import pytest

from vlmeval_ext.testing.kit_run import FAKE_KEY


@pytest.fixture
def judge_env(monkeypatch):
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    monkeypatch.delenv('OPENAI_API_BASE', raising=False)


def test_judge_calls_leave_the_kits_http_client_alone(loopback, judge_env):
    import requests
    import vlmeval.api.gpt as gpt

    from vlmeval_ext.core.judging import JudgeClient, kit_judge_caller
    loopback.default = 'Score: 1'
    call, endpoint = kit_judge_caller('loopback-judge', api_base=loopback.chat_url, timeout=5)
    assert isinstance(call, JudgeClient) and endpoint == loopback.chat_url.split('://', 1)[1]
    assert [call('judge this') for _ in range(3)] == ['Score: 1'] * 3
    assert gpt.requests is requests                 # the model under test keeps the kit's own client
    session = call._session()
    assert call._session() is session              # one keep-alive session per thread, reused
    other = []
    thread = threading.Thread(target=lambda: other.append(call._session()))
    thread.start()
    thread.join()
    assert other[0] is not session


def test_the_request_is_the_one_the_kit_resolved(loopback, judge_env):
    from vlmeval_ext.core.judging import kit_judge_caller
    loopback.default = 'ok'
    call, _ = kit_judge_caller('chatgpt-0125', api_base=loopback.chat_url, timeout=5, judge_mode='efficient',
                               preflight=False, nproc=8, verbose=False, retry=3)
    call('Is this right?')
    request = loopback.log[-1]
    assert request.had_auth
    body = request.body
    # the kit's name -> model id map, its default temperature and max_tokens; our protocol keys never sent
    assert body['model'] == 'gpt-3.5-turbo-0125'
    assert body['messages'] == [{'role': 'user', 'content': 'Is this right?'}]
    assert body['temperature'] == 0 and body['max_tokens'] == 2048
    assert not {'judge_mode', 'preflight', 'nproc', 'retry', 'verbose', 'n'} & set(body)


def test_a_judge_the_client_does_not_speak_to_goes_through_the_kit_object(loopback, judge_env):
    """Vendor-specific requests (here the kit's Gemini payload) are left to the kit wrapper's generate_inner."""
    from vlmeval_ext.core.judging import JudgeClient, kit_judge_caller
    loopback.default = 'fine'
    call, _ = kit_judge_caller('gemini-loopback', api_base=loopback.chat_url, timeout=5)
    assert not isinstance(call, JudgeClient)
    assert call('hello') == 'fine'
    assert loopback.log[-1].body.get('reasoning_effort') == 'high'     # built by the kit, not by us


def test_preflight_is_an_explicit_argument_not_an_environment_variable(loopback, judge_env, monkeypatch):
    from vlmeval_ext.core.judging import bind_judge
    loopback.default = 'ready'
    kwargs = {'model': 'loopback-judge', 'api_base': loopback.chat_url, 'timeout': 5}
    bind_judge({**kwargs, 'preflight': False}, default_model='unused')
    assert len(loopback.log) == 0
    # A variable an earlier version read as "already checked" means nothing now: the judge is checked.
    monkeypatch.setenv('VLMEVAL_EXT_JUDGE_CHECKED', 'loopback-judge')
    handle = bind_judge(kwargs, default_model='unused')
    assert len(loopback.log) == 1 and handle.endpoint_host == '127.0.0.1'
