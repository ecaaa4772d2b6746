"""What the 95 % intervals add to an evaluation at full size: reading the per-item file and computing `ci95`.

Per-item files in the formats the evaluations write, at the benchmarks' full sizes:
  R-Bench   `_scores.csv` of the 1,485 real items (2,970 prediction rows; task, distortion and strength from the
            release), scores drawn at random in [0, 1]: stratified bootstrap over pairs, every dimension;
  GRAB      `_items.tsv` of 2,170 items (its 4 tasks, 23 categories, complexities 0-9), three 0/1 scorings:
            Wilson intervals per scoring x dimension;
  RoCOCO    `_ranks.tsv` of image-to-text (5,000 image queries) and text-to-image (25,010 caption queries x 3
            mixing seeds, clustered by their 5,000 images): the per-query ranks, never the similarity matrix.
Each is timed from reading the file to the finished `ci95` block (best of 3, one process, 2 CPUs).

    python benchmarks/intervals_speed.py [--out benchmarks/intervals_speed.md]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'tests'))

from helpers.fixtures import llava15_items, unpacked_fixtures  # noqa: E402
from vlmeval_ext.plugin import grab, rbench, rococo_retrieval  # noqa: E402


def rbench_scores(folder: Path, rng) -> Path:
    items = llava15_items(unpacked_fixtures() / 'rbench')
    frame = pd.DataFrame({'pair_id': [it['pair_id'] for it in items], 'type': [it['type'] for it in items],
                          'distortion': [it['distortion'] for it in items],
                          'strength': [it['strength'] for it in items]})
    frame['score_ref'] = rng.choice([0, 0.2, 0.5, 0.8, 1.0], len(frame))
    frame['score_dis'] = rng.choice([0, 0.2, 0.5, 0.8, 1.0], len(frame))
    frame['score_com'] = rng.choice([0, 0.5, 1.0], len(frame))
    path = folder / 'M_R-Bench-Full_scores.csv'
    frame.to_csv(path, index=False)
    return path


def grab_items(folder: Path, rng, n: int = 2170) -> Path:
    from vlmeval_ext.dataset.utils.grab import TASKS
    frame = pd.DataFrame({'index': range(n), 'task': rng.choice(list(TASKS), n),
                          'category': rng.choice([f'category {k}' for k in range(23)], n),
                          'complexity': rng.integers(0, 10, n)})
    for scoring in ('official', 'normalized', 'llm_extracted'):
        frame[scoring] = (rng.random(n) < 0.3).astype(int)
    path = folder / 'M_GRAB_items.tsv'
    frame.to_csv(path, sep='\t', index=False)
    return path


def rococo_ranks(folder: Path, rng, name: str, queries: int, seeds: list[str], images: int = 5000) -> Path:
    rows = []
    for seed in seeds:
        cluster = np.arange(queries) % images
        rows.append(pd.DataFrame({'query': np.arange(queries), 'cluster': cluster, 'seed': seed,
                                  'rank': rng.geometric(0.15, queries) - 1,
                                  'top1_false': (rng.random(queries) < 0.4).astype(int)}))
    path = folder / f'M_{name}_ranks.tsv'
    pd.concat(rows).to_csv(path, sep='\t', index=False)
    return path


def best_of(fn, k: int = 3) -> float:
    times = []
    for _ in range(k):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rb = rbench_scores(tmp, rng)
        gr = grab_items(tmp, rng)
        i2t = rococo_ranks(tmp, rng, 'RoCOCO-I2T-mix', 5000, ['0'])
        t2i = rococo_ranks(tmp, rng, 'RoCOCO-T2I-mix', 25010, ['1', '10', '100'])
        cases = [
            ('R-Bench-Full', '1,485 pairs (2,970 predictions)', 'stratified bootstrap, 2,000 resamples',
             lambda: rbench.item_intervals(pd.read_csv(rb, dtype=str, keep_default_na=False))),
            ('GRAB', '2,170 items x 3 scorings', 'Wilson',
             lambda: grab.item_intervals(pd.read_csv(gr, sep='\t', dtype=str, keep_default_na=False))),
            ('RoCOCO-I2T-mix', '5,000 image queries', 'cluster bootstrap over 5,000 images',
             lambda: rococo_retrieval.item_intervals(pd.read_csv(i2t, sep='\t'))),
            ('RoCOCO-T2I-mix', '25,010 caption queries x 3 seeds', 'cluster bootstrap over 5,000 images',
             lambda: rococo_retrieval.item_intervals(pd.read_csv(t2i, sep='\t'))),
        ]
        for name, size, method, fn in cases:
            block = fn()
            leaves = sum(1 for _ in _leaves(block['ci95']))
            rows.append(f'| {name} | {size} | {method} | {leaves} | {best_of(fn):.2f} |')
    lines = ['# Intervals at full size: what `ci95` adds to an evaluation', '',
             ' '.join(__doc__.split('\n\n')[1].split()), '',
             '| dataset | per-item file | method | intervals | seconds (read + compute) |', '|---|---|---|---|---|',
             *rows, '',
             'Goal: at most 2 s each on 2 cores.', '',
             f'Command: `python benchmarks/intervals_speed.py` ({os.cpu_count()} CPUs, Python '
             f'{platform.python_version()}, numpy {np.__version__}).']
    Path(args.out).write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


def _leaves(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _leaves(v)
    else:
        yield tree


if __name__ == '__main__':
    main()
