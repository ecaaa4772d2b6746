"""Registration of this package's datasets and models into VLMEvalKit (idempotent).

Works with ms-vlmeval and an upstream checkout alike: the kit has no plugin hook, so we extend its tables in
place: `vlmeval.dataset.DATASET_CLASSES` / `SUPPORTED_DATASETS`, attributes of `vlmeval.dataset` (so `--config`
JSON "class" lookup works) and `vlmeval.config.supported_VLM`.
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import sys

# 'module:Class' of every dataset class we add. Each class defines its own DATASET_URL (never the kit's).
DATASET_CLASS_PATHS = [
    'vlmeval_ext.rbench.dataset:RBenchFull',
    'vlmeval_ext.grab.dataset:GRAB',
    'vlmeval_ext.remi.dataset:ReMI',
    'vlmeval_ext.rococo.dataset:RoCOCOMCQ',
    'vlmeval_ext.rococo.dataset:RoCOCORetrieval',
    'vlmeval_ext.corrupt.dataset:CorruptedDataset',
]

# Models that need no weights: honest, named reference models (each benchmark's naive baseline).
MODEL_FACTORIES = {
    'Naive-Baseline': 'vlmeval_ext.models.reference:NaiveBaseline',
}

_HOOKED = ('vlmeval.dataset', 'vlmeval.config')
_done: set[str] = set()


def _load(path: str):
    module, _, name = path.partition(':')
    return getattr(importlib.import_module(module), name)


@functools.lru_cache(maxsize=None)
def _dataset_classes() -> tuple[type, ...]:
    classes = []
    for path in DATASET_CLASS_PATHS:
        try:
            classes.append(_load(path))
        except ModuleNotFoundError as err:
            # A benchmark still being built is reported, not hidden.
            if err.name and err.name.startswith('vlmeval_ext'):
                print(f'[vlmeval-ext] dataset class {path} is not available: {err}', file=sys.stderr)
                continue
            raise
    return tuple(classes)


def dataset_classes() -> list[type]:
    """Our dataset classes (imports the kit)."""
    return list(_dataset_classes())


def our_dataset_names() -> list[str]:
    names = []
    for cls in dataset_classes():
        names.extend(cls.supported_datasets())
    return names


def register_datasets() -> None:
    if 'vlmeval.dataset' in _done:
        return
    _done.add('vlmeval.dataset')
    import vlmeval.dataset as kit
    for cls in dataset_classes():
        if cls not in kit.DATASET_CLASSES:
            # In front: our names are our own, and a kit class matching names loosely must not take them.
            kit.DATASET_CLASSES.insert(0, cls)
        for name in cls.supported_datasets():
            if name not in kit.SUPPORTED_DATASETS:
                kit.SUPPORTED_DATASETS.append(name)
        setattr(kit, cls.__name__, cls)


def register_models() -> None:
    if 'vlmeval.config' in _done:
        return
    _done.add('vlmeval.config')
    from functools import partial

    import vlmeval.config as config
    for name, path in MODEL_FACTORIES.items():
        if name not in config.supported_VLM:
            config.supported_VLM[name] = partial(_load(path), name=name)


def register_all() -> None:
    """Register now (imports the kit)."""
    from vlmeval_ext.core.secrets import install_log_redaction
    install_log_redaction()
    register_models()
    register_datasets()


class _PostImportHook(importlib.abc.MetaPathFinder):
    """Runs our registration right after the kit's own module finishes importing."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _HOOKED or fullname in _done:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        original_exec = spec.loader.exec_module

        def exec_module(module, _original=original_exec, _name=fullname):
            _original(module)
            from vlmeval_ext.core.secrets import install_log_redaction
            install_log_redaction()
            (register_datasets if _name == 'vlmeval.dataset' else register_models)()

        spec.loader.exec_module = exec_module
        return spec


_hook = _PostImportHook()


def install() -> None:
    """Called by `import vlmeval_ext`: register now for what the kit already imported, later for the rest."""
    if 'vlmeval.config' in sys.modules:
        register_all() if 'vlmeval.dataset' in sys.modules else register_models()
    elif 'vlmeval.dataset' in sys.modules:
        register_all()
    if not any(isinstance(f, _PostImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _hook)
