"""Where a configured API key could leak: every file a run leaves and its output, searched for the fake key and its
parts."""
from __future__ import annotations

import zipfile
from pathlib import Path


from helpers.kit_run import FAKE_KEY

# Parts of the key that must not appear either (a key cut by a formatter is still a leak).
KEY_PARTS = (FAKE_KEY, FAKE_KEY[3:], FAKE_KEY[-16:])


def _texts(path: Path):
    """(name, bytes) of a file, and of each member if it is a zip container (xlsx)."""
    raw = path.read_bytes()
    yield str(path), raw
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                yield f'{path}!{member}', archive.read(member)


def leaks(root: Path) -> list[str]:
    found = []
    for path in sorted(p for p in root.rglob('*') if p.is_file()):
        if path.name == 'config.json':      # the test's own model config (holds no key either)
            assert not any(k.encode() in path.read_bytes() for k in KEY_PARTS)
            continue
        for name, data in _texts(path):
            if any(k.encode() in data for k in KEY_PARTS):
                found.append(name)
    return found
