"""ReMI as a VLMEvalKit dataset (thin: prompts, scoring and reports live in prompt.py / score.py / report.py).

Dataset names carry the input mode, so it is chosen explicitly, lands in the result file names and is recorded
in <stem>_score.json:
  ReMI / ReMI_DEMO                      interleaved (the paper's setting; models with INTERLEAVE = True)
  ReMI_labelled / ReMI_DEMO_labelled    all images after the text, each preceded by "Image K:"
  ReMI_composite / ReMI_DEMO_composite  one tiled image with captions (INTERLEAVE = False models, which
                                        otherwise see only the first image)
`prompt.dataset_name_for(split, model)` picks the name for a model. All three modes share one TSV per split.
"""
from __future__ import annotations

import os.path as osp

from vlmeval_ext.core.dataset import ExtImageDataset, lmu_data_root

from . import prompt as remi_prompt
from .evaluator import NAMES, ReMIEvaluator

__all__ = ['ReMI', 'NAMES']


class ReMI(ReMIEvaluator, ExtImageDataset):
    def load_data(self, dataset):
        return super().load_data(self.source_split(dataset))

    def post_build(self, dataset):
        self.img_root = osp.join(lmu_data_root(), 'images', self.source_split(dataset))
        super().post_build(dataset)

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        paths = self.dump_image(line)
        composite = osp.join(self.img_root, f'{line["index"]}_composite.png')
        return remi_prompt.build_message(str(line['question']), str(line['task']), paths, self.input_mode,
                                         composite_path=composite)
