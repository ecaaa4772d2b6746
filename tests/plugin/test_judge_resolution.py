"""What the kit's build_judge made of a judge name is kept and given back only for the same inputs
(vlmeval_ext.kit_workarounds.judge_resolution): the real kit judge (OpenAIWrapper through build_judge) is built,
kept, and rebuilt with the same verdict keys; another argument or another value of an environment variable the kit
reads is a miss; a key is never written, and a judge address carrying credentials is not kept at all."""
from __future__ import annotations

import pytest

from helpers.kit_run import FAKE_KEY

pytestmark = pytest.mark.kit


def _kit_judge(**kwargs):
    from vlmeval_ext.judging import build_kit_judge
    return build_kit_judge('loopback-judge', **kwargs)


def test_a_kept_judge_comes_back_with_the_same_verdict_keys_for_the_same_inputs_only(tmp_path, monkeypatch):
    from vlmeval_ext.judging import judge_identity, kit_judge_arguments
    from vlmeval_ext.kit_workarounds.judge_resolution import recall, remember
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    monkeypatch.delenv('LOCAL_LLM', raising=False)
    given = {'api_base': 'http://127.0.0.1:9/v1/chat/completions', 'temperature': 0, 'timeout': 60}
    judge = _kit_judge(**given)
    assert recall('loopback-judge', kit_judge_arguments(given), tmp_path, judge_identity) is None   # nothing kept
    remember('loopback-judge', kit_judge_arguments(given), judge, tmp_path, judge_identity)
    back = recall('loopback-judge', kit_judge_arguments(given), tmp_path, judge_identity)
    assert back is not None and not hasattr(back, 'generate')
    assert judge_identity('loopback-judge', back) == judge_identity('loopback-judge', judge)
    assert judge_identity('loopback-judge', back)['endpoint'] == '127.0.0.1:9/v1/chat/completions'
    # another judge name, another argument, another value of a variable the kit's judge code reads: a miss
    assert recall('other-judge', kit_judge_arguments(given), tmp_path, judge_identity) is None
    assert recall('loopback-judge', kit_judge_arguments({**given, 'temperature': 1}), tmp_path,
                  judge_identity) is None
    monkeypatch.setenv('LOCAL_LLM', 'another-model')
    assert recall('loopback-judge', kit_judge_arguments(given), tmp_path, judge_identity) is None
    monkeypatch.delenv('LOCAL_LLM')
    # another key is the same judge (a key decides no verdict), and no key is ever written
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY[:-4] + 'ZZZZ')
    assert recall('loopback-judge', kit_judge_arguments(given), tmp_path, judge_identity) is not None
    kept = ''.join(p.read_text() for p in tmp_path.glob('kit-judges-*.json'))
    assert kept and FAKE_KEY not in kept and 'ZZZZ' not in kept


def test_a_judge_whose_address_carries_credentials_is_not_kept(tmp_path, monkeypatch):
    from vlmeval_ext.judging import judge_identity, kit_judge_arguments
    from vlmeval_ext.kit_workarounds.judge_resolution import recall, remember
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    for base in ('http://user:secret@127.0.0.1:9/v1/chat/completions',
                 'http://127.0.0.1:9/v1/chat/completions?key=abc'):
        given = {'api_base': base}
        remember('loopback-judge', kit_judge_arguments(given), _kit_judge(**given), tmp_path, judge_identity)
        assert recall('loopback-judge', kit_judge_arguments(given), tmp_path, judge_identity) is None
    assert not list(tmp_path.glob('kit-judges-*.json'))
