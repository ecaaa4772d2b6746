"""What `vlmeval-ext eval` prints: what the progress bar counts and how many calls are to come before judging,
what was paid and how long it took after; R-Bench's item count in pairs and rows; no counter lines at 0."""
from __future__ import annotations

import re

import pandas as pd
import pytest

from helpers.grab_play import JUDGE_MARK, echo_judge
from helpers.kit_run import FAKE_KEY
from helpers.loopback_server import LoopbackServer
from vlmeval_ext.cli import main as cli_main


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
