"""The kit-free half of every dataset class of vlmeval-ext: names, files and evaluation (never imports the kit).

A benchmark's `<Bench>Evaluator` (in its `evaluator.py`) holds what does not need VLMEvalKit: the names it supports
(`DATASET_URL`), the demo splits it ships, the split each name reads, its run record, its naive baseline and
`evaluate`. Its kit dataset class (in `dataset.py`) derives from it and from `ExtImageDataset` (the kit's
`ImageBaseDataset`) and adds loading and prompts. Commands that only list or evaluate (`vlmeval-ext list`,
`vlmeval-ext eval` of a benchmark scored by rules or the offline judge) use the evaluator alone, so they start in
about a second instead of importing the kit and torch.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from vlmeval_ext.core.io import DataError


class ExtEvaluation:
    """Names, files and `evaluate` of one benchmark (see the module docstring). A subclass sets TYPE, SPEC, its OWN
    `DATASET_URL = {name: hosted TSV URL or ''}` (every name it supports, demo splits included), `DATASET_MD5`,
    `DEMO_DATASETS = {name: path inside the vlmeval_ext package}`, `REQUIRED_COLUMNS`."""

    MODALITY = 'IMAGE'
    TYPE = 'VQA'
    SPEC: str | None = None
    DATASET_URL: dict = {}
    DATASET_MD5: dict = {}
    DEMO_DATASETS: dict = {}
    REQUIRED_COLUMNS: tuple = ('index', 'question')
    # evaluate() writes PNG plots beside the scores; set False on an instance to skip them.
    write_plots = True

    @classmethod
    def supported_datasets(cls) -> list[str]:
        return list(cls.DATASET_URL)

    @classmethod
    def for_evaluation(cls, dataset: str):
        """An instance that can evaluate a predictions file without the dataset TSV being present (no data is
        loaded: `evaluate` reads only the predictions file)."""
        if dataset not in cls.supported_datasets():
            raise DataError(f'{cls.__name__} does not know dataset {dataset!r}')
        obj = cls.__new__(cls)
        obj.dataset_name = dataset
        obj.data = None
        return obj

    @classmethod
    def demo_tsv(cls, dataset: str) -> Path:
        return Path(str(resources.files('vlmeval_ext'))) / cls.DEMO_DATASETS[dataset]

    @classmethod
    def source_split(cls, dataset: str) -> str:
        """The split whose TSV (`$LMUData/<split>.tsv`) holds `dataset`: itself, unless several names share one."""
        return dataset

    @classmethod
    def run_record(cls, dataset: str) -> dict:
        """What the scores of `dataset` depend on beyond the files: {'prompts': {name: template}, 'seeds': {...},
        ...}; the run manifest stores it (templates as sha1). Subclasses extend it."""
        return {}

    @classmethod
    def report_primary_metric(cls, metrics) -> dict:
        """The kit's hook for the "primary_metric" of its run summary, given the flattened table evaluate returned:
        the headline, i.e. the first value of the first row (core.kit_table puts it there: GRAB's official
        Overall (%), R-Bench's absolute Overall (0-1), ...), with its label and unit."""
        if isinstance(metrics, dict):
            for key, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
                    return {str(key): value}
        return {}

    @classmethod
    def naive_prediction(cls, prompt_text: str, dataset: str) -> str:
        """What this benchmark's naive baseline answers to a prompt (used by the `Naive-Baseline` model)."""
        raise NotImplementedError(f'{cls.__name__} defines no naive baseline')
