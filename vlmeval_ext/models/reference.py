"""`Naive-Baseline`: an honest reference model that needs no weights.

It answers every prompt with the naive baseline of the benchmark it is evaluated on (e.g. the first option of an
MCQ, 0 for a GRAB value, the per-task baseline of ReMI). It lets the demo run the whole pipeline offline, and its
scores are the floor any real model should beat. It is not a model of anything.
"""
from __future__ import annotations

from vlmeval.vlm.base import BaseModel


class NaiveBaseline(BaseModel):
    INTERLEAVE = True
    is_api = False

    def __init__(self, name: str = 'Naive-Baseline', **kwargs):
        super().__init__()
        self.name = name

    def generate_inner(self, message, dataset=None):
        from vlmeval_ext.registry import dataset_classes
        prompt = '\n'.join(m['value'] for m in message if m['type'] == 'text')
        for cls in dataset_classes():
            if dataset in cls.supported_datasets():
                return cls.naive_prediction(prompt, dataset)
        raise ValueError(f'Naive-Baseline answers only vlmeval-ext datasets, not {dataset!r}')
