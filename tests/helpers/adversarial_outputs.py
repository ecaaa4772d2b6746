"""Hostile model outputs of a given size, and every benchmark's reply parser (pure, no kit import).

Each output repeats a pattern that has made a parser slow (polynomial regex backtracking, a search restarted
from each marker, a decode started at each bracket) or crash. Used by the parser tests (each parser
finishes on each output) and benchmarks/parsers_1mb.py (how long it takes).
"""
from __future__ import annotations

from typing import Callable

PATTERNS = {
    'answer-marker': 'answer: ',
    'answer-is': 'the answer is ',
    'digits': '1',
    'spaces': ' ',
    'y-equals': 'y = ',
    'open-bracket': '[',
    'open-brace': '{',
    'score-spaces': 'score' + ' ' * 50,
    'letters': 'A B C D ',
    'paren-number': '(1 ',
    'boxed': '\\boxed{',
    'fences': '```',
    'quotes': '"',
    'brace-quote': '{"a": "',
    'caption-words': 'a man riding a horse ',
    'number-list': '1.5, ',
    'minus': '-',
    'stars': '*',
    'score-lines': 'Score: 2\n',
    'control': '\x00\x01\x1b',
}


def hostile_outputs(size: int = 1 << 20) -> dict[str, str]:
    """{name: output of exactly `size` characters}: each pattern repeated, and a few with a long tail."""
    outputs = {name: (p * (size // len(p) + 1))[:size] for name, p in PATTERNS.items()}
    outputs['y-equals-x'] = ('y = ' + 'x' * size)[:size]
    outputs['score-then-spaces'] = ('score' + ' ' * size)[:size - 1] + 'x'
    outputs['digits-then-answer'] = ('1' * size)[:size - 20] + '{"answer": "3"} The'
    return outputs


def _grab() -> dict[str, Callable[[str], object]]:
    from vlmeval_ext.dataset.utils import grab as G
    return {
        'GRAB official': lambda t: G.official_correct(t, '3'),
        'GRAB normalized (number)': lambda t: G.normalized_score(t, '3', 'Give your answer as an integer.'),
        'GRAB normalized (interval)': lambda t: G.normalized_score(t, '[-10, -3]', 'Give the interval.'),
        'GRAB normalized (equation)': lambda t: G.normalized_score(t, 'y = 2x + 1', 'in the form y = <a>x + <b>'),
    }


def _remi() -> dict[str, Callable[[str], object]]:
    from vlmeval_ext.dataset.utils import remi as R
    return {'ReMI official': R.official_prediction, 'ReMI lenient': R.extract_answer}


def _rbench() -> dict[str, Callable[[str], object]]:
    from vlmeval_ext.dataset.utils import rbench_full as B
    from vlmeval_ext.offline.judge import certain_letter
    return {'R-Bench certain_letter': lambda t: certain_letter(t, {'A': 'running', 'B': 'play football'}),
            'R-Bench verdict': lambda t: B.parse_verdict(t, (0, 1, 2))}


def _rococo() -> dict[str, Callable[[str], object]]:
    from vlmeval_ext.dataset.utils import rococo_mcq as Q
    options = {'A': 'a man riding a horse', 'B': 'a dog on a couch', 'C': 'two men', 'D': 'a red bus'}
    return {'RoCOCO-MCQ choice': lambda t: Q.parse_choice(t, options)}


def parsers() -> dict[str, Callable[[str], object]]:
    """{name: parse(output)} for every benchmark's reply parsers."""
    return {**_grab(), **_remi(), **_rbench(), **_rococo()}
