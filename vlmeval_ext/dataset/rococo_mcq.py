"""RoCOCO-MCQ: robustness of image-caption matching to adversarial captions, for generative LMMs.

Derived from RoCOCO (Park et al. 2023, arXiv 2304.10727), not the authors' benchmark: RoCOCO
injects near-miss captions (one word replaced) into the COCO 5k test gallery and measures
retrieval; this recast asks a generative model to pick the caption. No published numbers exist
for it. How each item is built (one per COCO Karpathy test image, per attack):
    options  the image's first ground-truth caption, its adversarial twin from the RoCOCO attack
             file, and two ground-truth captions of other images drawn at random;
    order    the four shuffled; distractors and order drawn with numpy default_rng([2023, image
             row]), so an item does not depend on which other items are built;
    text     every option normalised (case, punctuation) so neither gives the answer away.
The TSV keeps `coco_image`, `answer_text_row` and `twin_text_row` (rows of the attack file).
Accuracy, and the rate at which the twin is chosen. Rule-based: no judge is ever built (the judge
run.py names for MCQ datasets by default is not used). Attacks: same_concept, diff_concept,
rand_voca, danger.
"""
import os.path as osp

import pandas as pd

from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.smp import (LMUDataRoot, download_file, dump, get_intermediate_file_path, get_logger,
                         md5)

from .utils.exact_io import is_infer_fail, read_text_table
from .utils.rococo_mcq import (ATTACKS, LETTERS, QUESTION, evaluation_files, prompt_text,
                               result_table)

logger = get_logger(__name__)


class RoCOCOMCQ(ImageBaseDataset):
    TYPE = 'MCQ'
    DATASET_URL = {f'RoCOCO-MCQ-{attack}': '' for attack in ATTACKS}
    DATASET_MD5 = {}
    force_use_dataset_prompt = True  # the options are the benchmark: no model-specific prompt

    def load_data(self, dataset):
        path = osp.join(LMUDataRoot(), f'{dataset}.tsv')
        expected = self.DATASET_MD5.get(dataset)
        if not osp.exists(path) or (expected and md5(path) != expected):
            if not self.DATASET_URL.get(dataset):
                raise FileNotFoundError(f'{path} not found (and no DATASET_URL for {dataset})')
            download_file(self.DATASET_URL[dataset], path)
            if expected and md5(path) != expected:
                raise ValueError(f"{path}: the downloaded file's md5 is not {expected}")
        self.data_path = path
        return pd.read_csv(path, sep='\t', dtype=str, keep_default_na=False)

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        message = [dict(type='image', value=p) for p in self.dump_image(line)]
        item = {c: line[c] for c in LETTERS if c in line and isinstance(line[c], str) and line[c]}
        item['question'] = line.get('question', QUESTION)
        return message + [dict(type='text', value=prompt_text(item))]

    @classmethod
    def report_primary_metric(cls, metrics):
        """The headline for the kit's run summary: the accuracy (%), by name."""
        for key, value in (metrics or {}).items():
            if str(key).endswith('|accuracy (%)'):
                return {'accuracy (%)': value}
        return {}

    @classmethod
    def report_infer_err(cls, prediction_file):
        if prediction_file is None or not osp.exists(prediction_file):
            return dict(failed=0, total=0)
        data = read_text_table(prediction_file)
        return dict(failed=sum(map(is_infer_fail, data['prediction'])), total=len(data))

    def evaluate(self, eval_file, **judge_kwargs):
        """Rule-based: writes _score.json, _acc.csv and _items.tsv."""
        files = evaluation_files(read_text_table(eval_file), eval_file, self.dataset_name)
        for name, content in files.items():
            suffix, fmt = name.rsplit('.', 1)
            dump(content, get_intermediate_file_path(eval_file, suffix, fmt))
        result = files['_score.json']
        logger.info(f"RoCOCO-MCQ: {result['n']} scored, accuracy {result['accuracy']:.2f} %, "
                    f"twin chosen {result['twin_rate']:.2f} %")
        return result_table(self.dataset_name, result)
