"""Upstream readiness: every dataset class works with the plugin's CLI and launcher absent (as it would inside
VLMEvalKit's vlmeval/dataset/, where only the imports change and the class is listed in the kit's dataset table,
which `vlmeval_ext.register()` does here)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from vlmeval_ext.registry import DATASET_CLASS_PATHS
from vlmeval_ext.testing.kit_run import REPO_ROOT


def test_dataset_classes_import_and_build_without_cli_or_launcher(tmp_path):
    copy = tmp_path / 'src'
    shutil.copytree(REPO_ROOT / 'vlmeval_ext', copy / 'vlmeval_ext',
                    ignore=shutil.ignore_patterns('__pycache__'))
    shutil.copytree(REPO_ROOT / 'dataset_specs', copy / 'dataset_specs')
    for gone in ('cli.py', 'launcher.py', '__main__.py'):
        (copy / 'vlmeval_ext' / gone).unlink()
    lmu = tmp_path / 'LMUData'
    lmu.mkdir()
    code = f'''
import importlib, sys
import vlmeval.dataset as kit
import vlmeval_ext
vlmeval_ext.register()
assert 'vlmeval_ext.cli' not in sys.modules and 'vlmeval_ext.launcher' not in sys.modules
paths = {DATASET_CLASS_PATHS!r}
for path in paths:
    module, name = path.split(':')
    cls = getattr(importlib.import_module(module), name)
    assert cls.__module__.startswith('vlmeval_ext.'), cls
    assert cls in kit.DATASET_CLASSES, name
# A kit-style build of a demo split, exactly as run.py does it.
ds = kit.build_dataset('GRAB_DEMO')
assert len(ds) > 0 and ds.build_prompt(ds.data.iloc[0])[-1]['type'] == 'text'
import vlmeval_ext
assert vlmeval_ext.__file__.startswith({str(copy)!r})
print('ok', len(paths))
'''
    env = {**os.environ, 'PYTHONPATH': str(copy), 'LMUData': str(lmu)}
    proc = subprocess.run([sys.executable, '-c', code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith(f'ok {len(DATASET_CLASS_PATHS)}')
