"""Load the declarative benchmark specs in dataset_specs/*.yaml."""
from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import yaml


def spec_dir() -> Path:
    """The folder holding the YAML specs: the checkout's dataset_specs/, else the installed package data."""
    checkout = Path(__file__).resolve().parents[1] / 'dataset_specs'
    if checkout.is_dir():
        return checkout
    return Path(str(resources.files('vlmeval_ext.dataset_specs')))


@functools.lru_cache(maxsize=None)
def load_spec(name: str) -> dict:
    """Return the parsed spec `dataset_specs/<name>.yaml` (cached; treat it as read-only)."""
    path = spec_dir() / f'{name}.yaml'
    if not path.is_file():
        known = sorted(p.stem for p in spec_dir().glob('*.yaml'))
        raise FileNotFoundError(f'no dataset spec {path} (known specs: {", ".join(known)})')
    with open(path, encoding='utf-8') as f:
        # libyaml's parser where PyYAML has it (its wheels do): the same safe loading, a tenth of the time
        return yaml.load(f, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))
