"""Registration into the real kit, and that pure modules never import it."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture(scope='module')
def kit():
    import vlmeval_ext  # noqa: F401  (installs the post-import hook)
    import vlmeval.config as config
    import vlmeval.dataset as dataset
    return dataset, config


def test_pure_modules_do_not_import_the_kit():
    code = ('import sys, vlmeval_ext, vlmeval_ext.core.judge, vlmeval_ext.core.io, vlmeval_ext.core.aggregate, '
            'vlmeval_ext.core.spec, vlmeval_ext.testing.loopback_server; '
            'print("vlmeval" in sys.modules, "torch" in sys.modules)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ['False', 'False']


def test_every_class_registered_once_with_its_own_names(kit):
    dataset, config = kit
    from vlmeval_ext.registry import DATASET_CLASS_PATHS, dataset_classes, register_all
    ours = dataset_classes()
    assert len(ours) == len(DATASET_CLASS_PATHS)
    register_all()
    register_all()      # importing twice registers once
    for cls in ours:
        assert dataset.DATASET_CLASSES.count(cls) == 1
        assert getattr(dataset, cls.__name__) is cls          # --config "class" lookup
        assert 'DATASET_URL' in cls.__dict__, f'{cls.__name__} must define its own DATASET_URL'
        for name in cls.supported_datasets():
            assert dataset.SUPPORTED_DATASETS.count(name) == 1
    assert 'Naive-Baseline' in config.supported_VLM


def test_no_kit_name_claimed_and_kit_types_unchanged(kit):
    dataset, _ = kit
    from vlmeval_ext.registry import dataset_classes
    ours = set(dataset_classes())
    kit_names = set()
    for cls in dataset.DATASET_CLASSES:
        if cls not in ours:
            kit_names.update(cls.supported_datasets())
    for cls in ours:
        clash = kit_names & set(cls.supported_datasets())
        assert not clash, f'{cls.__name__} claims kit names {sorted(clash)[:5]}'
    # The kit still resolves its own datasets to its own classes.
    for name, kit_cls in [('MMBench_DEV_EN', 'ImageMCQDataset'), ('R-Bench-Dis', 'ImageMCQDataset'),
                          ('ChartQA_TEST', 'ImageVQADataset')]:
        owner = next(c for c in dataset.DATASET_CLASSES if name in c.supported_datasets())
        assert owner.__name__ == kit_cls and owner not in ours
