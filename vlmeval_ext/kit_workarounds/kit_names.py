"""The kit's dataset names without importing the kit: an unknown `--data` is named in a second, not after the
kit's import (10-20 s).

Only the kit knows its own dataset names (`SUPPORTED_DATASETS`, `supported_video_datasets`), and importing it is the
slow part. So the first run of a kit reads them from the imported kit and keeps them in
`$VLMEVAL_EXT_CACHE/kit-dataset-names-<hash>.json`, keyed by the bytes of the two kit files that list them (found
without importing the kit); every later run reads that file. No upstream patch removes this: it goes once the kit
can list its datasets without importing its models.
"""
from __future__ import annotations

import json
import os
from pathlib import Path


def kit_names_file(cache: Path) -> Path | None:
    """Where in the folder `cache` the dataset names of the installed kit are kept, keyed by the bytes of the two kit
    files that list them (found without importing the kit): a kit upgrade or an edited checkout reads its names
    afresh."""
    import hashlib
    import importlib.util
    spec = importlib.util.find_spec('vlmeval')
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]) / 'dataset'
    digest = hashlib.sha256()
    for part in ('__init__.py', 'video_dataset_config.py'):
        try:
            digest.update((root / part).read_bytes())
        except OSError:
            return None
    return cache / f'kit-dataset-names-{digest.hexdigest()[:16]}.json'


def known_dataset_names(ours: list[str], cache: Path, kit_loaded: bool) -> list[str] | None:
    """Every dataset name the kit knows, after `ours`. With the kit loaded: from the kit, and kept in `cache` for the
    next run (a write that fails is no error: the names are only a shortcut). Before the kit's import: the names
    kept by an earlier run of this kit, None when there are none."""
    path = kit_names_file(cache)
    if not kit_loaded:
        try:
            kit_names = json.loads(path.read_text(encoding='utf-8')) if path else None
        except (OSError, ValueError):
            return None
        if not isinstance(kit_names, list):
            return None
        return list(dict.fromkeys([*ours, *map(str, kit_names)]))
    import vlmeval.dataset as kit
    from vlmeval.dataset.video_dataset_config import supported_video_datasets
    kit_names = [n for n in dict.fromkeys([*kit.SUPPORTED_DATASETS, *supported_video_datasets]) if n not in set(ours)]
    if path is not None and not path.is_file():      # keyed by the kit's files: written once per kit
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f'{path.name}.{os.getpid()}.tmp')
            tmp.write_text(json.dumps(kit_names), encoding='utf-8')
            os.replace(tmp, path)
        except OSError:
            pass
    return list(dict.fromkeys([*ours, *kit_names]))
