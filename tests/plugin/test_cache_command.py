"""`vlmeval-ext cache path|stats|clear`: the verdict cache seen and managed, and a cleared judge asked again."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from helpers.grab_play import JUDGE_MARK, echo_judge
from helpers.kit_run import FAKE_KEY
from helpers.loopback_server import LoopbackServer
from vlmeval_ext.cli.main import main as cli_main


def _cli(argv, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        cli_main(argv)
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def test_stats_list_the_judges_verdicts_and_clear_makes_the_next_evaluation_ask_again(tmp_path, capsys,
                                                                                     monkeypatch):
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV
    data = pd.read_csv(GRAB_DEMO_TSV, sep='\t', dtype={'answer': str}).drop(columns=['image'])
    data['prediction'] = [f'It reads {a}' for a in data['answer']]
    pred = tmp_path / 'M_GRAB_DEMO.tsv'
    data.to_csv(pred, sep='\t', index=False)
    cache = tmp_path / 'cache'
    monkeypatch.setenv('VLMEVAL_EXT_CACHE', str(cache))
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    server = LoopbackServer().start()
    server.script(JUDGE_MARK, echo_judge)
    server.default = 'ready'
    evaluate = ['eval', '--data', 'GRAB_DEMO', '--pred', str(pred), '--judge', 'loopback-judge',
                '--judge-base-url', server.base_url]
    try:
        code, out, err = _cli(['cache', 'path'], capsys)
        assert code == 0 and out.strip() == str(cache / 'verdicts.sqlite')
        code, out, _ = _cli(['cache', 'stats'], capsys)
        assert code == 0 and 'no verdict cache yet' in out

        assert _cli(evaluate, capsys)[0] == 0
        asked = server.count(JUDGE_MARK)
        assert asked == len(data)
        code, out, _ = _cli(['cache', 'stats'], capsys)
        assert code == 0 and f'{asked} verdict(s), 0 remembered rejection(s)' in out
        row = next(line for line in out.splitlines() if line.startswith('loopback-judge'))
        assert re.split(r'\s{2,}', row)[1:3] == [server.chat_url.split('://')[1], str(asked)]

        code, _, err = _cli(['cache', 'clear', '--judge', 'gpt-4o'], capsys)       # not a judge of this cache
        assert code == 2 and "no verdict of judge 'gpt-4o'; its judges: loopback-judge" in err
        code, out, _ = _cli(['cache', 'clear', '--judge', 'loopback-judge'], capsys)
        assert code == 0 and f'deleted {asked} verdict(s)' in out
        # The evaluation's own progress file would still resume it: delete it too, as the README says.
        for progress in tmp_path.glob('M_GRAB_DEMO_*.pkl'):
            progress.unlink()
        server.reset_log()
        assert _cli(evaluate, capsys)[0] == 0
        assert server.count(JUDGE_MARK) == asked                                      # asked again, all of them
        scores = json.loads((tmp_path / 'M_GRAB_DEMO_score.json').read_text())
        assert scores['judge_calls']['made'] == asked
    finally:
        server.stop()
