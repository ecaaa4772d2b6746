"""What the weight-free `Naive-Baseline` model answers, per benchmark: the floor a real model should beat.

Each function takes the text of the prompt the dataset built and the dataset name (registry records name them as
`naive`). None of them looks at the image.
"""
from __future__ import annotations

import json
import re
from decimal import Decimal


def grab(prompt_text: str, dataset: str) -> str:
    """Zero in the form and precision the question asks for ("0", "0.0", "[0, 0]", "y = 0x + 0")."""
    from vlmeval_ext.dataset.utils.grab import parse_precision
    template = re.search(r'in the form (.+?)(?:, where|\. )', prompt_text)
    if template and '<' in template.group(1):
        return re.sub(r'<[^>]+>', '0', template.group(1)).rstrip('.')
    if template and template.group(1).startswith('['):
        return '[0, 0]'
    precision = parse_precision(prompt_text)
    return f'{Decimal(0):.{precision.decimals}f}' if precision.decimals else '0'


# One constant per R-Bench task: the first option, a fixed short answer, a caption that fits any image.
RBENCH_ANSWERS = {'MCQ': 'A', 'VQA': 'yes', 'CAP': 'A photo of an everyday scene with some objects in it.'}


def rbench_task_of_prompt(prompt_text: str) -> str:
    """Which official model prompt this is (MCQ / VQA / CAP), from its fixed wording."""
    from vlmeval_ext.dataset.utils.rbench_full import MODEL_PROMPTS
    text = str(prompt_text).strip()
    if text == MODEL_PROMPTS['CAP'].strip():
        return 'CAP'
    if text.endswith(MODEL_PROMPTS['MCQ'].rsplit('\n', 1)[-1]):
        return 'MCQ'
    if text.endswith(MODEL_PROMPTS['VQA'].split('}', 1)[-1]):
        return 'VQA'
    raise ValueError(f'not an R-Bench model prompt: {text[:80]!r}')


def rbench(prompt_text: str, dataset: str) -> str:
    return RBENCH_ANSWERS[rbench_task_of_prompt(prompt_text)]


def remi(prompt_text: str, dataset: str) -> str:
    # The prompt does not name its task unambiguously: one constant, "0" (the EmojiAlgebra / RefCoco baseline).
    # The per-task naive baselines ReMI reports are computed by its evaluate on the same items.
    return json.dumps({'explanation': 'naive baseline', 'answer': '0'})


def rococo_mcq(prompt_text: str, dataset: str) -> str:
    return 'A'
