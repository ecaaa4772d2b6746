"""Coverage of R-Bench's 95 % intervals at 45, 99 and 1,485 items, before (the stratified percentile bootstrap) and
after (Korn-Graubard: Clopper-Pearson on the design's effective sample size), on the real LLaVA-1.5 items as the
population (tests/helpers/rbench_population.py: the official GPT-3.5 score on the distorted image; score_ref and
score_com from the deterministic judge). Each run draws the same number of items from every task x strength
stratum, with replacement (the 1,485 items as the distribution items come from), and asks whether the interval of
a cell's mean holds that cell's mean over the 1,485 items.
    python benchmarks/interval_coverage.py [--reps 1000] [--out benchmarks/interval_coverage.md]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))

from helpers.fixtures import unpacked_fixtures  # noqa: E402
from helpers.rbench_population import population  # noqa: E402
from vlmeval_ext.records import intervals  # noqa: E402


def percentile_bootstrap(x: np.ndarray, strata: np.ndarray, rng, b: int = 1000):
    """The interval R-Bench used before: 2.5 / 97.5 percentiles of the mean over resamples within strata."""
    means = np.zeros(b)
    labels = np.unique(strata)
    total = np.zeros(b)
    for g in labels:
        xs = x[strata == g]
        picks = rng.integers(0, len(xs), size=(b, len(xs)))
        total += xs[picks].sum(axis=1)
    means = total / len(x)
    return np.percentile(means, [2.5, 97.5])


def run(pop, metric, cell, per_stratum, reps, seed, method):
    strata = np.char.add(pop['type'], pop['strength'].astype(str))
    labels = np.unique(strata)
    values = pop[metric]
    truth = values[cell].mean()
    rng = np.random.default_rng(seed)
    covered = zero = 0
    widths = []
    for _ in range(reps):
        idx = np.concatenate([rng.choice(np.flatnonzero(strata == g), per_stratum, replace=True) for g in labels])
        idx = idx[cell[idx]]
        x, g = values[idx], strata[idx]
        if method == 'before':
            lo, hi = percentile_bootstrap(x, g, rng)
        else:
            mean, var, df, n = intervals.stratified(x, g)
            lo, hi = intervals.korn_graubard(mean, var, n, df)
        covered += lo - 1e-12 <= truth <= hi + 1e-12
        zero += hi - lo < 1e-12
        widths.append(hi - lo)
    return covered / reps, zero, float(np.median(widths))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=1000)
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    t0 = time.time()
    pop = population(unpacked_fixtures())
    everything = np.ones(len(pop['type']), bool)
    cells = [('absolute', 'Overall', everything), ('relative', 'Overall', everything),
             ('absolute', 'CAP-high', (pop['type'] == 'CAP') & (pop['strength'] == 3)),
             ('relative', 'CAP-high', (pop['type'] == 'CAP') & (pop['strength'] == 3)),
             ('absolute', 'MCQ-low', (pop['type'] == 'MCQ') & (pop['strength'] == 1))]
    lines = ['# Coverage of the R-Bench intervals at small n', '',
             'Population: the 1,485 real LLaVA-1.5 items (absolute: the official GPT-3.5 score on the distorted image; '
             'relative: score_com x score_ref from the deterministic judge). Each run draws the same number of items '
             'from each of the 9 task x strength strata with replacement; coverage = share of runs whose 95 % '
             f'interval holds the cell\'s population mean ({args.reps} runs per row; its own simulation error is '
             f'about +/-{1.96 * math.sqrt(0.95 * 0.05 / args.reps):.3f}). "before": the stratified percentile '
             'bootstrap (1,000 resamples); "after": Korn-Graubard (Clopper-Pearson on n_eff = p (1 - p) / var, '
             'var the stratified variance, shrunk by (z / t_df)^2).', '',
             '| items | metric | cell | coverage before | coverage after | zero-width before | zero-width after | '
             'median width before | median width after |', '|---|---|---|---|---|---|---|---|---|']
    for per in (5, 11, 165):
        for metric, name, cell in cells:
            before = run(pop, metric, cell, per, args.reps if per < 165 else args.reps // 4, per, 'before')
            after = run(pop, metric, cell, per, args.reps, per, 'after')
            lines.append(f'| {9 * per} | {metric} | {name} | {before[0]:.3f} | {after[0]:.3f} | {before[1]} | '
                         f'{after[1]} | {before[2]:.4f} | {after[2]:.4f} |')
    lines += ['', f'Wall time {time.time() - t0:.0f} s. Command: `python benchmarks/interval_coverage.py --reps '
              f'{args.reps}`']
    Path(args.out).write_text('\n'.join(lines) + '\n', encoding='utf-8')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
