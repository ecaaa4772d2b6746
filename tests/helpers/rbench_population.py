"""The real R-Bench items as a population for coverage tests: LLaVA-1.5's 1,485 items with the official GPT-3.5
score on the distorted image (the release's Result_dis_llava15.csv) and, for relative robustness, score_ref and
score_com from benchmarks/rbench_judge_calls.py's deterministic judge through the kit dialect's official protocol
(the release publishes no official verdicts for those two)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from helpers.fixtures import llava15_items, read_official_results
from helpers.rbench_protocol import run_protocol

BENCHMARKS = Path(__file__).resolve().parents[2] / 'benchmarks'


def judge_calls_benchmark():
    """benchmarks/rbench_judge_calls.py (its deterministic and noisy judges), loaded from its file."""
    spec = importlib.util.spec_from_file_location('rbench_judge_calls', BENCHMARKS / 'rbench_judge_calls.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def population(fixtures_dir) -> dict:
    """{'absolute', 'relative': per-item values; 'type', 'strength': per-item labels} of the 1,485 items."""
    fx = Path(fixtures_dir) / 'rbench' if (Path(fixtures_dir) / 'rbench').is_dir() else Path(fixtures_dir)
    items = llava15_items(fx)
    dis = read_official_results(fx / 'Result_dis_llava15.csv')
    scores, _ = run_protocol(items, judge_calls_benchmark().deterministic_judge, 'official', kinds=('ref', 'com'))
    ref = np.array([scores[f"{it['pair_id']}|ref"] for it in items], float)
    com = np.array([scores[f"{it['pair_id']}|com"] for it in items], float)
    return {'absolute': np.array(dis, float), 'relative': com * ref,
            'type': np.array([it['type'] for it in items]), 'strength': np.array([int(it['strength']) for it in items])}
