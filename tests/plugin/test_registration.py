"""Registration into the real kit: one explicit, idempotent `vlmeval_ext.register()`; importing changes nothing."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers.kit_run import REPO_ROOT


@pytest.fixture(scope='module')
def kit():
    import vlmeval_ext
    vlmeval_ext.register()
    import vlmeval.config as config
    import vlmeval.dataset as dataset
    return dataset, config


def _python(code: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *flags, '-c', code], capture_output=True, text=True, timeout=600,
                          cwd=REPO_ROOT)


def test_import_changes_nothing_until_register_is_called():
    """`import vlmeval_ext` imports no kit and installs no hook; the kit knows our names only after register(),
    which changes the process's logging only when asked (the CLI does)."""
    code = f'''
import json, sys
sys.path.insert(0, {str(REPO_ROOT)!r})
finders = [type(f).__name__ for f in sys.meta_path]
import vlmeval_ext, vlmeval_ext.judging, vlmeval_ext.io, vlmeval_ext.registry, vlmeval_ext.spec
import vlmeval_ext.records.run_records, vlmeval_ext.records.summary, vlmeval_ext.launcher, vlmeval_ext.cli.main
out = {{'kit_imported': 'vlmeval' in sys.modules, 'torch_imported': 'torch' in sys.modules,
        'finders_unchanged': finders == [type(f).__name__ for f in sys.meta_path]}}
import vlmeval.dataset as kit
import vlmeval_ext.datasets                        # defining our classes registers nothing either
out['before'] = 'GRAB_DEMO' in kit.SUPPORTED_DATASETS or any(c.__module__.startswith('vlmeval_ext')
                                                               for c in kit.DATASET_CLASSES)
import logging
factory, filters = logging.getLogRecordFactory(), list(logging.getLogger().filters)
vlmeval_ext.register()
vlmeval_ext.register()
out['after'] = kit.SUPPORTED_DATASETS.count('GRAB_DEMO')
out['classes'] = sum(c.__module__.startswith('vlmeval_ext') for c in kit.DATASET_CLASSES)
# for library use nothing process-wide changes; the CLI asks for its log handling
out['logging_unchanged'] = (logging.getLogRecordFactory() is factory and logging.getLogger().filters == filters)
vlmeval_ext.register(redact_logs=True, quiet_notices=True)
out['cli_logging'] = (logging.getLogRecordFactory() is not factory
                      and len(logging.getLogger().filters) == len(filters) + 1)
print(json.dumps(out))
'''
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {'kit_imported': False, 'torch_imported': False, 'finders_unchanged': True, 'before': False,
                   'after': 1, 'classes': 6, 'logging_unchanged': True, 'cli_logging': True}


def test_every_class_registered_once_with_its_own_names(kit):
    dataset, config = kit
    import vlmeval.vlm as vlm

    import vlmeval_ext
    from vlmeval_ext.registry import BENCHMARKS, CORRUPTED, load_object, plugin_class_of
    records = [*BENCHMARKS, CORRUPTED]
    ours = [plugin_class_of(r) for r in records]
    vlmeval_ext.register()
    vlmeval_ext.register()      # idempotent
    assert dataset.DATASET_CLASSES[:len(ours)] == ours          # in front, in the registry's order
    for record, cls in zip(records, ours):
        assert dataset.DATASET_CLASSES.count(cls) == 1
        assert getattr(dataset, cls.__name__) is cls          # --config "class" lookup
        assert '__init__' not in cls.__dict__ or cls.__name__ == 'CorruptedDataset', \
            f'{cls.__name__} must go through the kit\'s ImageBaseDataset.__init__'
        if record.kit_class:                                  # the plugin class wraps the kit-dialect class
            lower = load_object(record.kit_class)
            assert issubclass(cls, lower) and 'DATASET_URL' in lower.__dict__, cls
            assert set(lower.DATASET_URL) <= set(cls.supported_datasets())
        for name in cls.supported_datasets():
            assert dataset.SUPPORTED_DATASETS.count(name) == 1
    assert 'Naive-Baseline' in config.supported_VLM and 'RoCOCO-CLIP-B32' in config.supported_VLM
    assert vlm.NaiveBaseline is config.supported_VLM['Naive-Baseline'].func


def test_no_kit_name_claimed_and_kit_types_unchanged(kit):
    dataset, _ = kit
    from vlmeval_ext.registry import BENCHMARKS, CORRUPTED, plugin_class_of
    ours = {plugin_class_of(r) for r in (*BENCHMARKS, CORRUPTED)}
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


def test_without_the_kit_register_and_run_say_how_to_install_it():
    """A Python with no VLMEvalKit (no site-packages at all: -S -I): one clear error, no traceback."""
    code = f'''
import sys
sys.path.insert(0, {str(REPO_ROOT)!r})
import vlmeval_ext
try:
    vlmeval_ext.register()
except vlmeval_ext.ExtError as err:
    print('REGISTER:', type(err).__name__, err)
from vlmeval_ext.cli.main import main
main(['run', '--data', 'GRAB_DEMO', '--model', 'Naive-Baseline'])
'''
    proc = _python(code, '-S', '-I')
    assert proc.returncode == 2, proc.stdout + proc.stderr
    register_line = proc.stdout.strip()
    assert register_line.startswith('REGISTER: KitNotInstalled VLMEvalKit is not installed')
    assert 'pip install ms-vlmeval==0.0.20' in register_line and 'pip install -e /path/to/VLMEvalKit' in register_line
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('[vlmeval-ext] ERROR: VLMEvalKit is not installed'), proc.stderr
