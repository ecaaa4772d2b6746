"""R-Bench model prompts (verbatim from the official notebook, kept in dataset_specs/rbench.yaml)."""
from __future__ import annotations

from vlmeval_ext.core.spec import load_spec

TASK_TYPES = ('MCQ', 'VQA', 'CAP')


def model_prompt(task_type: str, question: str = '', choice: str = '') -> str:
    """The text the model sees with the (reference or distorted) image."""
    templates = load_spec('rbench')['model_prompts']
    if task_type not in templates:
        raise ValueError(f'R-Bench: unknown task type {task_type!r} (expected one of {", ".join(TASK_TYPES)})')
    # str.replace, not str.format: questions may contain braces.
    return templates[task_type].replace('{question}', str(question)).replace('{choice}', str(choice))


# Naive-Baseline (the weight-free reference model) answers one constant per task: the floor a model should beat.
NAIVE_ANSWERS = {
    'MCQ': 'A',                                                    # always the first option
    'VQA': 'yes',                                                  # a fixed short answer
    'CAP': 'A photo of an everyday scene with some objects in it.',   # a generic caption that fits any image
}


def task_of_prompt(prompt_text: str) -> str:
    """Which official model prompt this is (MCQ / VQA / CAP), from its fixed wording."""
    templates = load_spec('rbench')['model_prompts']
    text = str(prompt_text).strip()
    if text == templates['CAP'].strip():
        return 'CAP'
    if text.endswith(templates['MCQ'].rsplit('\n', 1)[-1]):
        return 'MCQ'
    if text.endswith(templates['VQA'].split('}', 1)[-1]):
        return 'VQA'
    raise ValueError(f'not an R-Bench model prompt: {text[:80]!r}')


def naive_answer(prompt_text: str) -> str:
    return NAIVE_ANSWERS[task_of_prompt(prompt_text)]
