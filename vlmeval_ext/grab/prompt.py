"""GRAB prompts (pure): the official question prompt and the official LLM answer-extraction prompt.

Both templates live verbatim in dataset_specs/grab.yaml, so the spec is the one place they are read from.
"""
from __future__ import annotations

from vlmeval_ext.core.spec import load_spec


def _spec() -> dict:
    return load_spec('grab')


def question_prompt(question: str) -> str:
    """The text the model sees with the plot (GRAB README prompt; the question carries its precision)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f'GRAB question must be a non-empty string, got {question!r}')
    # str.replace, not str.format: a question containing braces must not be read as a placeholder.
    return _spec()['prompt']['template'].replace('{question}', question)


def extraction_prompt(question: str, response: str) -> str:
    """The official Llama-3.1 extraction prompt for one model response (GRAB README, verbatim)."""
    if not isinstance(question, str) or not isinstance(response, str):
        raise TypeError(f'extraction_prompt needs strings, got question={type(question).__name__}, '
                        f'response={type(response).__name__}')
    template = _spec()['scoring']['llm_extracted']['extraction_prompt']
    # Fill {question} first, then {output}, each once, so neither value is re-scanned for placeholders.
    head, tail = template.split('{output}', 1)
    return head.replace('{question}', question) + response + tail
