"""GRAB with `--judge offline`: official and normalized need no judge, so they run; only llm_extracted (an LLM
extracts the answer) is skipped, with a note in the output and in <stem>_score.json, and the run exits 0."""
from __future__ import annotations

import json

from vlmeval_ext.io import read_table
from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
from helpers.kit_run import kit_environment, loopback_model_config, run_kit, write_config
from helpers.loopback_server import LoopbackServer


def test_run_py_with_the_offline_judge_scores_grab_without_llm_extracted(tmp_path):
    demo = read_table(DEMO_TSV)
    with LoopbackServer() as server:
        server.default = demo['answer'].iloc[0]                  # one constant bare-number answer for every plot
        env = kit_environment(tmp_path, server)
        cfg = loopback_model_config(server, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}})
        proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out',
                        '--judge', 'offline', '--api-nproc', '4'], env=env, cwd=tmp_path)
        judge_calls = [r for r in server.log if 'A generative model has been asked' in r.prompt]
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert not judge_calls
    scores = json.loads(next((tmp_path / 'out').rglob('*_GRAB_DEMO_score.json')).read_text())
    expected = 100 * sum(a == demo['answer'].iloc[0] for a in demo['answer']) / len(demo)   # README rule, exact
    assert scores['official']['Overall'] == round(expected, 4) and 'normalized' in scores
    assert 'llm_extracted' not in scores and scores['judge'] is None
    assert scores['notes'] == ['llm_extracted: skipped (--judge offline: GRAB\'s answer extraction needs an LLM '
                               'judge and has no offline approximation); official and normalized need no judge']
    assert 'llm_extracted: skipped (--judge offline' in proc.stdout


def test_eval_command_with_the_offline_judge(tmp_path, capsys):
    from vlmeval_ext.cli.main import cmd_eval
    frame = read_table(DEMO_TSV).drop(columns=['image'])
    frame['prediction'] = frame['answer']
    path = tmp_path / 'M_GRAB_DEMO.tsv'
    frame.to_csv(path, sep='\t', index=False)
    assert cmd_eval(['--data', 'GRAB_DEMO', '--pred', str(path), '--judge', 'offline-minilm']) == 0
    scores = json.loads((tmp_path / 'M_GRAB_DEMO_score.json').read_text())
    assert scores['official']['Overall'] == 100.0 and 'llm_extracted' not in scores
    assert 'offline-minilm' in scores['notes'][0] and 'skipped' in capsys.readouterr().out
