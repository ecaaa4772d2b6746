"""The launcher and CLI entry points, as a user runs them (subprocesses, real kit)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from vlmeval_ext.testing.kit_run import REPO_ROOT, run_kit


def test_unknown_dataset_stops_with_our_names(kit_env, tmp_path):
    proc = run_kit(['--data', 'No-Such-Bench', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'out'], kit_env)
    assert proc.returncode == 2
    assert 'No-Such-Bench is not officially supported' in proc.stderr
    for ours in ('R-Bench-Full', 'GRAB', 'ReMI_DEMO'):
        assert ours in proc.stderr


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


def test_help_lists_every_subcommand():
    out = subprocess.run([sys.executable, '-m', 'vlmeval_ext', '--help'], capture_output=True, text=True,
                         cwd=REPO_ROOT, env={**os.environ}).stdout
    for cmd in ('run', 'eval', 'prepare', 'list', 'corrupt-image', 'corrupt', 'rococo', 'leaderboard',
                'diff-manifests'):
        assert f'  {cmd} ' in out
