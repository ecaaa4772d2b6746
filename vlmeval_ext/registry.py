"""`register()`: put this package's datasets and models into VLMEvalKit's own tables (explicit, idempotent).

VLMEvalKit has no plugin hook; its run.py looks datasets up in `vlmeval.dataset.DATASET_CLASSES` /
`SUPPORTED_DATASETS` (and `getattr(vlmeval.dataset, name)` for a `--config` "class") and models in
`vlmeval.config.supported_VLM` (and `vlmeval.vlm` / `vlmeval.api` for a `--config` "class"). `register()` adds ours
to those tables, the same way in ms-vlmeval and in an upstream checkout. It is the only place that does, and
nothing calls it implicitly: `import vlmeval_ext` has no side effects. Our launcher (`run.py`, `vlmeval-ext run`)
calls it; a script that runs the kit's own entry point calls it first:

    import vlmeval_ext
    vlmeval_ext.register()
    from vlmeval.run import main    # ms-vlmeval; upstream: run the checkout's run.py
    main()

The tables below name each class as 'module:Class' and are imported only by register() (or by the functions
that need the classes), so the pure modules of this package never import the kit.
"""
from __future__ import annotations

import importlib
from functools import partial

from vlmeval_ext.errors import KitNotInstalled

# Every dataset class we add, in this order, in front of the kit's own (our names are our own; a kit class that
# matches names loosely must not take them). Each class defines its own DATASET_URL.
DATASET_CLASS_PATHS = (
    'vlmeval_ext.rbench.dataset:RBenchFull',
    'vlmeval_ext.grab.dataset:GRAB',
    'vlmeval_ext.remi.dataset:ReMI',
    'vlmeval_ext.rococo.dataset:RoCOCOMCQ',
    'vlmeval_ext.rococo.dataset:RoCOCORetrieval',
    'vlmeval_ext.corrupt.dataset:CorruptedDataset',
)

# The kit-free half of each class above, same order (core.evaluation): names, files and, where it needs no kit,
# evaluate. `vlmeval-ext list` and `eval` use these, so they do not import the kit or torch.
EVALUATOR_PATHS = (
    'vlmeval_ext.rbench.evaluator:RBenchEvaluator',
    'vlmeval_ext.grab.evaluator:GRABEvaluator',
    'vlmeval_ext.remi.evaluator:ReMIEvaluator',
    'vlmeval_ext.rococo.evaluator:RoCOCOMCQEvaluator',
    'vlmeval_ext.rococo.evaluator:RoCOCORetrievalEvaluator',
    'vlmeval_ext.corrupt.evaluator:CorruptedEvaluator',
)

# Models of this package: name -> ('module:Class', default kwargs).
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
    # A smoke test of the retrieval pipeline, not a model: weight-free, deterministic, chance-level recalls (the
    # demo's retrieval runs use it; its numbers are never compared with the paper).
    'RoCOCO-Smoke-Hash': ('vlmeval_ext.rococo.models:RoCOCOEmbeddingModel',
                          {'backend': 'smoke-hash', 'model_path': '64', 'device': 'cpu'}),
}

KIT_MISSING = ('VLMEvalKit is not installed in this environment (`import vlmeval` failed: {err}). Install it '
               "with the plugin, `pip install 'vlmeval-ext[ms]'` (PyPI's ms-vlmeval), or install your VLMEvalKit "
               'checkout: `pip install -e /path/to/VLMEvalKit`.')


def import_kit(module: str = 'vlmeval'):
    """Import a kit module; a missing kit is one clear KitNotInstalled error (any other failure is raised)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and (err.name == 'vlmeval' or err.name.startswith('vlmeval.')):
            raise KitNotInstalled(KIT_MISSING.format(err=err)) from err
        raise


def load_object(path: str):
    """The object named by 'module:attribute'."""
    module, _, name = path.partition(':')
    return getattr(importlib.import_module(module), name)


def dataset_classes() -> list[type]:
    """Our dataset classes, in DATASET_CLASS_PATHS order (imports the kit)."""
    import_kit('vlmeval.dataset')
    return [load_object(path) for path in DATASET_CLASS_PATHS]


def our_dataset_names() -> list[str]:
    """Every dataset name our classes support now (the same as dataset_names(); kept for callers)."""
    return dataset_names()


def evaluator_classes() -> list[type]:
    """The kit-free halves of our dataset classes, in EVALUATOR_PATHS order (never imports the kit)."""
    return [load_object(path) for path in EVALUATOR_PATHS]


def dataset_names() -> list[str]:
    """Every dataset name our classes support now (never imports the kit)."""
    return [name for cls in evaluator_classes() for name in cls.supported_datasets()]


def evaluator_for_dataset(name: str) -> type | None:
    """The kit-free class that knows dataset `name` (any `<Dataset>-RC`, built or not), or None."""
    classes = evaluator_classes()
    for cls in classes:
        if name in cls.supported_datasets():
            return cls
    return classes[-1] if name.endswith('-RC') else None


def class_for_evaluation(name: str) -> type | None:
    """The class whose `for_evaluation(name).evaluate(...)` scores a predictions file of `name`: the kit-free
    evaluator when it implements evaluate, else the kit dataset class (imports the kit)."""
    evaluator = evaluator_for_dataset(name)
    if evaluator is None:
        return None
    if hasattr(evaluator, 'evaluate'):
        return evaluator
    return load_object(DATASET_CLASS_PATHS[EVALUATOR_PATHS.index(_path_of(evaluator))])


def _path_of(cls: type) -> str:
    return f'{cls.__module__}:{cls.__qualname__}'


def class_for_dataset(name: str) -> type | None:
    """Our class that supports dataset `name`, or None."""
    for cls in dataset_classes():
        if name in cls.supported_datasets():
            return cls
    return None


def register_datasets(kit_dataset_module) -> list[type]:
    """Put our dataset classes into the kit's dataset tables (idempotent); returns them."""
    classes = dataset_classes()
    for cls in reversed(classes):            # inserted in front, keeping DATASET_CLASS_PATHS order
        if cls not in kit_dataset_module.DATASET_CLASSES:
            kit_dataset_module.DATASET_CLASSES.insert(0, cls)
    for cls in classes:
        for name in cls.supported_datasets():
            if name not in kit_dataset_module.SUPPORTED_DATASETS:
                kit_dataset_module.SUPPORTED_DATASETS.append(name)
        setattr(kit_dataset_module, cls.__name__, cls)     # --config "class" lookup
    return classes


def register_models(kit_config_module, kit_vlm_module) -> list[str]:
    """Put our models into `supported_VLM` and their classes into `vlmeval.vlm` (idempotent); returns the names."""
    for name, (path, kwargs) in MODEL_FACTORIES.items():
        cls = load_object(path)
        setattr(kit_vlm_module, cls.__name__, cls)         # --config "class" lookup
        if name not in kit_config_module.supported_VLM:
            kit_config_module.supported_VLM[name] = partial(cls, name=name, **kwargs)
    return list(MODEL_FACTORIES)


def register(redact_logs: bool = True) -> None:
    """Register every dataset and model of vlmeval-ext into the installed VLMEvalKit (imports the kit).

    Idempotent: calling it again changes nothing. With `redact_logs` (the default) it also installs the log
    redaction of `vlmeval_ext.core.secrets`, so no log line of the kit or ours can carry an API key (the kit
    logs its judge's key when it builds one). Raises KitNotInstalled when `vlmeval` cannot be imported.
    """
    from vlmeval_ext.core.logs import quiet_kit_notices
    quiet_kit_notices()                       # before the kit's import logs its .env notice
    kit_dataset = import_kit('vlmeval.dataset')
    kit_config = import_kit('vlmeval.config')
    kit_vlm = import_kit('vlmeval.vlm')
    if redact_logs:
        from vlmeval_ext.core.secrets import install_log_redaction
        install_log_redaction()
    register_models(kit_config, kit_vlm)
    register_datasets(kit_dataset)
