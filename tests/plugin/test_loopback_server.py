"""The loopback OpenAI-compatible server the tests use as model and judge (tests/helpers), over real HTTP."""
from __future__ import annotations

import base64
import io
import json

import pytest
import requests
from PIL import Image

from helpers.loopback_server import LoopbackServer


def _png(color, size=(8, 6)) -> str:
    buf = io.BytesIO()
    Image.new('RGB', size, color).save(buf, format='PNG')
    return 'data:image/png;base64,' + base64.b64encode(buf.getvalue()).decode()


def _ask(server, content, timeout=10):
    return requests.post(server.chat_url, json={'model': 'm', 'messages': [{'role': 'user', 'content': content}]},
                         headers={'Authorization': 'Bearer sk-secret-value'}, timeout=timeout)


def test_scripted_replies_images_and_log(loopback):
    loopback.script(r'capital of France', 'Paris')
    loopback.default = lambda body: 'default:' + body['model']
    r = _ask(loopback, [{'type': 'text', 'text': 'first'}, {'type': 'image_url', 'image_url': {'url': _png('red')}},
                        {'type': 'text', 'text': 'capital of France?'},
                        {'type': 'image_url', 'image_url': {'url': _png('blue', (4, 4))}}])
    assert r.json()['choices'][0]['message']['content'] == 'Paris'
    assert _ask(loopback, 'hello').json()['choices'][0]['message']['content'] == 'default:m'
    first = loopback.log[0]
    assert first.n_images == 2 and [p[0] for p in first.parts] == ['text', 'image', 'text', 'image']
    assert first.parts[1][2] == (8, 6) and first.parts[3][2] == (4, 4)
    assert first.had_auth and 'sk-secret-value' not in repr(first)
    assert loopback.count('France') == 1 and loopback.count() == 2


@pytest.mark.parametrize('kind,check', [
    ('429', lambda r: r.status_code == 429),
    ('500', lambda r: r.status_code == 500),
    ('malformed', lambda r: r.status_code == 200 and not _is_json(r.text)),
    ('empty', lambda r: r.json()['choices'][0]['message']['content'] == ''),
    ('garbage', lambda r: r.json()['choices'][0]['message']['content'] not in ('', 'OK')),
])
def test_each_fault_kind(loopback, kind, check):
    loopback.fail_next(kind)
    assert check(_ask(loopback, 'x'))
    assert loopback.log[-1].outcome == kind
    assert _ask(loopback, 'x').json()['choices'][0]['message']['content'] == 'OK'   # only the next request


def test_timeout_fault_and_down(loopback):
    loopback.timeout_sleep = 1.5
    loopback.fail_next('timeout')
    with pytest.raises(requests.exceptions.RequestException):
        _ask(loopback, 'x', timeout=0.5)
    loopback.down = True
    assert _ask(loopback, 'x').status_code == 503


def test_random_faults_are_seeded_and_latency_applies():
    counts = []
    for _ in range(2):
        with LoopbackServer(seed=7) as server:
            server.fault_rate, server.fault_kinds = 0.5, ('500',)
            counts.append([_ask(server, 'x').status_code for _ in range(20)])
    assert counts[0] == counts[1] and 500 in counts[0] and 200 in counts[0]


def test_refuses_non_loopback_hosts():
    with pytest.raises(ValueError, match='loopback'):
        LoopbackServer(host='0.0.0.0')


def _is_json(text):
    try:
        json.loads(text)
        return True
    except ValueError:
        return False
