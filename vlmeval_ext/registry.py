"""The one table of what this package adds to VLMEvalKit: a record per benchmark, a record per model.

Every command asks this table and nothing else names a benchmark: `list`, `prepare`, `eval`, `summary`, the
leaderboard, the launcher, the export and `Naive-Baseline`. Reading it imports no kit and no torch: classes and
functions are named as 'module:attribute' and imported only where they are used.

A record joins the two layers of a benchmark:
- `kit_class`: the dataset in the kit's own dialect (vlmeval_ext/dataset/<bench>.py with its
  vlmeval_ext/dataset/utils/<bench>.py), the file that goes upstream as it is; `names` are its dataset names;
- what `register()` puts into the kit is that class with what the plugin adds (the demo splits, strict loading
  checks, the cached judge, coverage, intervals, plots): PluginDataset in front of the kit class
  (`datasets.plugin_class_of`), and in front of both the benchmark's own steps where it has some (`plugin_steps`, a
  kit-free class in its plugin file); no benchmark has a class of its own (`plugin_class` is the -RC wrapper's);
- the plugin's own half, one file `vlmeval_ext/plugin/<bench>.py`: `report` (its REPORT: summary row, run record,
  plots, intervals, the headlines `compare` tests, its report-page section) and `naive` (the weight-free baseline's
  answer); and `prepare` (the official release -> the kit TSV, vlmeval_ext/prepare/<bench>.py).

`register()` puts the plugin classes and models into the kit's own tables, the same way in ms-vlmeval and in an
upstream checkout (the kit has no plugin hook). Nothing calls it implicitly: `import vlmeval_ext` changes nothing.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from functools import partial

from vlmeval_ext.errors import KitNotInstalled

KIT_MISSING = ('VLMEvalKit is not installed in this environment (`import vlmeval` failed: {err}). Install it '
               "with `pip install ms-vlmeval==0.0.20` (PyPI's VLMEvalKit), or install your VLMEvalKit "
               'checkout: `pip install -e /path/to/VLMEvalKit`.')


@dataclass(frozen=True)
class Benchmark:
    key: str                                  # short name ('GRAB'); also the export's patch name
    title: str                                # how summary tables and the leaderboard head it
    kit_class: str                            # 'module:Class' of the kit-dialect dataset (exported as is)
    plugin_class: str | None                  # 'module:Class' of what register() puts into the kit (-RC only);
                                              # None: the kit-dialect class behind the plugin's steps
    names: tuple[str, ...]                    # the kit class's dataset names (its DATASET_URL keys)
    demos: dict = field(default_factory=dict)         # plugin-only demo names -> TSV file in vlmeval_ext/demo/
    demo_md5: dict = field(default_factory=dict)      # demo TSV file -> its md5
    splits: dict = field(default_factory=dict)        # name -> the split whose TSV holds it (default: itself)
    subsets: dict = field(default_factory=dict)       # name -> (column, value) selecting its rows of the split
    required_columns: tuple = ('index',)              # of the dataset TSV
    prediction_columns: tuple = ('index', 'prediction')
    answer_columns: tuple = ('answer',)               # checked against the dataset's own answers
    prepare: str | None = None                        # 'module:function' building the TSV (kit-free)
    prepare_options: tuple = ()                       # prepare flags it takes: allow_subset, coco_root
    naive: str | None = None                          # 'module:function(prompt_text, dataset) -> answer'
    report: str | None = None                         # 'module:Report' (summary_row, run_record, plots)
    spec: str | None = None                           # dataset_specs/<spec>.yaml
    judge: str = 'rules'                              # rules | optional (GRAB) | required (R-Bench) | embeddings
    export_extra: tuple = ()                          # further kit-dialect files of its patch ('module' names)
    kit_models: dict = field(default_factory=dict)    # kit models its patch adds: name -> (module:Class, kwargs)
    plugin_steps: str | None = None                   # 'module:Class' in its plugin file: its own dataset steps

    def all_names(self) -> list[str]:
        return [*self.names, *self.demos]

    def split_of(self, name: str) -> str:
        return self.splits.get(name, name)

    def demo_file(self, name: str) -> str | None:
        """The shipped TSV of a demo name (of its split), as a path inside the installed package."""
        entry = self.demos.get(name)
        if entry is None:
            return None
        from importlib import resources
        return str(resources.files('vlmeval_ext') / 'demo' / entry)


_REMI_MODES = ('', '_labelled', '_composite')
_ROCOCO_EMBEDDERS = {
    'RoCOCO-CLIP-B32': ('vlmeval_ext.vlm.rococo_embedding:RoCOCOEmbedding',
                        {'backend': 'hf-clip', 'model_path': 'openai/clip-vit-base-patch32'}),
    'RoCOCO-CLIP-L14': ('vlmeval_ext.vlm.rococo_embedding:RoCOCOEmbedding',
                        {'backend': 'hf-clip', 'model_path': 'openai/clip-vit-large-patch14'}),
    'RoCOCO-OpenCLIP-B32': ('vlmeval_ext.vlm.rococo_embedding:RoCOCOEmbedding',
                            {'backend': 'open_clip', 'model_path': 'ViT-B-32/openai'}),
    'RoCOCO-BLIP-ITC': ('vlmeval_ext.vlm.rococo_embedding:RoCOCOEmbedding',
                        {'backend': 'hf-blip', 'model_path': 'Salesforce/blip-itm-base-coco'}),
}

BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        key='R-Bench-Full', title='R-Bench', kit_class='vlmeval_ext.dataset.rbench_full:RBenchFull',
        plugin_class=None, plugin_steps='vlmeval_ext.plugin.rbench:RBenchSteps',
        names=('R-Bench-Full', 'R-Bench-Full-MCQ', 'R-Bench-Full-VQA', 'R-Bench-Full-CAP'),
        demos={'R-Bench-Full_DEMO': 'R-Bench-Full_DEMO.tsv'},
        demo_md5={'R-Bench-Full_DEMO.tsv': '965a45d85589a3720f607f1295f9b4b4'},
        splits={f'R-Bench-Full-{t}': 'R-Bench-Full' for t in ('MCQ', 'VQA', 'CAP')},
        subsets={f'R-Bench-Full-{t}': ('type', t) for t in ('MCQ', 'VQA', 'CAP')},
        required_columns=('index', 'pair_id', 'variant', 'name', 'question', 'choice', 'answer', 'type',
                          'distortion', 'strength', 'image'),
        prediction_columns=('index', 'pair_id', 'variant', 'type', 'distortion', 'strength', 'answer',
                            'prediction'),
        answer_columns=('answer', 'choice', 'type'),
        prepare='vlmeval_ext.prepare.rbench:prepare', prepare_options=('allow_subset',),
        naive='vlmeval_ext.plugin.rbench:naive_answer', report='vlmeval_ext.plugin.rbench:REPORT', spec='rbench',
        judge='required', export_extra=('vlmeval_ext.scripts.build_rbench_full_tsv',)),
    Benchmark(
        key='GRAB', title='GRAB', kit_class='vlmeval_ext.dataset.grab:GRAB', plugin_class=None,
        plugin_steps='vlmeval_ext.plugin.grab:GRABSteps',
        names=('GRAB',), demos={'GRAB_DEMO': 'GRAB_DEMO.tsv'},
        demo_md5={'GRAB_DEMO.tsv': '68c37ee40912e1390716c4df194092fb'},
        required_columns=('index', 'pid', 'question', 'answer', 'task', 'category', 'complexity', 'image'),
        prediction_columns=('index', 'question', 'answer', 'task', 'category', 'complexity', 'prediction'),
        prepare='vlmeval_ext.prepare.grab:prepare', prepare_options=('allow_subset',),
        naive='vlmeval_ext.plugin.grab:naive_answer', report='vlmeval_ext.plugin.grab:REPORT', spec='grab',
        judge='optional', export_extra=('vlmeval_ext.scripts.build_grab_tsv',)),
    Benchmark(
        key='ReMI', title='ReMI', kit_class='vlmeval_ext.dataset.remi:ReMI', plugin_class=None,
        names=tuple(f'ReMI{m}' for m in _REMI_MODES),
        demos={f'ReMI_DEMO{m}': 'ReMI_DEMO.tsv' for m in _REMI_MODES},
        demo_md5={'ReMI_DEMO.tsv': 'c24914e5ecae62ad5e1b4db8534d986b'},
        splits={**{f'ReMI{m}': 'ReMI' for m in _REMI_MODES}, **{f'ReMI_DEMO{m}': 'ReMI_DEMO' for m in _REMI_MODES}},
        required_columns=('index', 'question', 'answer', 'task', 'image'),
        prediction_columns=('index', 'prediction', 'answer', 'task'),
        prepare='vlmeval_ext.prepare.remi:prepare', prepare_options=('allow_subset',),
        naive='vlmeval_ext.plugin.remi:naive_answer', report='vlmeval_ext.plugin.remi:REPORT', spec='remi',
        export_extra=('vlmeval_ext.scripts.build_remi_tsv',)),
    Benchmark(
        key='RoCOCO-MCQ', title='RoCOCO-MCQ', kit_class='vlmeval_ext.dataset.rococo_mcq:RoCOCOMCQ',
        plugin_class=None,
        names=tuple(f'RoCOCO-MCQ-{a}' for a in ('same_concept', 'diff_concept', 'rand_voca', 'danger')),
        demos={'RoCOCO-MCQ-same_concept_DEMO': 'RoCOCO-MCQ-same_concept_DEMO.tsv'},
        demo_md5={'RoCOCO-MCQ-same_concept_DEMO.tsv': 'b173cbeddcfb77864f1d3e247bfdf600'},
        required_columns=('index', 'image', 'question', 'A', 'B', 'C', 'answer', 'twin'),
        prediction_columns=('index', 'question', 'A', 'B', 'C', 'answer', 'twin', 'prediction'),
        answer_columns=('answer', 'twin', 'A', 'B', 'C'),
        prepare='vlmeval_ext.prepare.rococo:prepare', prepare_options=('coco_root',),
        naive='vlmeval_ext.plugin.rococo_mcq:naive_answer', report='vlmeval_ext.plugin.rococo_mcq:REPORT',
        spec='rococo', export_extra=('vlmeval_ext.scripts.build_rococo_mcq_tsv',)),
    Benchmark(
        key='RoCOCO-retrieval', title='RoCOCO retrieval',
        kit_class='vlmeval_ext.dataset.rococo_retrieval:RoCOCORetrieval',
        plugin_class=None, plugin_steps='vlmeval_ext.plugin.rococo_retrieval:RoCOCORetrievalSteps',
        names=(*(f'RoCOCO-I2T-{k}' for k in ('clean', 'same_concept', 'diff_concept', 'rand_voca', 'danger')),
               'RoCOCO-T2I-mix', 'RoCOCO-T2I-patch'),
        required_columns=('index', 'kind', 'item', 'image_row', 'ground_truth', 'seed', 'source', 'question',
                          'image'),
        prediction_columns=('index', 'kind', 'item', 'image_row', 'ground_truth', 'seed', 'source', 'question',
                            'prediction'),
        answer_columns=(),
        prepare='vlmeval_ext.prepare.rococo:prepare', prepare_options=('coco_root',),
        report='vlmeval_ext.plugin.rococo_retrieval:REPORT', spec='rococo', judge='embeddings',
        export_extra=('vlmeval_ext.vlm.rococo_embedding',), kit_models=_ROCOCO_EMBEDDERS),
)

# `<Dataset>-RC`: paired robustness variants of any kit image dataset, built by `vlmeval-ext corrupt`.
CORRUPTED = Benchmark(
    key='-RC', title='<Dataset>-RC (paired robustness)', kit_class='', plugin_class='vlmeval_ext.corrupt.dataset:CorruptedDataset',
    names=(), required_columns=('index', 'image', 'variant', 'pair_id', 'distortion', 'strength'),
    report='vlmeval_ext.plugin.corrupted:REPORT', spec='corrupt')
RC_SUFFIX = '-RC'
# Result files of a non-default judge mode carry its tag (`<stem>_efficient_score.json`): official and efficient
# results of the same predictions sit side by side.
RESULT_TAGS = ('_efficient',)

# Models of this package: name -> ('module:Class', default kwargs).
MODELS = {
    # Needs no weights: each benchmark's naive baseline, the floor a real model should beat.
    'Naive-Baseline': ('vlmeval_ext.offline.models:NaiveBaseline', {}),
    **_ROCOCO_EMBEDDERS,
    # A smoke test of the retrieval pipeline, not a model: weight-free, chance-level recalls, never compared.
    'RoCOCO-Smoke-Hash': ('vlmeval_ext.offline.models:SmokeHashEmbedding', {'dim': 64}),
}
SMOKE_TEST_MODELS = ('RoCOCO-Smoke-Hash',)


def load_object(path: str):
    module, _, name = path.partition(':')
    return getattr(importlib.import_module(module), name)


def import_kit(module: str = 'vlmeval'):
    """Import a kit module; a missing kit is one KitNotInstalled error (any other failure is raised)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and (err.name == 'vlmeval' or err.name.startswith('vlmeval.')):
            raise KitNotInstalled(KIT_MISSING.format(err=err)) from err
        raise


def rc_names() -> list[str]:
    """Every `<Dataset>-RC.tsv` built under $LMUData (the -RC names the kit can build now)."""
    root = os.environ.get('LMUData') or os.path.join(os.path.expanduser('~'), 'LMUData')
    if not os.path.isdir(root):
        return []
    return sorted(f[:-4] for f in os.listdir(root) if f.endswith(f'{RC_SUFFIX}.tsv'))


def benchmark_of(name: str) -> Benchmark | None:
    """The record that knows dataset `name` (any `<Dataset>-RC`, built or not), or None."""
    for record in BENCHMARKS:
        if name in record.names or name in record.demos:
            return record
    return CORRUPTED if name.endswith(RC_SUFFIX) and len(name) > len(RC_SUFFIX) else None


def dataset_names() -> list[str]:
    """Every dataset name of this package, demos and built -RC datasets included (no kit import)."""
    return [n for record in BENCHMARKS for n in record.all_names()] + rc_names()


def plugin_class(name: str):
    """The plugin's kit dataset class for `name` (imports the kit)."""
    record = benchmark_of(name)
    if record is None:
        return None
    import_kit('vlmeval.dataset')
    return plugin_class_of(record)


def plugin_class_of(record: Benchmark):
    """The class register() puts into the kit for `record` (vlmeval_ext.datasets.plugin_class_of; imports the
    kit)."""
    if record is CORRUPTED:
        return load_object(record.plugin_class)
    return load_object('vlmeval_ext.datasets:plugin_class_of')(record.key)


def register(redact_logs: bool = False, quiet_notices: bool = False) -> None:
    """Register every dataset and model of vlmeval-ext into the installed VLMEvalKit (imports the kit).

    Idempotent. Our classes go in front of the kit's `DATASET_CLASSES` (a kit class that matches names loosely
    must not take ours), their names into `SUPPORTED_DATASETS`, the classes as attributes of `vlmeval.dataset`
    and `vlmeval.vlm` (--config "class" lookup), our models into `supported_VLM`. Nothing else of the process
    changes unless asked, as our run.py and commands do: `redact_logs` installs a log-record factory so that no log
    line of the kit or ours can carry an API key; `quiet_notices` hides the kit's notice about its optional .env file
    (both in vlmeval_ext.kit_workarounds.console). Raises KitNotInstalled without a kit.
    """
    if quiet_notices:
        from vlmeval_ext.kit_workarounds.console import quiet_kit_notices
        quiet_kit_notices()
    kit_dataset = import_kit('vlmeval.dataset')
    kit_config = import_kit('vlmeval.config')
    kit_vlm = import_kit('vlmeval.vlm')
    if redact_logs:
        from vlmeval_ext.kit_workarounds.console import install_log_redaction
        install_log_redaction()
    for name, (path, kwargs) in MODELS.items():
        cls = load_object(path)
        setattr(kit_vlm, cls.__name__, cls)
        if name not in kit_config.supported_VLM:
            kit_config.supported_VLM[name] = partial(cls, name=name, **kwargs)
    classes = [plugin_class_of(r) for r in (*BENCHMARKS, CORRUPTED)]
    for cls in reversed(classes):
        if cls not in kit_dataset.DATASET_CLASSES:
            kit_dataset.DATASET_CLASSES.insert(0, cls)
    for cls in classes:
        for name in cls.supported_datasets():
            if name not in kit_dataset.SUPPORTED_DATASETS:
                kit_dataset.SUPPORTED_DATASETS.append(name)
        setattr(kit_dataset, cls.__name__, cls)
