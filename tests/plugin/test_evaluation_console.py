"""What `vlmeval-ext eval` prints: what the progress bar counts and how many calls are to come before judging,
what was paid and how long it took after; R-Bench's item count in pairs and rows; no counter lines at 0."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from helpers.grab_play import JUDGE_MARK, echo_judge
from helpers.kit_run import FAKE_KEY
from helpers.loopback_server import LoopbackServer
from vlmeval_ext.cli.main import main as cli_main


def _eval(argv, capfd):
    capfd.readouterr()
    with pytest.raises(SystemExit) as done:
        cli_main(['eval', *argv])
    out = capfd.readouterr()
    assert done.value.code == 0, out.err[-2000:]
    return out.out + out.err


def test_grab_says_what_the_bar_counts_before_judging_and_what_was_paid_after(tmp_path, capfd, monkeypatch):
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV
    data = pd.read_csv(GRAB_DEMO_TSV, sep='\t', dtype={'answer': str}).drop(columns=['image'])
    data['prediction'] = [f'It reads {a}' for a in data['answer']]
    pred = tmp_path / 'M_GRAB_DEMO.tsv'
    data.to_csv(pred, sep='\t', index=False)
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    server = LoopbackServer().start()
    server.script(JUDGE_MARK, echo_judge)
    server.default = 'ready'
    argv = ['--data', 'GRAB_DEMO', '--pred', str(pred), '--judge', 'loopback-judge', '--judge-base-url',
            server.base_url]
    try:
        said = _eval(argv, capfd)
        assert said.count('answers to extract') == 1
        # before judging: the calls to make, how many the verdict cache answers, the items
        assert 'GRAB_DEMO: 41 judge calls to make, 0 verdicts reused from the cache, 41 items' in said
        assert said.index('judge calls to make') < said.index('answers to extract')
        assert ('GRAB_DEMO: 41 answers to extract (one judge call each, up to 3 for an unreadable reply), 0 '
                'extracted in M_GRAB_DEMO_grab_extraction.pkl; the bar counts answers') in said
        assert re.search(r'\[GRAB\] judge loopback-judge: 41 call\(s\) made, 0 verdict\(s\) reused from the verdict '
                         r'cache, 0 kept from the progress file beside the predictions, 0 failed; judging took \d+ s',
                         said)
        assert '[GRAB] dataset items 41, missing from the predictions 0 (not scored)' in said
        again = _eval(argv, capfd)                                  # everything judged: no bar, nothing paid
        assert 'answers to extract' not in again
        assert re.search(r'judge loopback-judge: 0 call\(s\) made, 0 verdict\(s\) reused from the verdict cache, '
                         r'41 kept from the progress file', again)
        assert 'judge calls to make' not in again
        # the same predictions in another folder (no progress file there): every verdict comes from the cache
        other = tmp_path / 'other'
        other.mkdir()
        (other / pred.name).write_bytes(pred.read_bytes())
        moved = _eval([*argv[:3], str(other / pred.name), *argv[4:]], capfd)
        assert 'GRAB_DEMO: 41 judge calls to make, 41 verdicts reused from the cache, 41 items' in moved
        assert re.search(r'judge loopback-judge: 0 call\(s\) made, 41 verdict\(s\) reused', moved)
    finally:
        server.stop()


def test_rbench_counts_its_items_as_pairs_and_rows(tmp_path, capfd):
    from vlmeval_ext.prepare.demos import RBENCH_DEMO_TSV
    data = pd.read_csv(RBENCH_DEMO_TSV, sep='\t', dtype=str, keep_default_na=False).drop(columns=['image'])
    data['prediction'] = 'A'
    pred = tmp_path / 'M_R-Bench-Full_DEMO.tsv'
    data.iloc[:-2].to_csv(pred, sep='\t', index=False)              # the last pair left out of the predictions
    said = _eval(['--data', 'R-Bench-Full_DEMO', '--pred', str(pred), '--judge', 'offline'], capfd)
    assert ('[R-Bench] dataset items 24 pairs (48 rows: a reference and a distorted image each), rows missing '
            'from the predictions 2 (not scored)') in said


def test_rbench_says_its_judge_calls_and_the_cached_verdicts_before_judging(tmp_path, capfd, monkeypatch):
    from vlmeval_ext.prepare.demos import RBENCH_DEMO_TSV
    data = pd.read_csv(RBENCH_DEMO_TSV, sep='\t', dtype=str, keep_default_na=False).drop(columns=['image'])
    data['prediction'] = 'A'
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    server = LoopbackServer().start()
    server.default = '1'                            # a verdict every scale reads
    try:
        def run(folder, mode):
            folder.mkdir()
            pred = folder / 'M_R-Bench-Full_DEMO.tsv'
            data.to_csv(pred, sep='\t', index=False)
            return _eval(['--data', 'R-Bench-Full_DEMO', '--pred', str(pred), '--judge', 'loopback-judge',
                          '--judge-base-url', server.base_url, '--judge-args', json.dumps({'judge_mode': mode})],
                         capfd)
        said = run(tmp_path / 'a', 'official')
        planned = re.search(r'R-Bench-Full_DEMO: (\d+) judge calls to make, 0 verdicts reused from the cache, '
                            r'24 items', said)
        announced = re.search(r'distinct prompts to judge \((\d+) judge calls, official mode', said)
        assert planned and announced, said[-3000:]
        calls = int(planned.group(1))
        assert calls == int(announced.group(1)) > 24
        assert re.search(rf'judge loopback-judge: {calls} call\(s\) made, 0 verdict', said)
        again = run(tmp_path / 'b', 'official')          # no progress file there: the cache answers every call
        assert f'R-Bench-Full_DEMO: {calls} judge calls to make, {calls} verdicts reused from the cache, 24 items' \
            in again
        assert re.search(rf'judge loopback-judge: 0 call\(s\) made, {calls} verdict\(s\) reused', again)
        efficient = run(tmp_path / 'c', 'efficient')
        assert re.search(r'R-Bench-Full_DEMO: up to \d+ judge calls to make, up to \d+ verdicts reused from the '
                         r'cache, 24 items', efficient), efficient[-3000:]
    finally:
        server.stop()
