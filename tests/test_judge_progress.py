"""What the user sees while judging: one line with the verdicts reused and the calls to ask, then progress in calls
(done/total, rate, ETA) that stays on screen. The judge is the loopback server, reached through the kit's judge
(core.judging.kit_judge_caller); R-Bench's real tasks on LLaVA-1.5's real outputs."""
from __future__ import annotations

import io
import re

import pytest

from vlmeval_ext.core.judge import VerdictCache, run_tasks
from vlmeval_ext.rbench.fixtures import llava15_items
from vlmeval_ext.rbench.score import make_tasks, official_calls, plan_tasks
from vlmeval_ext.testing.kit_run import FAKE_KEY

RB_MARK = 'Please only provide the result in the following format: Score:'
BAR = re.compile(r'R-Bench judging: (\d+)/(\d+) calls \[[^\]]*<[^\]]*call/s\]')


@pytest.fixture(scope='module')
def items(fixtures_dir):
    return llava15_items(fixtures_dir / 'rbench')


@pytest.fixture
def judge_call(loopback):
    import vlmeval.dataset  # noqa: F401
    from vlmeval_ext.core.judging import kit_judge_caller
    loopback.script(RB_MARK, 'Score: 1')
    call, _host = kit_judge_caller('loopback-judge', api_base=loopback.chat_url, key=FAKE_KEY, timeout=30)
    return call


def _run(tasks, call, cache, mode='official'):
    out = io.StringIO()
    planned, _ = plan_tasks(tasks)
    results, stats = run_tasks(planned, call, cache, mode=mode, nproc=8, backoff=0, desc='R-Bench judging',
                               progress=out)
    return out.getvalue(), results, stats


def test_resume_says_what_was_reused_and_the_bar_counts_only_calls_to_ask(items, judge_call, loopback, tmp_path):
    chosen = [it for it in items if it.type == 'VQA'][:12]
    cache = VerdictCache(tmp_path / 'v.sqlite', 'loopback-judge', loopback.chat_url)
    # A first run judged the first 4 items, then stopped (killed, or the user evaluated a subset).
    first, _, _ = _run([t for it in chosen[:4] for t in make_tasks(it)], judge_call, cache)
    done = loopback.count(RB_MARK)
    assert done == 4 * 15 and f'0 verdicts reused, {done} to ask' in first
    loopback.reset_log()
    text, results, stats = _run([t for it in chosen for t in make_tasks(it)], judge_call, cache)
    total = sum(official_calls(t) for it in chosen for t in make_tasks(it))
    to_ask = total - done
    assert loopback.count(RB_MARK) == to_ask == stats.calls_made and stats.calls_cached == done
    lines = text.splitlines()
    assert lines[0].startswith(f'[R-Bench judging] {done} verdicts reused, {to_ask} to ask (verdict cache ')
    bars = [(int(n), int(of)) for n, of in BAR.findall(text)]
    assert bars and all(of == to_ask for _, of in bars)       # never a total that counts reused verdicts
    assert bars[-1] == (to_ask, to_ask)
    # The finished bar stays on screen (the last thing written is the bar, then a newline; nothing cleared).
    assert BAR.search(text.rstrip('\n').split('\r')[-1]) and text.endswith('\n')
    assert all(s.score == 0.5 for s in results.values())      # VQA: five verdicts of 1 -> 5 / 10


def test_efficient_mode_announces_an_upper_bound_and_ends_at_what_it_asked(items, judge_call, loopback, tmp_path):
    chosen = [it for it in items if it.type == 'CAP'][:6]
    cache = VerdictCache(tmp_path / 'v.sqlite', 'loopback-judge', loopback.chat_url)
    text, _, stats = _run([t for it in chosen for t in make_tasks(it, mode='efficient')], judge_call, cache,
                          mode='efficient')
    head = re.match(r'\[R-Bench judging\] 0 verdicts reused, (at most )?(\d+) to ask', text)
    assert head and int(head.group(2)) >= stats.calls_made == loopback.count(RB_MARK) > 0
    bars = [(int(n), int(of)) for n, of in BAR.findall(text)]
    assert bars[-1] == (stats.calls_made, stats.calls_made)


def test_everything_reused_prints_the_line_and_no_bar(items, judge_call, loopback, tmp_path):
    tasks = [t for it in items[:3] for t in make_tasks(it)]
    cache = VerdictCache(tmp_path / 'v.sqlite', 'loopback-judge', loopback.chat_url)
    _run(tasks, judge_call, cache)
    loopback.reset_log()
    text, _, stats = _run([t for it in items[:3] for t in make_tasks(it)], judge_call, cache)
    assert loopback.count(RB_MARK) == 0 and stats.calls_cached == 45
    assert text.startswith('[R-Bench judging] 45 verdicts reused, 0 to ask') and not BAR.search(text)
