"""GRAB as a VLMEvalKit dataset (thin: prompts, scoring and reports live in prompt.py / score.py / report.py;
names and evaluate in evaluator.py, which needs no kit).

Names: GRAB (the 2,170 questions, built by `vlmeval-ext prepare GRAB [--from DIR]`) and GRAB_DEMO (shipped).
"""
from __future__ import annotations

import os

from vlmeval_ext.core.dataset import ExtImageDataset, tsv_path
from vlmeval_ext.core.prepare import check_item_count, count_rows
from vlmeval_ext.core.io import DataError, write_md5_sidecar
from vlmeval_ext.grab import data as grab_data
from vlmeval_ext.grab import prompt as grab_prompt
from vlmeval_ext.grab.evaluator import GRABEvaluator


class GRAB(GRABEvaluator, ExtImageDataset):
    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        images = self.dump_image(line)
        message = [{'type': 'image', 'value': path} for path in images]
        message.append({'type': 'text', 'value': grab_prompt.question_prompt(str(line['question']))})
        return message

    @classmethod
    def prepare(cls, name, source_dir=None, allow_subset: bool = False):
        if name != 'GRAB':
            raise DataError(f'`prepare` builds GRAB only ({name} ships with the package)')
        try:
            path = grab_data.prepare(tsv_path(name), source_dir)
        except (ConnectionError, OSError) as err:      # no network, the Hub unreachable: one line, the way out
            if source_dir is not None:
                raise
            raise DataError(f'prepare GRAB: could not load it from the Hugging Face Hub ({type(err).__name__}: '
                            f'{err}); download data/grab.json and images.zip of jonathan-roberts1/GRAB elsewhere '
                            'and run `vlmeval-ext prepare GRAB --from DIR`') from err
        expected = grab_prompt._spec()['sources']['expected']['n_items']
        try:
            check_item_count('GRAB', source_dir or 'the Hugging Face source', count_rows(path), expected,
                             allow_subset)
        except DataError:
            os.remove(path)           # a partial build never takes the dataset's name
            raise
        write_md5_sidecar(path)                  # the sidecar load_data checks
        return str(path)
