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

from .protocol import SPEC, Annotation

LETTERS = 'ABCDE'
SEED = SPEC['mcq_recast']['seed']
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


# A letter is a commitment only as a standalone capital option: the whole reply ('B', '(B)', 'B.', '**B**'), after
# an answer phrase ('Answer: B', 'The answer is (B).'), or as a leading marker before text ('B. a dog', '(B) a dog').
# Case matters: 'a man riding ...' is an article, not option A.
_ANSWER_PHRASE = r'(?:(?i:the\s+)?(?i:correct\s+)?(?i:answer|option|choice)\s*(?i:is)?\s*[:：]?\s*)'
_LETTER_ALONE = re.compile(r'[\s*]*[\(\[]?([A-E])[\)\]]?[\s*.:]*')
_LETTER_AFTER_PHRASE = re.compile(r'[\s*]*' + _ANSWER_PHRASE + r'[*]*[\(\[]?([A-E])(?![\w\'’])(\s+[a-z])?')
_LETTER_MARKER = re.compile(r'[\s*]*(?:\(([A-E])\)|\[([A-E])\]|([A-E])[.):])[*]*\s+\S')
# A capital option letter standing alone in running text ('B or C', 'A B C D'); 'A' before a lower-case word is the
# article ('A man riding ...'), so it is left out.
_STANDALONE = re.compile(r"(?<![\w'’])([A-E])(?![\w'’])(\s+[a-z])?")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def parse_letter(reply, letters: Sequence[str]) -> str | None:
    """The option letter a reply states: 'B', '(B)', 'B.', 'Answer: B', 'The answer is (B) because ...', or a
    leading marker 'B. <text>' / '(B) <text>'. Capital letters only ('a man ...' is an article, not option A);
    None when the reply states none."""
    if not isinstance(reply, str):
        return None
    letter = None
    if m := _LETTER_ALONE.fullmatch(reply):
        letter = m.group(1)
    elif m := _LETTER_AFTER_PHRASE.match(reply):
        letter = None if m.group(1) == 'A' and m.group(2) else m.group(1)      # 'Answer: A man ...' is prose
    elif m := _LETTER_MARKER.match(reply):
        letter = m.group(1) or m.group(2) or m.group(3)
    return letter if letter and letter in letters else None


def standalone_letters(text: str, letters) -> set[str]:
    """Option letters standing alone in the text ('B or C' -> {B, C}); the article 'A' is not one."""
    return {m.group(1) for m in _STANDALONE.finditer(text)
            if m.group(1) in letters and not (m.group(1) == 'A' and m.group(2))}


def words(text: str) -> str:
    """Lower-cased words joined by single spaces: how an option's text is found in a reply (linear time)."""
    return ' '.join(_WORD.findall(text.lower()))


def quoted_options(reply: str, options: dict) -> list[str]:
    """The options whose whole text (as words) the reply contains."""
    padded = f' {words(reply)} '
    return [c for c, text in options.items() if words(text) and f' {words(text)} ' in padded]


def parse_choice(reply, options: dict) -> tuple[str | None, str]:
    """(letter or None, how) for one reply; `options` maps letters to option texts.

    how: 'letter' (a stated letter, see parse_letter), 'text' (the reply quotes exactly one option's text), 'hedge'
    (two or more option letters, or a letter contradicted by the quoted text: 'B or C', 'A B C D'), 'empty',
    'unparsed'. Only 'letter' and 'text' name a choice; the others are counted, never guessed."""
    if not isinstance(reply, str) or not reply.strip():
        return None, 'empty'
    quoted = quoted_options(reply, options)
    rest = reply
    for c in quoted:                     # the quoted captions' own words ('A man ...') are not letters
        rest = re.sub(r'(?<![\w])' + r'\W+'.join(map(re.escape, words(options[c]).split())) + r'(?![\w])', ' ',
                      rest, flags=re.I)
    standalone = standalone_letters(rest, options)
    letter = parse_letter(reply, list(options))
    if len(standalone) > 1 or (letter and quoted and quoted != [letter]):
        return None, 'hedge'
    if letter:
        return letter, 'letter'
    if len(quoted) == 1:
        return quoted[0], 'text'
    return None, 'hedge' if len(quoted) > 1 else 'unparsed'


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
