"""Hard-link the torch stack of one venv into a new venv, so that the two test venvs hold it once on disk.

    SOURCE_VENV/bin/python scripts/share_torch.py TARGET_SITE_PACKAGES TORCH_VERSION TORCHVISION_VERSION

Run by scripts/setup_venv.sh with the Python of a venv that already has torch and torchvision at the given
versions; it links the files of torch, torchvision, triton and the nvidia-*/cuda-* wheels (about 5.4 GB of the
7 GB of a venv) into TARGET_SITE_PACKAGES, which must belong to the same Python version and have no torch yet.
`pip install torch==... torchvision==...` in the target afterwards finds them installed and adds only their
small pure-Python requirements. pip never writes into an installed file (it unlinks before it writes, and it
uninstalls by moving), so neither venv can change the other's files. Console scripts outside site-packages
(torchrun, proton) are not linked: their first line names the source venv's Python.

Exit status: 0 when linked; 3 when nothing was linked (versions differ, another file system, ...), with the
reason on stderr; the caller then installs torch from scratch.
"""
import importlib.metadata
import os
import re
import sys
from pathlib import Path

STACK = re.compile(r'(torch|torchvision|triton|nvidia-.+|cuda-.+)', re.IGNORECASE)


def stack_files(torch_version, torchvision_version):
    """(site-packages folder, [relative paths]) of this venv's torch stack; ValueError when the pins differ."""
    have = {name: importlib.metadata.version(name) for name in ('torch', 'torchvision')}
    if have != {'torch': torch_version, 'torchvision': torchvision_version}:
        raise ValueError(f'this venv has {have}, not torch {torch_version} and torchvision {torchvision_version}')
    site = Path(importlib.metadata.distribution('torch').locate_file(''))
    files = []
    metadata = []
    for dist in importlib.metadata.distributions():
        if not STACK.fullmatch(dist.metadata['Name'] or ''):
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
    target, torch_version, torchvision_version = Path(argv[0]), argv[1], argv[2]
    expected = f'python{sys.version_info[0]}.{sys.version_info[1]}'
    if expected not in target.parts:
        print(f'[setup] {target} is not a {expected} site-packages folder', file=sys.stderr)
        return 3
    if (target / 'torch').exists():
        print(f'[setup] {target} already has torch', file=sys.stderr)
        return 3
    try:
        site, rels = stack_files(torch_version, torchvision_version)
        made = link_all(site, rels, target)
    except (OSError, ValueError) as err:
        print(f'[setup] torch not shared with {sys.prefix}: {err}', file=sys.stderr)
        return 3
    size = sum(path.stat().st_size for path in made)
    print(f'[setup] torch stack hard-linked from {sys.prefix}: {len(made)} files, {size / 2**30:.1f} GiB not copied',
          file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
