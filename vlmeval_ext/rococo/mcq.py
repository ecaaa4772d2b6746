"""RoCOCO-MCQ-<attack>: image-text matching recast as multiple choice for generative models (pure, no kit).

Each image becomes one question: its first ground-truth caption, that caption's adversarial twin (one word
replaced), and ground-truth captions of other images, shuffled. Every option goes through pre_caption, so the
twin cannot be spotted by case or punctuation (the raw ground truth is capitalised and punctuated, the raw
adversarial captions are not). Draws use numpy's default_rng([seed, image row]): an item does not depend on which
other items are built.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np

from .protocol import Annotation

LETTERS = 'ABCDE'
SEED = 2023
QUESTION = 'Which caption describes this image exactly?'
INSTRUCTION = "Answer with the option's letter from the given choices directly."


def build_items(ann: Annotation, attack: str, seed: int = SEED, n_options: int = 4,
                rows: Iterable[int] | None = None) -> list[dict]:
    if not ann.has_adversarial:
        raise ValueError(f'{ann.path}: the MCQ recast needs an attack file (ground truth + adversarial captions)')
    if not 3 <= n_options <= len(LETTERS):
        raise ValueError(f'n_options must be 3..{len(LETTERS)}, got {n_options}')
    twin_of_gt = {int(ann.twin_of[t]): int(t) for t in np.flatnonzero(ann.twin_of >= 0)}
    ground_truth = np.flatnonzero(ann.is_ground_truth)
    items = []
    for i in (range(ann.n_images) if rows is None else rows):
        rng = np.random.default_rng([seed, int(i)])
        gt = ann.ground_truth[i][0]
        twin = twin_of_gt[gt]
        others = ground_truth[ann.text_image[ground_truth] != i]
        distractors = rng.choice(others, size=n_options - 2, replace=False).tolist()
        options = [gt, twin] + distractors
        order = rng.permutation(n_options)
        shuffled = [options[k] for k in order]
        item = {'index': int(i), 'image_path': ann.images[i], 'attack': attack, 'question': QUESTION,
                'answer': LETTERS[shuffled.index(gt)], 'twin': LETTERS[shuffled.index(twin)],
                'answer_text_row': int(gt), 'twin_text_row': int(twin)}
        for letter, t in zip(LETTERS, shuffled):
            item[letter] = ann.texts[t]
        items.append(item)
    return items


def prompt_text(item: dict) -> str:
    options = '\n'.join(f'{c}. {item[c]}' for c in LETTERS if isinstance(item.get(c), str) and item[c])
    return f'Question: {item["question"]}\nOptions:\n{options}\n{INSTRUCTION}'


_LETTER = re.compile(r'^\s*(?:answer\s*(?:is)?\s*[:：]?\s*)?[\(\[]?([A-E])[\)\]\.:]?(?:\s|$)', re.I)


def parse_letter(reply, letters: Sequence[str]) -> str | None:
    """The option letter a reply commits to ('B', 'B.', '(B)', 'Answer: B ...'); None when it does not."""
    if not isinstance(reply, str):
        return None
    m = _LETTER.match(reply)
    if m and m.group(1).upper() in letters:
        return m.group(1).upper()
    return None


def score(rows: Sequence[dict]) -> dict:
    """rows: answer, twin, choice (a letter or None when no option could be read). Percentages."""
    n = len(rows)
    if n == 0:
        raise ValueError('no predictions to score')
    correct = sum(r['choice'] == r['answer'] for r in rows)
    twin = sum(r['choice'] == r['twin'] for r in rows)
    unparsed = sum(r['choice'] is None for r in rows)
    answered = n - unparsed
    return {'n': n, 'accuracy': 100.0 * correct / n, 'twin_rate': 100.0 * twin / n,
            'twin_rate_of_answered': 100.0 * twin / answered if answered else None,
            'unparsed': unparsed}
