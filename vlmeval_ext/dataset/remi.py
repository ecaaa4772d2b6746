"""ReMI: reasoning with multiple images (Kazemi et al. 2024, arXiv 2406.09175).

2,600 questions in 13 tasks, each on up to six images named by <image1> ... <image6> tags in the
question. The dataset name chooses how the images reach the model, and the results record it:
    ReMI             the K-th image exactly at <imageK> (the paper's setting)
    ReMI_labelled    the text first, then "Image K:" before each image
    ReMI_composite   one tiled image with "Image K" captions, for models that read one image
Rule-based: `official` (the authors' evaluation snippet, the headline) and `lenient` (a robust
reading of the same answers), naive baselines on the same items and the error reduction (ERP).

Models that read one image: a model class with INTERLEAVE = False receives only the first image
of a message and the joined texts (the kit's BaseModel.message_to_promptimg), so on ReMI or
ReMI_labelled it would answer 2-6-image questions from one image. Run such models on
ReMI_composite; ReMI_composite is not the paper's setting (the paper gives each image separately),
so its scores are not comparable with the paper's numbers.
"""
import os.path as osp

import pandas as pd

from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.smp import (LMUDataRoot, download_file, dump, get_intermediate_file_path, get_logger,
                         md5)

from .utils.exact_io import is_infer_fail, read_text_table
from .utils.remi import (composite_message, evaluation_files, interleaved_message,
                         labelled_message, make_composite, result_table, split_and_mode,
                         summary_line)

logger = get_logger(__name__)


class ReMI(ImageBaseDataset):
    TYPE = 'VQA'
    DATASET_URL = {'ReMI': '', 'ReMI_labelled': '', 'ReMI_composite': ''}
    DATASET_MD5 = {}
    # The images at their <imageK> places and the JSON instruction the official scorer reads
    # are part of the benchmark: models must not replace them with their own prompt.
    force_use_dataset_prompt = True

    @property
    def input_mode(self):
        return split_and_mode(self.dataset_name)[1]

    def load_data(self, dataset):
        split = split_and_mode(dataset)[0]
        path = osp.join(LMUDataRoot(), f'{split}.tsv')
        expected = self.DATASET_MD5.get(split)
        if not osp.exists(path) or (expected and md5(path) != expected):
            if not self.DATASET_URL.get(split):
                raise FileNotFoundError(f'{path} not found (and no DATASET_URL for {split})')
            download_file(self.DATASET_URL[split], path)
            if expected and md5(path) != expected:
                raise ValueError(f"{path}: the downloaded file's md5 is not {expected}")
        self.data_path = path
        # Read as text: the labels are compared as written ("0.50", "007").
        return pd.read_csv(path, sep='\t', dtype=str, keep_default_na=False)

    def post_build(self, dataset):
        self.img_root = osp.join(LMUDataRoot(), 'images', split_and_mode(dataset)[0])

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        paths = self.dump_image(line)
        question, task = line['question'], line['task']
        if self.input_mode == 'labelled':
            return labelled_message(question, task, paths)
        if self.input_mode == 'composite':
            composite = osp.join(self.img_root, f'{line["index"]}_composite.png')
            if not osp.exists(composite):
                make_composite(paths, composite)
            return composite_message(question, task, paths, composite)
        return interleaved_message(question, task, paths)

    @classmethod
    def report_primary_metric(cls, metrics):
        """The headline for the kit's run summary: the official Overall accuracy, by name (in the
        wide table `...=official|Overall (%)`, in the tall one
        `...=official: Overall (%)|value`)."""
        for key, value in (metrics or {}).items():
            if str(key).endswith(('=official|Overall (%)', '=official: Overall (%)|value')):
                return {'official Overall (%)': value}
        return {}

    @classmethod
    def report_infer_err(cls, prediction_file):
        if prediction_file is None or not osp.exists(prediction_file):
            return dict(failed=0, total=0)
        data = read_text_table(prediction_file)
        return dict(failed=sum(map(is_infer_fail, data['prediction'])), total=len(data))

    def evaluate(self, eval_file, **judge_kwargs):
        """Rule-based, no judge: writes _score.json, _items.tsv and _tasks.csv."""
        files = evaluation_files(read_text_table(eval_file), self.input_mode)
        for name, content in files.items():
            suffix, fmt = name.rsplit('.', 1)
            dump(content, get_intermediate_file_path(eval_file, suffix, fmt))
        summary = files['_score.json']
        logger.info(summary_line(summary))
        return result_table(summary)
