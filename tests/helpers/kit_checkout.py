"""The installed kit copied to a temporary git repository laid out as a checkout (what `export-upstream` patches)."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path


def installed_kit() -> tuple[str, Path]:
    """Where the installed kit's code is, without importing it: ('checkout', its root) or ('wheel', its package)."""
    spec = importlib.util.find_spec('vlmeval')
    assert spec is not None and spec.origin, 'no VLMEvalKit installed'
    package = Path(spec.origin).resolve().parent
    if (package.parent / 'run.py').is_file() and (package / 'dataset' / '__init__.py').is_file():
        return 'checkout', package.parent
    assert (package / 'run.py').is_file(), f'{package}: neither a checkout nor ms-vlmeval'
    return 'wheel', package


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(['git', '-C', str(repo), '-c', 'user.name=test', '-c', 'user.email=test@example.com',
                           *args], check=True, capture_output=True, text=True).stdout


def copy_checkout(kind: str, source: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns('__pycache__', '*.pyc', '*.egg-info')
    if kind == 'checkout':
        for item in source.iterdir():
            if item.is_file() and item.suffix in ('.py', '.cfg', '.txt', '.toml', '.md', ''):
                shutil.copy2(item, dest / item.name)
        shutil.copytree(source / 'vlmeval', dest / 'vlmeval', ignore=ignore)
    else:
        shutil.copytree(source, dest / 'vlmeval', ignore=ignore)
        shutil.copy2(source / 'run.py', dest / 'run.py')
    _git(dest, 'init', '-q')
    _git(dest, 'add', '-A')
    _git(dest, 'commit', '-q', '-m', 'kit as installed')
    return dest
