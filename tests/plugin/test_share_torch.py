"""scripts/share_torch.py, which tests/run.sh uses so that its two venvs hold the torch stack once on disk: it
links the running venv's own torch files into a new site-packages folder (into another Python's, only the wheels
built for any Python 3), refuses when the pins differ or the folder has torch already, and leaves nothing behind
when it cannot link."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from helpers.kit_run import REPO_ROOT

SCRIPT = REPO_ROOT / 'scripts' / 'share_torch.py'
PINS = [importlib.metadata.version('torch'), importlib.metadata.version('torchvision')]  # this venv's


def share(target: Path, *pins: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(target), *pins], capture_output=True, text=True,
                          timeout=300)


def site_folder(tmp_path: Path) -> Path:
    target = tmp_path / 'lib' / f'python{sys.version_info[0]}.{sys.version_info[1]}' / 'site-packages'
    target.mkdir(parents=True)
    return target


def test_the_torch_stack_is_linked_not_copied_and_the_new_python_imports_it(tmp_path):
    target = site_folder(tmp_path)
    done = share(target, *PINS)
    if done.returncode == 3 and 'Invalid cross-device link' in done.stderr:
        # This venv and the temp folder are on two file systems: nothing may be left half-linked.
        assert not any(target.iterdir()), done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert 'hard-linked' in done.stderr
    source = Path(importlib.util.find_spec('torch').origin)   # without importing torch here
    linked = target / 'torch' / '__init__.py'
    assert os.stat(linked).st_ino == os.stat(source).st_ino
    assert (target / f'torch-{PINS[0]}.dist-info' / 'RECORD').is_file()
    assert any(target.glob('triton-*.dist-info')) and any(target.glob('torchvision-*.dist-info'))
    # A Python with the linked folder first on its path imports torch from it (its small pure-Python
    # requirements, which pip adds in a real venv, come from this venv).
    probe = subprocess.run([sys.executable, '-c', 'import sys; sys.path.insert(0, sys.argv[1]); '
                            'import torch; print(torch.__file__, torch.__version__)', str(target)],
                           capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split()[0] == str(linked)
    assert probe.stdout.split()[1].split('+')[0] == PINS[0]
    # A second time: the folder has torch, and nothing is linked over it.
    again = share(target, *PINS)
    assert again.returncode == 3 and 'already has torch' in again.stderr


def test_other_pins_or_another_python_version_link_nothing(tmp_path):
    target = site_folder(tmp_path)
    other = share(target, '0.0.1', PINS[1])
    assert other.returncode == 3 and 'not torch 0.0.1' in other.stderr
    assert not any(target.iterdir())
    elsewhere = tmp_path / 'lib' / 'python2.7' / 'site-packages'
    elsewhere.mkdir(parents=True)
    wrong = share(elsewhere, *PINS)
    assert wrong.returncode == 3 and 'is not a python3' in wrong.stderr
    assert not any(elsewhere.iterdir())


def test_a_link_that_fails_half_way_takes_back_every_link_it_made(tmp_path):
    target = site_folder(tmp_path)
    # The .dist-info folders are linked last: a file already at torch's RECORD stops the run near its end.
    record = target / f'torch-{PINS[0]}.dist-info' / 'RECORD'
    record.parent.mkdir()
    record.write_text('in the way\n')
    done = share(target, *PINS)
    assert done.returncode == 3 and ('File exists' in done.stderr or 'cross-device' in done.stderr)
    left = [path for path in target.rglob('*') if path.is_file()]
    assert left == [record] and record.read_text() == 'in the way\n'


def test_for_another_python_only_the_wheels_built_for_any_python_3_are_linked(tmp_path):
    target = tmp_path / 'lib' / 'python3.10' / 'site-packages'
    target.mkdir(parents=True)
    done = subprocess.run([sys.executable, str(SCRIPT), '--any-python', str(target), *PINS], capture_output=True,
                          text=True, timeout=300)
    if done.returncode == 3 and 'Invalid cross-device link' in done.stderr:
        assert not any(target.iterdir()), done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert "wheels for any Python 3 hard-linked" in done.stderr
    linked = {path.name.split('-')[0].lower() for path in target.glob('*.dist-info')}
    # torch, torchvision and triton are built for one Python each: pip installs them for the target's Python.
    assert not {'torch', 'torchvision', 'triton'} & linked
    assert not (target / 'torch').exists()
    # Every linked distribution is one whose WHEEL says py3-none (the CUDA libraries), linked, not copied.
    for info in target.glob('*.dist-info'):
        tags = [line for line in (info / 'WHEEL').read_text().splitlines() if line.startswith('Tag:')]
        assert tags and all('-none-' in tag and tag.split()[1].startswith(('py2', 'py3')) for tag in tags), info
        source = Path(importlib.metadata.distribution(info.name.split('-')[0]).locate_file(info.name)) / 'RECORD'
        assert os.stat(info / 'RECORD').st_ino == os.stat(source).st_ino
    wheels = [d for d in importlib.metadata.distributions()
              if (d.metadata['Name'] or '').lower().startswith('nvidia-')]
    assert len(linked) >= len(wheels)
    # Not into a folder of no Python 3.
    elsewhere = tmp_path / 'other' / 'python2.7' / 'site-packages'
    elsewhere.mkdir(parents=True)
    wrong = subprocess.run([sys.executable, str(SCRIPT), '--any-python', str(elsewhere), *PINS],
                           capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 3 and 'is not a Python 3 site-packages folder' in wrong.stderr
    assert not any(elsewhere.iterdir())
