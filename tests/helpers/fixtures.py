"""The real benchmark data the tests and benchmarks use, shipped compressed in the checkout's tests/fixtures/."""
from __future__ import annotations

import hashlib
import lzma
import os
import tempfile
from pathlib import Path

PACKED_DIR = Path(__file__).resolve().parents[2] / 'tests' / 'fixtures'


def _packed_files() -> list[Path]:
    if not PACKED_DIR.is_dir():
        raise FileNotFoundError(f'{PACKED_DIR}: the compressed fixtures are part of a source checkout, not of an '
                                'installed package')
    return sorted(PACKED_DIR.rglob('*.xz'))


def unpacked_fixtures(dest: str | os.PathLike | None = None) -> Path:
    """A folder holding every fixture decompressed (rbench/, grab/, rococo/), made once per content version.

    dest: where to unpack (default: a folder in the system temp dir named by the fixtures' content hash).
    """
    packed = _packed_files()
    digest = hashlib.sha1()
    for path in packed:
        digest.update(str(path.relative_to(PACKED_DIR)).encode())
        digest.update(str(path.stat().st_size).encode())
    root = Path(dest) if dest else Path(tempfile.gettempdir()) / f'vlmeval-ext-fixtures-{digest.hexdigest()[:12]}'
    for path in packed:
        target = root / path.relative_to(PACKED_DIR).with_suffix('')
        if target.is_file():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f'{target.name}.partial{os.getpid()}')
        with lzma.open(path) as src, open(tmp, 'wb') as out:
            while block := src.read(1 << 20):
                out.write(block)
        os.replace(tmp, target)   # atomic: parallel test workers never see half a file
    return root


# ------------------------------------------------------------------- R-Bench: the release's own files
def llava15_items(fixtures_dir) -> list[dict]:
    """The real question bank with LLaVA-1.5's outputs on both images (tests/fixtures/rbench), as the dataset's
    `pair_rows` gives items."""
    from vlmeval_ext.prepare.rbench import release_items
    fx = Path(fixtures_dir) / 'rbench' if (Path(fixtures_dir) / 'rbench').is_dir() else Path(fixtures_dir)
    return release_items(fx / 'Ref_Release.csv', fx / 'llava15_ref.csv', fx / 'llava15_dis.csv')


def read_official_results(path) -> list[float]:
    """The official notebook's Result_*.csv: column `result` per item (already in [0, 1])."""
    import csv
    with open(path, encoding='utf-8', newline='') as f:
        return [float(r['result']) for r in csv.DictReader(f)]
