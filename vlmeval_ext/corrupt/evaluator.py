"""The kit-free half of `<Dataset>-RC`: its names (every -RC TSV built under $LMUData) and an instance for
evaluation. Evaluating an -RC runs the base dataset's own kit evaluator, so `corrupt.dataset.CorruptedDataset`
holds evaluate."""
from __future__ import annotations

import os
import os.path as osp

from vlmeval_ext.core.evaluation import ExtEvaluation
from vlmeval_ext.corrupt import variants as V


class CorruptedEvaluator(ExtEvaluation):
    SPEC = 'corrupt'
    DATASET_URL: dict = {}
    DATASET_MD5: dict = {}
    REQUIRED_COLUMNS = ('index', 'image', *V.RC_COLUMNS)

    @classmethod
    def supported_datasets(cls):
        """Every `<Dataset>-RC.tsv` already built under $LMUData."""
        root = os.environ.get('LMUData') or osp.join(osp.expanduser('~'), 'LMUData')
        if not osp.isdir(root):
            return []
        return sorted(f[:-4] for f in os.listdir(root) if f.endswith(f'{V.RC_SUFFIX}.tsv'))

    @classmethod
    def for_evaluation(cls, dataset: str):
        V.base_name(dataset)  # any <Dataset>-RC: evaluation reads the predictions file and the base dataset
        obj = cls.__new__(cls)
        obj.dataset_name = dataset
        obj.data = None
        return obj
