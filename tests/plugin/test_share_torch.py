"""scripts/share_torch.py, which tests/run.sh uses so that its two venvs hold the torch stack once on disk: it
links the running venv's own torch files into a new site-packages folder (into another Python's, only the wheels
built for any Python 3), refuses when the pins differ or the folder has torch already, and leaves nothing behind
when it cannot link."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
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


def normalized(name: str) -> str:
    return re.sub(r'[-_.]+', '_', name).lower()


def built_for_any_python_3(dist) -> bool:
    tags = [line for line in (dist.read_text('WHEEL') or '').splitlines() if line.startswith('Tag:')]
    return bool(tags) and all('-none-' in tag and tag.split()[1].startswith(('py2', 'py3')) for tag in tags)


def test_for_another_python_only_the_wheels_built_for_any_python_3_are_linked(tmp_path):
    target = tmp_path / 'lib' / 'python3.10' / 'site-packages'
    target.mkdir(parents=True)
    done = subprocess.run([sys.executable, str(SCRIPT), '--any-python', str(target), *PINS], capture_output=True,
                          text=True, timeout=300)
    if done.returncode == 3 and 'Invalid cross-device link' in done.stderr:
        assert not any(target.iterdir()), done.stderr
        return
    # This venv's CUDA libraries (nvidia-*, cuda-*), read here from their WHEEL files: none with a CPU-only torch,
    # and then nothing is linked (the test below checks that case on a venv made for it).
    expected = {normalized(d.metadata['Name']) for d in importlib.metadata.distributions()
                if re.fullmatch(r'(nvidia|cuda)-.+', d.metadata['Name'] or '', re.IGNORECASE)
                and built_for_any_python_3(d)}
    if not expected:
        assert done.returncode == 3 and 'no wheel of the torch stack here is built for any Python 3' in done.stderr
        assert not any(target.iterdir())
        return
    assert done.returncode == 0, done.stderr
    assert "wheels for any Python 3 hard-linked" in done.stderr
    linked = {normalized(path.name.split('-')[0]) for path in target.glob('*.dist-info')}
    # torch, torchvision and triton are built for one Python each: pip installs them for the target's Python.
    assert not {'torch', 'torchvision', 'triton'} & linked
    assert not (target / 'torch').exists()
    assert linked == expected
    # Every linked distribution is linked, not copied.
    for info in target.glob('*.dist-info'):
        source = Path(importlib.metadata.distribution(info.name.split('-')[0]).locate_file(info.name)) / 'RECORD'
        assert os.stat(info / 'RECORD').st_ino == os.stat(source).st_ino
    # Not into a folder of no Python 3.
    elsewhere = tmp_path / 'other' / 'python2.7' / 'site-packages'
    elsewhere.mkdir(parents=True)
    wrong = subprocess.run([sys.executable, str(SCRIPT), '--any-python', str(elsewhere), *PINS],
                           capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 3 and 'is not a Python 3 site-packages folder' in wrong.stderr
    assert not any(elsewhere.iterdir())


def installed(site: Path, name: str, version: str, tag: str, files: dict[str, str]) -> None:
    """A distribution as pip leaves it in site-packages: its files, and a .dist-info with METADATA, WHEEL, RECORD."""
    info = site / f'{name}-{version}.dist-info'
    info.mkdir(parents=True)
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n')
    (info / 'WHEEL').write_text(f'Wheel-Version: 1.0\nGenerator: bdist_wheel\nRoot-Is-Purelib: false\nTag: {tag}\n')
    record = [f'{rel},,' for rel in files] + [f'{info.name}/{part},,' for part in ('METADATA', 'WHEEL', 'RECORD')]
    (info / 'RECORD').write_text('\n'.join(record) + '\n')


def test_a_cpu_only_torch_has_no_wheel_for_any_python_3_and_links_nothing_for_another_python(tmp_path):
    # A stand-in for a venv with a CPU-only torch (aarch64, or the CPU index): torch and torchvision, each built
    # for one Python, and no CUDA library. The script runs on it alone (-S: no site-packages of this venv).
    source = tmp_path / 'cpu-venv'
    installed(source, 'torch', PINS[0], 'cp311-cp311-manylinux_2_28_aarch64', {'torch/__init__.py': ''})
    installed(source, 'torchvision', PINS[1], 'cp311-cp311-manylinux_2_28_aarch64', {'torchvision/__init__.py': ''})
    target = tmp_path / 'lib' / 'python3.10' / 'site-packages'
    target.mkdir(parents=True)
    done = subprocess.run([sys.executable, '-S', str(SCRIPT), '--any-python', str(target), *PINS],
                          capture_output=True, text=True, timeout=300, env={**os.environ, 'PYTHONPATH': str(source)})
    assert done.returncode == 3, done.stderr
    assert 'no wheel of the torch stack here is built for any Python 3' in done.stderr
    assert not any(target.iterdir())
    # The same venv shares its whole stack with a venv of its own Python: the -S run reads the stand-in, not this venv.
    own = site_folder(tmp_path / 'own')
    same = subprocess.run([sys.executable, '-S', str(SCRIPT), str(own), *PINS], capture_output=True, text=True,
                          timeout=300, env={**os.environ, 'PYTHONPATH': str(source)})
    assert same.returncode == 0, same.stderr
    assert sorted(str(path.relative_to(own)) for path in own.rglob('*') if path.is_file()) == sorted(
        str(path.relative_to(source)) for path in source.rglob('*') if path.is_file())
