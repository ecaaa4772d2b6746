"""Every module of the package imports on the Python that runs the suite (tests/run.sh runs it on 3.10, 3.11 and
3.12), each in a fresh interpreter: no syntax, regex or standard-library feature of a newer Python."""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import vlmeval_ext

SETUP = Path(__file__).resolve().parents[2] / 'setup.py'


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(vlmeval_ext.__path__, 'vlmeval_ext.')
                  if not m.name.endswith('.__main__'))      # __main__ runs the command line


def test_every_module_imports_in_a_fresh_interpreter():
    modules = _modules()
    assert len(modules) > 40 and 'vlmeval_ext.dataset.utils.rbench_full' in modules
    code = ('import importlib, json, sys, traceback\n'
            'failed = {}\n'
            f'for name in {modules!r}:\n'
            '    try:\n'
            '        importlib.import_module(name)\n'
            '    except Exception:\n'
            '        failed[name] = traceback.format_exc(limit=3)\n'
            'print(json.dumps(failed))\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=600,
                          env={**__import__('os').environ, 'LITELLM_LOCAL_MODEL_COST_MAP': 'True'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    failed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert failed == {}, '\n'.join(f'{k}:\n{v}' for k, v in failed.items())


def test_python_requires_matches_the_oldest_python_tested():
    """setup.py's python_requires names the oldest Python tests/run.sh runs (3.10)."""
    text = SETUP.read_text(encoding='utf-8')
    assert "python_requires='>=3.10'" in text
    run_sh = (SETUP.parent / 'tests' / 'run.sh').read_text(encoding='utf-8')
    assert 'py3.10' in run_sh and 'py3.12' in run_sh
    assert json.dumps(sys.version_info[:2] >= (3, 10))   # the interpreter running this is one of them
