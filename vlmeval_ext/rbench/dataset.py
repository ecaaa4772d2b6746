"""R-Bench-Full as a VLMEvalKit dataset (thin: data, prompts, judge protocol and reports live beside it).

Names: R-Bench-Full (1,485 items x {ref, dis} = 2,970 rows, built by `vlmeval-ext prepare R-Bench-Full
[--from DIR]`), the task subsets R-Bench-Full-MCQ / -VQA / -CAP (rows of R-Bench-Full.tsv filtered by type: one
TSV, one md5, one image folder; `prepare` of a subset builds R-Bench-Full.tsv), and R-Bench-Full_DEMO (shipped:
24 real items, generated images; see make_demo.py). The kit's own R-Bench-Dis / R-Bench-Ref are left alone.

evaluate(): pairs ref/dis rows, judges score_dis / score_ref / score_com with the official protocol (default),
the efficient mode (`--judge-args '{"judge_mode": "efficient"}'`) or the offline approximation (`--judge
offline`), and writes <stem>_scores.csv, _robustness.csv, _score.json and plots.
"""
from __future__ import annotations

import os.path as osp

from vlmeval_ext.core.dataset import ExtImageDataset, kit_ready_table, lmu_data_root
from vlmeval_ext.core.io import DataError
from vlmeval_ext.rbench import evaluation as rb_eval
from vlmeval_ext.rbench.evaluator import DEMO, FULL, OFFICIAL_JUDGE, SUBSETS, RBenchEvaluator
from vlmeval_ext.rbench.prompt import model_prompt

__all__ = ['RBenchFull', 'FULL', 'DEMO', 'SUBSETS', 'OFFICIAL_JUDGE']


class RBenchFull(RBenchEvaluator, ExtImageDataset):
    # ---- data ---------------------------------------------------------------------------------------------
    def load_data(self, dataset):
        data = super().load_data(self.source_split(dataset))
        for col in ('question', 'choice', 'answer', 'name'):
            data[col] = [rb_eval._text(v) for v in data[col]]
        if dataset in SUBSETS:
            data = data[data['type'] == SUBSETS[dataset]].reset_index(drop=True)
            if data.empty:
                raise DataError(f'{self.data_path}: no {SUBSETS[dataset]} rows for {dataset}')
            # Checked again on the subset: an image reference must point to a row of the same subset.
            data = kit_ready_table(data, self.data_path, self.REQUIRED_COLUMNS)
        return data

    def post_build(self, dataset):
        self.img_root = osp.join(lmu_data_root(), 'images', self.source_split(dataset))
        super().post_build(dataset)

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        images = self.dump_image(line)       # this row's own image: the reference or the distorted one
        text = model_prompt(str(line['type']), question=rb_eval._text(line['question']),
                            choice=rb_eval._text(line['choice']))
        return [*({'type': 'image', 'value': p} for p in images), {'type': 'text', 'value': text}]
