"""Registration of this package's datasets and models into VLMEvalKit (idempotent).

Works with ms-vlmeval and an upstream checkout alike: the kit has no plugin hook, so we extend its tables in
place: `vlmeval.dataset.DATASET_CLASSES` / `SUPPORTED_DATASETS`, attributes of `vlmeval.dataset` (so `--config`
JSON "class" lookup works) and `vlmeval.config.supported_VLM`.
"""
from __future__ import annotations

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

# Models of this package: name -> ('module:Class', default kwargs). The classes are also set as attributes of
# `vlmeval.vlm`, so a --config JSON can name them with "class".
MODEL_FACTORIES = {
    # Needs no weights: an honest, named reference model (each benchmark's naive baseline).
    'Naive-Baseline': ('vlmeval_ext.models.reference:NaiveBaseline', {}),
    # RoCOCO retrieval: embedding models whose per-row "prediction" is the item's embedding.
    'RoCOCO-CLIP-B32': ('vlmeval_ext.rococo.models:RoCOCOEmbeddingModel',
                        {'backend': 'hf-clip', 'model_path': 'openai/clip-vit-base-patch32'}),
    'RoCOCO-CLIP-L14': ('vlmeval_ext.rococo.models:RoCOCOEmbeddingModel',
                        {'backend': 'hf-clip', 'model_path': 'openai/clip-vit-large-patch14'}),
    'RoCOCO-OpenCLIP-B32': ('vlmeval_ext.rococo.models:RoCOCOEmbeddingModel',
                            {'backend': 'open_clip', 'model_path': 'ViT-B-32/openai'}),
    'RoCOCO-BLIP-ITC': ('vlmeval_ext.rococo.models:RoCOCOEmbeddingModel',
                        {'backend': 'hf-blip', 'model_path': 'Salesforce/blip-itm-base-coco'}),
}

_HOOKED = ('vlmeval.dataset', 'vlmeval.config')
_done: set[str] = set()


def _load(path: str):
    module, _, name = path.partition(':')
    return getattr(importlib.import_module(module), name)


_classes: dict[str, type] = {}


def _is_circular(err: Exception) -> bool:
    return 'partially initialized module' in str(err) or 'circular import' in str(err)


def _collect_classes() -> bool:
    """Import our dataset classes; True when all are loaded.

    When the kit's import was triggered from inside one of our modules (e.g. `import vlmeval_ext.grab.dataset`
    first), that module is caught mid-import: it is left for later, and its class registers itself as it is
    created (ExtImageDataset.__init_subclass__). Any other import error is raised: nothing is skipped silently.
    """
    complete = True
    for path in DATASET_CLASS_PATHS:
        if path in _classes:
            continue
        try:
            _classes[path] = _load(path)
        except ModuleNotFoundError as err:
            if not (err.name or '').startswith('vlmeval_ext'):
                raise
            # A benchmark module missing from this install: say so loudly; its names stay unknown to the kit.
            print(f'[vlmeval-ext] WARNING: dataset class {path} is not available: {err}', file=sys.stderr)
            complete = False
        except (ImportError, AttributeError) as err:
            if not _is_circular(err):
                raise
            complete = False
    return complete


def dataset_classes() -> list[type]:
    """Our dataset classes, in DATASET_CLASS_PATHS order (imports the kit)."""
    _collect_classes()
    return [_classes[p] for p in DATASET_CLASS_PATHS if p in _classes]


def our_dataset_names() -> list[str]:
    names = []
    for cls in dataset_classes():
        names.extend(cls.supported_datasets())
    return names


def kit_dataset_module_ready() -> bool:
    module = sys.modules.get('vlmeval.dataset')
    spec = getattr(module, '__spec__', None)
    return module is not None and not getattr(spec, '_initializing', False) and hasattr(module, 'DATASET_CLASSES')


def register_class(cls) -> None:
    """Put one dataset class into the kit's tables (idempotent)."""
    import vlmeval.dataset as kit
    if cls not in kit.DATASET_CLASSES:
        # In front: our names are our own, and a kit class matching names loosely must not take them.
        kit.DATASET_CLASSES.insert(0, cls)
    for name in cls.supported_datasets():
        if name not in kit.SUPPORTED_DATASETS:
            kit.SUPPORTED_DATASETS.append(name)
    setattr(kit, cls.__name__, cls)


_collecting = False


def register_datasets() -> None:
    """Register every class we can load now; called again by each new class until all are in."""
    global _collecting
    if 'vlmeval.dataset' in _done or _collecting:
        return
    _collecting = True
    try:
        complete = _collect_classes()
    finally:
        _collecting = False
    for cls in _classes.values():
        register_class(cls)
    if complete:
        _done.add('vlmeval.dataset')


def register_models() -> None:
    if 'vlmeval.config' in _done:
        return
    _done.add('vlmeval.config')
    from functools import partial

    import vlmeval.config as config
    import vlmeval.vlm as vlm
    for name, (path, kwargs) in MODEL_FACTORIES.items():
        cls = _load(path)
        setattr(vlm, cls.__name__, cls)
        if name not in config.supported_VLM:
            config.supported_VLM[name] = partial(cls, name=name, **kwargs)


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
