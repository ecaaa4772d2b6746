"""The judge the plugin hands our datasets' scoring: the kit's own judge (build_judge, its HTTP client) behind
the verdict cache (vlmeval_ext.judging.CachedJudge), against the loopback server over real HTTP."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time

import pytest

from helpers.kit_run import FAKE_KEY
from vlmeval_ext import judging, run_context
from vlmeval_ext.interrupt import STOP
from vlmeval_ext.judging import FAIL_MSG, CachedJudge, VerdictStore, build_kit_judge


@pytest.fixture
def judge_env(monkeypatch):
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    monkeypatch.delenv('OPENAI_API_BASE', raising=False)
    run_context.start()
    yield
    STOP.clear()


def cached(server, tmp_path, name='loopback-judge', store=True, **kwargs):
    kit = build_kit_judge(name, api_base=server.chat_url, timeout=5, **kwargs)
    return CachedJudge(kit, name, store=VerdictStore(tmp_path / 'v.sqlite') if store else None,
                       log_path=str(tmp_path / 'log.jsonl'), unstored_path=str(tmp_path / 'unstored.jsonl'),
                       retries=kwargs.pop('retries', 2), backoff=0)


def test_a_verdict_is_asked_once_and_found_again_by_the_next_evaluation(loopback, judge_env, tmp_path):
    loopback.default = lambda body: f'Score: {len(loopback.log) % 3}'
    first = cached(loopback, tmp_path)
    replies = [first.generate('judge this') for _ in range(3)]       # three repeats of one prompt: three slots
    assert loopback.count('judge this') == 3 and len(set(replies)) == 3
    assert first.stats['made'] == 3 and first.stats['cached'] == 0
    again = cached(loopback, tmp_path)                                  # a rerun: the same verdicts, in order
    assert [again.generate('judge this') for _ in range(3)] == replies
    assert loopback.count('judge this') == 3 and again.stats == {**again.stats, 'made': 0, 'cached': 3}
    assert again.generate('judge this') not in (None, FAIL_MSG) and loopback.count('judge this') == 4   # slot 4


def test_verdicts_are_keyed_by_judge_endpoint_parameters_prompt_and_slot(loopback, judge_env, tmp_path):
    judge = cached(loopback, tmp_path)
    key = judge.key('p', 1)
    assert key == ('loopback-judge', judge.endpoint, judge.params_sha, hashlib.sha256(b'p').hexdigest(), 1)
    assert judge.endpoint == loopback.chat_url.split('://', 1)[1]
    store = VerdictStore(tmp_path / 'v.sqlite')
    assert store.put(key, 'Score: 2') == 'Score: 2' and store.get(key) == 'Score: 2'
    assert store.get(judge.key('p', 2)) is None and store.get(judge.key('p2', 1)) is None
    other_name = cached(loopback, tmp_path, name='another-judge')
    hotter = cached(loopback, tmp_path, temperature=0.7)
    assert other_name.key('p', 1) != key and hotter.key('p', 1) != key
    host, _, rest = judge.endpoint.partition(':')
    port, _, path = rest.partition('/')
    assert judging.endpoint_identity(f'http://{host}:{int(port) + 1}/{path}') != judge.endpoint
    # The same endpoint written another way (a key in the URL, the default port spelled out): the same identity.
    assert judging.endpoint_identity(f'http://user:secret@{host}:{port}/{path}/?key=secret') == judge.endpoint
    assert judging.endpoint_identity('https://api.example.com/v1') == judging.endpoint_identity(
        'https://api.example.com:443/v1/')
    # The first stored verdict wins: a second writer of the same key goes on with the stored one.
    assert store.put(key, 'Score: 0') == 'Score: 2'
    assert not any(b'secret' in p.read_bytes() for p in tmp_path.glob('v.sqlite*'))   # database and its WAL


def test_the_request_is_the_one_the_kit_resolved(loopback, judge_env, tmp_path, kit_flavour):
    loopback.default = 'ok'
    judge = cached(loopback, tmp_path, name='chatgpt-0125', judge_mode='efficient', nproc=8, verbose=False,
                   cache=False, judge_retries=3)
    assert judge.generate('Is this right?') == 'ok'
    request = loopback.log[-1]
    assert request.had_auth and FAKE_KEY not in repr(request)
    body = request.body
    # the kit's name -> model id map and its sampling defaults; our protocol keys are never sent
    assert body['model'] == 'gpt-3.5-turbo-0125' and body['temperature'] == 0
    assert not {'judge_mode', 'cache', 'judge_retries', 'nproc', 'retry', 'verbose'} & set(body)
    # Kit difference: ms-vlmeval sends a text-only prompt as a string, upstream VLMEvalKit as a list of parts.
    content = body['messages'][-1]['content']
    text = content if isinstance(content, str) else ' '.join(p.get('text', '') for p in content)
    assert text == 'Is this right?'
    assert judge.parameters['model'] == 'gpt-3.5-turbo-0125' and 'key' not in judge.parameters


@pytest.mark.parametrize('kind', ['500', 'malformed', 'empty'])
def test_each_fault_is_retried_and_a_lasting_one_is_the_kits_failure_text(loopback, judge_env, tmp_path, kind):
    loopback.default = 'Score: 2'
    judge = cached(loopback, tmp_path, retries=2)
    loopback.fail_next(kind, 2)
    assert judge.generate('q1') == 'Score: 2' and judge.stats['attempts'] == 3
    loopback.fail_next(kind, 3)
    assert judge.generate('q2') == FAIL_MSG and judge.stats['failed'] == 1
    assert VerdictStore(tmp_path / 'v.sqlite').get(judge.key('q2', 1)) is None      # a failure is never stored


def test_a_judge_that_is_down_gets_no_further_call(loopback, judge_env, tmp_path):
    judge = cached(loopback, tmp_path, retries=0)
    loopback.down = True
    for i in range(judging.DOWN_AFTER_FAILURES):
        assert judge.generate(f'q{i}') == FAIL_MSG
    assert judge.stopped == 'judge down'
    asked = len(loopback.log)
    loopback.down = False
    assert judge.generate('later') == FAIL_MSG and len(loopback.log) == asked and judge.stats['refused'] == 1
    line = judge.outcome()
    assert 'is down' in line and f'{judging.DOWN_AFTER_FAILURES + 1} judge call(s) failed or not made' in line


def test_a_model_the_server_does_not_serve_is_not_asked_again(loopback, judge_env, tmp_path):
    judge = cached(loopback, tmp_path, retries=3)
    loopback.fail_next('404', 1)
    assert judge.generate('q') == FAIL_MSG and judge.stats['attempts'] == 1
    assert 'HTTP 404' in judge.last_error


def test_stop_refuses_every_call(loopback, judge_env, tmp_path):
    judge = cached(loopback, tmp_path)
    STOP.set('interrupted')
    assert judge.generate('q') == FAIL_MSG and loopback.count() == 0 and judge.stats['refused'] == 1
    assert judge.outcome().startswith('interrupted: 1 judge call(s) not made')


def test_a_failing_store_keeps_the_verdicts_aside_and_the_next_evaluation_imports_them(loopback, judge_env,
                                                                                      tmp_path):
    loopback.default = 'Score: 1'
    judge = cached(loopback, tmp_path)

    class Full(VerdictStore):
        def put(self, key, reply):
            raise sqlite3.OperationalError('database or disk is full')
    judge.store = Full(tmp_path / 'v.sqlite')
    assert judge.generate('q') == 'Score: 1'                    # the verdict received is still used
    assert judge.stopped == 'cache failed' and judge.generate('q2') == FAIL_MSG
    assert 'disk is full' in judge.outcome() and 'unstored.jsonl' in judge.outcome()
    again = cached(loopback, tmp_path)                           # imports the kept verdict first
    assert (tmp_path / 'unstored.jsonl.imported').is_file()
    asked = loopback.count()
    assert again.generate('q') == 'Score: 1' and loopback.count() == asked


def test_a_configured_key_echoed_by_the_judge_is_masked_before_it_is_stored(loopback, judge_env, tmp_path):
    loopback.default = f'Score: 1 (your key is {FAKE_KEY})'
    judge = cached(loopback, tmp_path)
    reply = judge.generate('q')
    assert FAKE_KEY not in reply and '***' in reply
    assert not any(FAKE_KEY.encode() in p.read_bytes() for p in tmp_path.iterdir() if p.is_file())


def test_preflight_asks_once_and_stops_a_dead_judge(loopback, judge_env, tmp_path, monkeypatch):
    loopback.default = 'ready'
    judge = cached(loopback, tmp_path)
    judge.preflight()
    cached(loopback, tmp_path).preflight()                       # the same judge, endpoint and parameters: checked
    assert loopback.count(judging.PROBE_PROMPT) == 1
    # An environment variable an earlier version read as "already checked" means nothing.
    monkeypatch.setenv('VLMEVAL_EXT_JUDGE_CHECKED', 'loopback-judge')
    cached(loopback, tmp_path, temperature=0.5).preflight()
    assert loopback.count(judging.PROBE_PROMPT) == 2
    loopback.default = ''                                        # an empty reply is no answer
    with pytest.raises(judging.JudgeUnavailable, match='did not answer a test call'):
        cached(loopback, tmp_path, name='empty-judge').preflight()


# ------------------------------------------------------------------------------------------ rejections, rate limits
def test_a_prompt_the_judge_rejects_is_asked_once_remembered_and_asked_again_only_when_wanted(
        loopback, judge_env, tmp_path):
    loopback.default = 'Score: 2'
    loopback.reject('filtered topic')
    judge = cached(loopback, tmp_path)
    assert judge.generate('a filtered topic') == FAIL_MSG
    assert judge.stats['rejected'] == 1 and judge.stats['failed'] == 0 and judge.stats['attempts'] == 1
    assert judge._consecutive == 0 and judge.stopped is None            # not a sign that the judge is down
    assert judge.generate('fine') == 'Score: 2'
    log = [json.loads(line) for line in (tmp_path / 'log.jsonl').read_text().splitlines()]
    assert log[0]['reply'] is None and log[0]['rejected'].startswith('HTTP 400: ')
    # the next evaluation does not ask it again ...
    again = cached(loopback, tmp_path)
    asked = len(loopback.log)
    assert again.generate('a filtered topic') == FAIL_MSG and len(loopback.log) == asked
    assert again.stats['rejected_before'] == 1 and again.stats['attempts'] == 0
    # ... unless asked to; an answer then replaces the remembered rejection
    loopback.rejections.clear()
    kit = build_kit_judge('loopback-judge', api_base=loopback.chat_url, timeout=5)
    retry = CachedJudge(kit, 'loopback-judge', store=VerdictStore(tmp_path / 'v.sqlite'), retries=0, backoff=0,
                        retry_rejected=True)
    assert retry.generate('a filtered topic') == 'Score: 2' and len(loopback.log) == asked + 1
    assert VerdictStore(tmp_path / 'v.sqlite').rejection(retry.key('a filtered topic', 1)) is None


def test_ten_rejected_prompts_in_a_row_do_not_make_the_judge_down(loopback, judge_env, tmp_path):
    loopback.default = 'Score: 1'
    loopback.reject('^bad')
    judge = cached(loopback, tmp_path)
    assert all(judge.generate(f'bad {i}') == FAIL_MSG for i in range(12))
    assert judge.stopped is None and judge.outcome() is None and judge.generate('good') == 'Score: 1'


@pytest.mark.parametrize('status', [401, 403, 408])
def test_statuses_about_the_judge_not_the_prompt_are_failures_not_rejections(loopback, judge_env, tmp_path, status):
    loopback.reject('q', status=status)
    judge = cached(loopback, tmp_path, retries=1)
    assert judge.generate('q') == FAIL_MSG
    assert judge.stats['failed'] == 1 and judge.stats['rejected'] == 0 and judge.stats['attempts'] == 2


def test_a_rate_limit_is_waited_out_as_the_server_asks_without_using_up_retries(loopback, judge_env, tmp_path):
    loopback.default = 'Score: 2'
    loopback.retry_after = '0.3'
    judge = cached(loopback, tmp_path, retries=0)
    loopback.fail_next('429', 4)
    start = time.monotonic()
    assert judge.generate('q') == 'Score: 2'
    assert time.monotonic() - start >= 4 * 0.3
    assert judge.stats['rate_limited'] == 4 and judge.stats['failed'] == 0 and judge.stats['attempts'] == 5


def test_a_used_up_quota_is_a_failure_not_a_rate_limit(loopback, judge_env, tmp_path, monkeypatch):
    judge = cached(loopback, tmp_path, retries=1)
    monkeypatch.setattr(loopback, '_answer', lambda handler, raw: handler._send(
        429, {'error': {'message': 'You exceeded your current quota', 'type': 'insufficient_quota'}}))
    assert judge.generate('q') == FAIL_MSG and judge.stats['failed'] == 1 and judge.stats['rate_limited'] == 0


def test_rate_limited_with_no_answer_for_long_the_judge_is_down(loopback, judge_env, tmp_path, monkeypatch):
    monkeypatch.setattr(judging, 'RATE_LIMIT_DOWN_S', 0.5)
    loopback.retry_after = '0.1'
    loopback.fail_next('429', 100)
    judge = cached(loopback, tmp_path)
    assert judge.generate('q') == FAIL_MSG and judge.stopped == 'judge down'
    assert 'rate limited (HTTP 429) with no call answered' in judge.outcome()


def test_calls_in_flight_halve_once_per_round_of_rate_limits_and_grow_back():
    gate = judging.InFlight(start=8)
    epochs = [gate.enter() for _ in range(8)]
    for epoch in epochs:                      # eight calls of one round rate-limited: one cut, to 4
        gate.rate_limited(epoch)
    for _ in epochs:
        gate.leave()
    assert gate.limit == 4 and gate.lowest == 4
    epoch = gate.enter()
    gate.rate_limited(epoch)                  # a call of the new round: the next cut (1 in flight -> at least 1)
    gate.leave()
    assert gate.limit == 1
    for _ in range(1 + 2 + 3):                # one more after as many answers in a row as are allowed
        gate.answered()
    assert gate.limit == 4 and gate.lowest == 1


def test_retry_after_reads_seconds_milliseconds_and_dates():
    class Answer:
        def __init__(self, headers):
            self.headers = headers
    from email.utils import formatdate
    assert judging.retry_after(Answer({'retry-after': '7'})) == 7.0
    assert judging.retry_after(Answer({'retry-after-ms': '1500', 'retry-after': '9'})) == 1.5
    assert 28 <= judging.retry_after(Answer({'retry-after': formatdate(time.time() + 30, usegmt=True)})) <= 30
    assert judging.retry_after(Answer({'retry-after': 'soon'})) is None and judging.retry_after(Answer({})) is None
