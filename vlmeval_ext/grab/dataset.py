"""GRAB as a VLMEvalKit dataset (thin: prompts, scoring and reports live in prompt.py / score.py / report.py;
names and evaluate in evaluator.py, which needs no kit).

Names: GRAB (the 2,170 questions, built by `vlmeval-ext prepare GRAB [--from DIR]`) and GRAB_DEMO (shipped).
"""
from __future__ import annotations

from vlmeval_ext.core.dataset import ExtImageDataset
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
