"""The launcher and CLI entry points, as a user runs them (subprocesses, real kit, loopback server).

The same tests run on ms-vlmeval and on an upstream VLMEvalKit checkout; where the kit's layout differs (an
upstream checkout writes each run into <work-dir>/<model>/<run id>/), the test says so.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.kit_run import (FAKE_KEY, REPO_ROOT, kit_environment, loopback_model_config, run_kit,
                                         write_config)

GRAB_CONFIG = {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}}


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith('[vlmeval-ext]')]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _upstream_layout() -> bool:
    """True for an upstream checkout (run.py beside the vlmeval package), False for ms-vlmeval (vlmeval.run)."""
    from vlmeval_ext.launcher import find_kit_entry
    return find_kit_entry().kind == 'script'


# ---- the kit's entry point ------------------------------------------------------------------------------------
def test_kit_entry_point_is_found_without_any_environment_variable(monkeypatch, tmp_path):
    import importlib.util

    from vlmeval_ext.errors import KitEntryPointNotFound
    from vlmeval_ext.launcher import RUN_PY_OVERRIDE, find_kit_entry
    monkeypatch.delenv(RUN_PY_OVERRIDE, raising=False)
    package = Path(importlib.util.find_spec('vlmeval').origin).parent
    entry = find_kit_entry()
    if (package / 'run.py').is_file():            # ms-vlmeval: the launcher is the module vlmeval.run
        assert (entry.kind, entry.target) == ('module', 'vlmeval.run')
    else:                                         # an upstream checkout: its run.py beside the package
        assert entry.kind == 'script' and Path(entry.target) == package.parent / 'run.py'
    assert Path(entry.source).is_file()
    # The override still works, and a wrong one is one clear error.
    script = tmp_path / 'run.py'
    script.write_text('import vlmeval\n')
    monkeypatch.setenv(RUN_PY_OVERRIDE, str(script))
    assert find_kit_entry().target == str(script)
    monkeypatch.setenv(RUN_PY_OVERRIDE, str(tmp_path / 'missing.py'))
    with pytest.raises(KitEntryPointNotFound, match='missing.py is not a file'):
        find_kit_entry()


def test_arguments_are_read_as_the_kit_reads_them():
    """The kit's own parser reads the command line (its abbreviations, its defaults); ours only looks first."""
    from vlmeval_ext.launcher import early_args, find_kit_entry, kit_args
    entry = find_kit_entry()
    kit_ns = entry.namespace()
    args = kit_args(kit_ns, entry, ['--data', 'A', 'B', '--judge', 'gpt-4o', '--judge-base', 'http://h/v1'])
    assert (args.data, args.judge, args.judge_key, args.judge_base_url) == (['A', 'B'], 'gpt-4o', None, 'http://h/v1')
    assert kit_args(kit_ns, entry, ['--judge-k', FAKE_KEY]).judge_key == FAKE_KEY       # an abbreviation
    assert kit_args(kit_ns, entry, [f'--judge-ke={FAKE_KEY}']).judge_key == FAKE_KEY
    early = early_args(['--data', 'A', '--model', 'M', '--reuse'])
    assert (early.data, early.model, early.reuse, early.work_dir) == (['A'], ['M'], True, './outputs')


@pytest.mark.parametrize('argv, says', [
    (['--judge-key', FAKE_KEY], '--judge-key would be written'),
    (['--judge-k', FAKE_KEY], '--judge-key would be written'),
    ([f'--judge-ke={FAKE_KEY}'], '--judge-key would be written'),
    (['--judge-ke', FAKE_KEY], '--judge-key would be written'),
    (['--key', FAKE_KEY], '--key would be written'),
    (['--judge-base-url', f'http://user:{FAKE_KEY}@127.0.0.1:9/v1'], '--judge-base-url: credentials in the URL'),
    (['--base-url', f'http://{FAKE_KEY}@127.0.0.1:9/v1'], '--base-url: credentials in the URL'),
    (['--judge-args', json.dumps({'api_key': FAKE_KEY})], "--judge-args: field 'api_key'"),
])
def test_a_key_on_the_command_line_is_refused_before_the_kit_sees_it(tmp_path, argv, says):
    env = kit_environment(tmp_path)
    out = tmp_path / 'out'
    proc = run_kit(['--data', 'GRAB_DEMO', '--model', 'Naive-Baseline', '--work-dir', out, *argv], env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and says in lines[0] and 'Traceback' not in proc.stderr, proc.stderr
    assert FAKE_KEY not in proc.stdout + proc.stderr
    assert not out.exists()                       # nothing started: no status.json, no log


# ---- before the kit ---------------------------------------------------------------------------------------------
def test_unknown_dataset_stops_with_our_names(kit_env, tmp_path):
    proc = run_kit(['--data', 'No-Such-Bench', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'out'], kit_env)
    assert proc.returncode == 2
    assert "unknown dataset 'No-Such-Bench'" in proc.stderr and len(_error_lines(proc.stderr)) == 1
    for ours in ('R-Bench-Full', 'GRAB', 'ReMI', '*_DEMO'):
        assert ours in proc.stderr


def test_dead_model_endpoint_stops_before_inference(tmp_path, loopback):
    """An API model at a closed port: one test call fails, exit 2 with one line, nothing run, nothing written."""
    env = kit_environment(tmp_path, loopback)
    cfg = loopback_model_config(loopback, GRAB_CONFIG, retry=1, wait=0, timeout=5)
    cfg['model']['LoopbackGPT']['api_base'] = f'http://127.0.0.1:{_closed_port()}/v1/chat/completions'
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out'], env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and 'API model LoopbackGPT did not answer a test call' in lines[0], proc.stderr[-3000:]
    assert not (tmp_path / 'out').exists() or not list((tmp_path / 'out').rglob('*.png'))
    assert not list(tmp_path.rglob('LoopbackGPT_GRAB_DEMO.*'))


def test_dead_base_url_model_stops_before_inference(tmp_path):
    env = kit_environment(tmp_path)
    proc = run_kit(['--data', 'GRAB_DEMO', '--model', 'served-model', '--work-dir', tmp_path / 'out',
                    '--base-url', f'http://127.0.0.1:{_closed_port()}/v1', '--retry', '1'], env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and 'API model served-model' in lines[0], proc.stderr[-3000:]
    assert not list(tmp_path.rglob('served-model_GRAB_DEMO.*'))


def test_torn_checkpoint_is_moved_aside_and_the_run_finishes(kit_env, tmp_path):
    """A prediction checkpoint torn by a kill mid-write: the kit cannot load it (and stops the combination); the
    launcher moves it aside with one line saying what was lost, and the run finishes."""
    model_dir = tmp_path / 'out' / 'Naive-Baseline'
    # Where the kit reads it back: the model folder (ms-vlmeval), or an earlier run folder it reuses with --reuse
    # (an upstream checkout writes each run into its own folder).
    folder = model_dir / 'T20200101-000000' if _upstream_layout() else model_dir
    folder.mkdir(parents=True)
    whole = pickle.dumps({0: '-9', 90: '3'})
    torn = folder / '01_GRAB_DEMO.pkl'           # the kit's per-rank checkpoint of a local model (rank 0 of 1)
    torn.write_bytes(whole[:len(whole) // 2])
    proc = run_kit(['--data', 'GRAB_DEMO', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'out', '--reuse'],
                   kit_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in _error_lines(proc.stderr) if 'cannot be loaded' in line]
    assert len(said) == 1 and str(torn) in said[0] and 'Lost: the Naive-Baseline x GRAB_DEMO predictions' in said[0]
    assert not torn.exists() and len(list(folder.glob('01_GRAB_DEMO.pkl.unreadable-*'))) == 1
    scores = json.loads((model_dir / 'Naive-Baseline_GRAB_DEMO_score.json').read_text())
    assert scores['official']['counts']['scored'] == 41


def _empty_model(server):
    """A model endpoint that answers the launcher's test call and then only empty replies (the kit retries an
    empty reply and finally writes its failure text)."""
    from vlmeval_ext.launcher import PROBE_PROMPT
    server.script(PROBE_PROMPT, 'ready')
    server.default = ''


def test_a_dataset_whose_predictions_all_failed_exits_1(tmp_path, loopback):
    _empty_model(loopback)
    env = kit_environment(tmp_path, loopback)
    cfg = loopback_model_config(loopback, GRAB_CONFIG, retry=1, wait=0, timeout=5)
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '8'], env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in _error_lines(proc.stderr) if 'FAILED' in line]
    assert lines == ['[vlmeval-ext] FAILED: LoopbackGPT x GRAB_DEMO: all 41 predictions are the kit\'s inference '
                     'failure text (the model answered nothing; see LoopbackGPT_GRAB_DEMO.tsv): nothing was '
                     'scored'], proc.stderr[-3000:]


def test_api_mode_exits_1_on_an_evaluation_error(tmp_path, loopback):
    """--api-mode keeps its status in a per-run folder: an evaluation error there is found and exits 1."""
    loopback.default = 'A'
    env = kit_environment(tmp_path, loopback)
    proc = run_kit(['--data', 'R-Bench-Full_DEMO', '--model', 'served-model', '--base-url', loopback.base_url,
                    '--api-mode', '--judge', 'exact_matching', '--work-dir', tmp_path / 'out'], env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in _error_lines(proc.stderr) if 'FAILED' in line]
    assert len(lines) == 1 and 'served-model x R-Bench-Full_DEMO' in lines[0] and 'needs an LLM judge' in lines[0]


def test_the_judge_gets_one_test_call_and_the_users_options_stay_as_typed(tmp_path, loopback):
    """The launcher's test call to the judge is the only one (the evaluation runs in the same process and knows
    this judge was checked); nothing is added to the user's judge arguments (the kit's status.json shows them)."""
    loopback.default = '-9'
    env = kit_environment(tmp_path, loopback)
    proc = run_kit(['--data', 'GRAB_DEMO', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'out',
                    '--judge', 'loopback-judge', '--api-nproc', '4'], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert loopback.count('Reply with the single word: ready') == 1
    # and the extraction ran: one call per distinct extraction prompt (equal prompts share one cached verdict)
    asked = [r.prompt for r in loopback.log if r.prompt != 'Reply with the single word: ready']
    assert len(asked) > 20 and len(asked) == len(set(asked))
    status = next((tmp_path / 'out' / 'Naive-Baseline').rglob('status.json'))
    argv = json.loads(status.read_text())['argv']
    assert '--judge-args' not in argv and argv[-1] == '--reuse'       # --reuse: the launcher resumes by default


def test_run_records_are_written_for_each_of_our_datasets(kit_env, tmp_path):
    proc = run_kit(['--data', 'GRAB_DEMO', 'ReMI_DEMO', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'out'],
                   kit_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    model_dir = tmp_path / 'out' / 'Naive-Baseline'
    for name, items in (('GRAB_DEMO', 41), ('ReMI_DEMO', 13)):
        manifest = json.loads((model_dir / f'Naive-Baseline_{name}_manifest.json').read_text())
        assert manifest['model']['name'] == 'Naive-Baseline' and manifest['dataset']['n_items'] == items
        assert manifest['dataset']['tsv_md5'] is not None and manifest['prompt_sha1']
    remi = json.loads((model_dir / 'Naive-Baseline_ReMI_DEMO_manifest.json').read_text())
    assert remi['input_mode'] == 'interleaved' and remi['judge']['model'] is None


# ---- the CLI ------------------------------------------------------------------------------------------------------
def test_cli_list_eval_errors_and_console_script(kit_env, tmp_path):
    exe = shutil.which('vlmeval-ext', path=str(Path(sys.executable).parent))
    assert exe, 'the console script vlmeval-ext is installed with the package'
    listing = subprocess.run([exe, 'list'], env=kit_env, capture_output=True, text=True, timeout=600)
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert 'GRAB_DEMO' in listing.stdout and 'demo (ships in package)' in listing.stdout
    # `eval` on a predictions file missing columns: a one-line error naming the file, exit != 0.
    bad = tmp_path / 'preds.tsv'
    bad.write_text('index\tquestion\n1\tWhat?\n')
    proc = run_kit(['eval', '--data', 'GRAB_DEMO', '--pred', bad], kit_env, entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and 'missing column' in proc.stderr and 'Traceback' not in proc.stderr
    # An unknown dataset and a missing file: one line each, exit 2.
    for args, says in ((['eval', '--data', 'Nope', '--pred', bad], "unknown dataset 'Nope'"),
                       (['records', '--data', 'GRAB_DEMO', tmp_path / 'none.xlsx'], 'none.xlsx not found')):
        proc = run_kit(args, kit_env, entry=('-m', 'vlmeval_ext'))
        assert proc.returncode == 2 and says in proc.stderr and 'Traceback' not in proc.stderr, proc.stderr[-2000:]


def test_help_lists_every_subcommand():
    out = subprocess.run([sys.executable, '-m', 'vlmeval_ext', '--help'], capture_output=True, text=True,
                         cwd=REPO_ROOT, env={**os.environ}).stdout
    for cmd in ('run', 'eval', 'records', 'prepare', 'list', 'corrupt-image', 'corrupt', 'rococo', 'leaderboard',
                'diff-manifests', 'export-upstream', 'summary'):
        assert f'  {cmd} ' in out


def test_our_judge_options_reach_no_request_and_not_the_kits_judge(tmp_path, loopback):
    """`--judge-args` mixing our options (judge_mode, cache) with a kit judge argument (temperature): the kit gets
    only its own (a kit dataset of the same run would send the rest to an OpenAI endpoint, which refuses unknown
    fields), and no request of our judge carries ours."""
    loopback.default = '-9'
    env = kit_environment(tmp_path, loopback)
    proc = run_kit(['--data', 'GRAB_DEMO', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'out',
                    '--judge', 'loopback-judge', '--api-nproc', '4',
                    '--judge-args', json.dumps({'judge_mode': 'efficient', 'cache': False, 'temperature': 0.2})], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = next((tmp_path / 'out' / 'Naive-Baseline').rglob('status.json'))
    argv = json.loads(status.read_text())['argv']
    assert json.loads(argv[argv.index('--judge-args') + 1]) == {'temperature': 0.2}
    bodies = [r.body for r in loopback.log]
    assert len(bodies) > 20 and all('judge_mode' not in b and 'cache' not in b for b in bodies)
    assert all(b.get('temperature') == 0.2 for b in bodies)


def test_the_judge_test_call_goes_where_judge_args_api_base_points(tmp_path, loopback):
    """`api_base` given in --judge-args (a kit judge argument), OPENAI_API_BASE elsewhere: the test call and every
    verdict go to the configured judge, never to OPENAI_API_BASE (where the key would be sent)."""
    from helpers.kit_tables import closed_port_url
    loopback.default = '-9'
    env = {**kit_environment(tmp_path), 'OPENAI_API_BASE': closed_port_url()}
    proc = run_kit(['--data', 'GRAB_DEMO', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'out',
                    '--judge', 'loopback-judge', '--judge-args', json.dumps({'api_base': loopback.chat_url})], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert loopback.count('Reply with the single word: ready') == 1 and len(loopback.log) > 20
