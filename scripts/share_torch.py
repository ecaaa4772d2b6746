"""Hard-link the torch stack of one venv into a new venv, so that the two test venvs hold it once on disk.

    SOURCE_VENV/bin/python scripts/share_torch.py TARGET_SITE_PACKAGES TORCH_VERSION TORCHVISION_VERSION
    SOURCE_VENV/bin/python scripts/share_torch.py --any-python TARGET_SITE_PACKAGES TORCH_VERSION TORCHVISION_VERSION

Run by scripts/setup_venv.sh with the Python of a venv that already has torch and torchvision at the given
versions; it links the files of torch, torchvision, triton and the nvidia-*/cuda-* wheels (about 5.4 GB of the
7 GB of a venv) into TARGET_SITE_PACKAGES, which must belong to the same Python version and have no torch yet.
`pip install torch==... torchvision==...` in the target afterwards finds them installed and adds only their
small pure-Python requirements.

With --any-python the target is another Python's (3.10, 3.12): only the wheels of the stack built for any Python 3
(tag py3-none-..., the nvidia-* CUDA libraries and the like: about 3.1 GiB) are linked; torch, torchvision, triton
and cuda-bindings, built for one Python each, are left for pip to install for that Python.

pip never writes into an installed file (it unlinks before it writes, and it uninstalls by moving), so neither venv
can change the other's files. Console scripts outside site-packages (torchrun, proton) are not linked: their first
line names the source venv's Python.

Exit status: 0 when linked; 3 when nothing was linked (versions differ, another file system, ...), with the
reason on stderr; the caller then installs torch from scratch.
"""
import importlib.metadata
import os
import re
import sys
from pathlib import Path

STACK = re.compile(r'(torch|torchvision|triton|nvidia-.+|cuda-.+)', re.IGNORECASE)


def any_python(dist):
    """Whether a distribution's wheel was built for any Python 3 (every tag of its WHEEL file py3-none-...)."""
    wheel = dist.read_text('WHEEL') or ''
    tags = [line.split(':', 1)[1].strip() for line in wheel.splitlines() if line.startswith('Tag:')]
    return bool(tags) and all(re.fullmatch(r'(py3|py2\.py3|py2)-none-\S+', tag) for tag in tags)


def stack_files(torch_version, torchvision_version, only_any_python=False):
    """(site-packages folder, [relative paths]) of this venv's torch stack, or of its wheels built for any Python 3
    when only_any_python; ValueError when the pins differ."""
    have = {name: importlib.metadata.version(name) for name in ('torch', 'torchvision')}
    if have != {'torch': torch_version, 'torchvision': torchvision_version}:
        raise ValueError(f'this venv has {have}, not torch {torch_version} and torchvision {torchvision_version}')
    site = Path(importlib.metadata.distribution('torch').locate_file(''))
    files = []
    metadata = []
    for dist in importlib.metadata.distributions():
        if not STACK.fullmatch(dist.metadata['Name'] or ''):
            continue
        if only_any_python and not any_python(dist):
            continue
        if dist.files is None:
            raise ValueError(f'{dist.metadata["Name"]} has no RECORD of its files')
        for rel in dist.files:
            if rel.parts and rel.parts[0] == '..':
                continue  # a console script in bin/
            (metadata if '.dist-info' in rel.parts[0] else files).append(str(rel))
    # The .dist-info folders last: a link that fails half-way leaves no distribution that pip would believe.
    return site, files + metadata


def link_all(site, rels, target):
    made = []
    try:
        for rel in rels:
            src, dst = site / rel, target / rel
            if not src.is_file():
                continue  # a RECORD line whose file is no longer there
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.link(src, dst)
            made.append(dst)
    except OSError:
        for path in made:
            path.unlink(missing_ok=True)
        raise
    return made


def main(argv):
    only_any_python = bool(argv) and argv[0] == '--any-python'
    if only_any_python:
        argv = argv[1:]
    target, torch_version, torchvision_version = Path(argv[0]), argv[1], argv[2]
    expected = f'python{sys.version_info[0]}.{sys.version_info[1]}'
    if only_any_python and not any(re.fullmatch(r'python3\.\d+', part) for part in target.parts):
        print(f'[setup] {target} is not a Python 3 site-packages folder', file=sys.stderr)
        return 3
    if not only_any_python and expected not in target.parts:
        print(f'[setup] {target} is not a {expected} site-packages folder', file=sys.stderr)
        return 3
    if (target / 'torch').exists():
        print(f'[setup] {target} already has torch', file=sys.stderr)
        return 3
    try:
        site, rels = stack_files(torch_version, torchvision_version, only_any_python)
        if not rels:
            raise ValueError('no wheel of the torch stack here is built for any Python 3')
        made = link_all(site, rels, target)
    except (OSError, ValueError) as err:
        print(f'[setup] torch not shared with {sys.prefix}: {err}', file=sys.stderr)
        return 3
    size = sum(path.stat().st_size for path in made)
    what = "torch stack's wheels for any Python 3" if only_any_python else 'torch stack'
    print(f'[setup] {what} hard-linked from {sys.prefix}: {len(made)} files, {size / 2**30:.1f} GiB not copied',
          file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
