"""What the statistics claim, checked against a known truth: the 95 % intervals cover at small n on the real R-Bench
items, no interval has zero width, `detectable_difference` is the exact test's, and `compare`'s interval agrees
with its test. (benchmarks/interval_coverage.py runs the larger simulations.)"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from helpers.rbench_population import population
from vlmeval_ext.plugin import rbench, rococo_retrieval
from vlmeval_ext.records import intervals as I
from vlmeval_ext.records.compare import mcnemar, mcnemar_interval, p_text


@pytest.fixture(scope='module')
def pop(fixtures_dir):
    return population(fixtures_dir)


def _coverage(pop, metric: str, cell: np.ndarray, per_stratum: int, reps: int, seed: int) -> float:
    """Share of stratified samples (per_stratum items of every task x strength) whose interval of the cell's mean
    holds the cell's mean over all 1,485 items."""
    strata = np.char.add(pop['type'], pop['strength'].astype(str))
    labels = np.unique(strata)
    values = pop[metric]
    truth = values[cell].mean()
    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(reps):
        idx = np.concatenate([rng.choice(np.flatnonzero(strata == g), per_stratum, replace=False) for g in labels])
        idx = idx[cell[idx]]
        mean, var, df, n = I.stratified(values[idx], strata[idx])
        lo, hi = I.korn_graubard(mean, var, n, df)
        assert hi > lo                                   # never a zero-width interval
        covered += lo - 1e-12 <= truth <= hi + 1e-12
    return covered / reps


@pytest.mark.parametrize('metric', ['absolute', 'relative'])
@pytest.mark.parametrize('per_stratum', [5, 11])              # 45 and 99 items
def test_overall_interval_covers_at_small_n(pop, metric, per_stratum):
    everything = np.ones(len(pop['type']), bool)
    assert _coverage(pop, metric, everything, per_stratum, reps=600, seed=per_stratum) >= 0.93


@pytest.mark.parametrize('metric', ['absolute', 'relative'])
def test_smallest_cell_interval_covers_at_45_items(pop, metric):
    """CAP-high at 45 items: 5 items in the cell (the bootstrap covered 0.80 here)."""
    cap_high = (pop['type'] == 'CAP') & (pop['strength'] == 3)
    assert _coverage(pop, metric, cap_high, 5, reps=1000, seed=3) >= 0.93


def test_a_constant_cell_gets_the_exact_interval_not_zero_width():
    assert I.korn_graubard(0.0, 0.0, 8, 7) == [0.0, 0.3694]             # Clopper-Pearson 0 of 8
    lo, hi = I.korn_graubard(1.0, 0.0, 8, 7, 100.0)
    assert hi == 100.0 and 60 < lo < 70
    scores = pd.DataFrame({'pair_id': range(16), 'name': 'x', 'type': ['CAP'] * 8 + ['MCQ'] * 8,
                           'distortion': 1, 'strength': 1, 'score_ref': 1.0, 'score_com': 1.0,
                           'score_dis': [0.0] * 8 + [1.0, 0.0] * 4})
    block = rbench.item_intervals(scores)
    assert block['ci95']['absolute']['CAP'] == [0.0, 0.3694]
    widths = [hi - lo for metric in block['ci95'].values() for iv in metric.values() if iv for lo, hi in [iv]]
    assert widths and min(widths) > 0


def test_retrieval_with_every_query_missed_is_not_certain():
    ranks = pd.DataFrame({'seed': '-', 'query': range(40), 'cluster': np.repeat(range(8), 5), 'rank': 20,
                          'top1_false': 1})
    block = rococo_retrieval.item_intervals(ranks)
    assert block['ci95']['metrics']['R@1'] == [0.0, 36.9417]           # 0 of 8 images
    assert block['ci95']['metrics']['false_rate'] == [63.0583, 100.0]


def _exact_power_by_simulation(n, p_a, p_b, reps=4000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random((reps, n)) < p_a
    b = rng.random((reps, n)) < p_b
    rw, wr = (a & ~b).sum(axis=1), (~a & b).sum(axis=1)
    return float(np.mean([mcnemar(int(x), int(y)) < 0.05 for x, y in zip(rw, wr)]))


def test_detectable_difference_is_the_exact_mcnemar_power_at_41_items():
    """GRAB_DEMO's size: 41 items at 73 %. No difference under 6 discordant items (14.6 points) can even reach
    p < 0.05, and the normal approximation's 27.8 points had less than 80 % power under the exact test."""
    n, p = 41, 30 / 41
    got = I.detectable('binary', 100.0, n, p)
    d = got['value'] / 100
    assert got['value'] >= 100 * 6 / 41
    assert _exact_power_by_simulation(n, p, p - d) >= 0.78                # 80 % up to simulation error
    assert _exact_power_by_simulation(n, p, p - (d - 0.06)) < 0.8
    assert got['note'].startswith(f'differences under {got["value"]:g} points cannot be detected with 80 % power')


def test_mcnemar_power_equals_the_sum_over_every_outcome():
    """The power summed over every (discordant, wrong->right) outcome with the compare command's own exact test,
    against the one-pass formula that `detectable` uses (linear in n: 2,170 GRAB items take milliseconds)."""
    from scipy.stats import binom
    for n, p_a, p_b in [(6, 0.5, 1.0), (12, 0.2, 0.7), (41, 30 / 41, 0.4), (60, 0.9, 0.6), (25, 0.0, 0.3)]:
        wr, rw = (1 - p_a) * p_b, p_a * (1 - p_b)
        pi, theta = wr + rw, wr / (wr + rw)
        by_outcome = sum(binom.pmf(m, n, pi) * binom.pmf(b, m, theta)
                         for m in range(1, n + 1) for b in range(m + 1) if mcnemar(m - b, b) <= 0.05)
        assert I.mcnemar_power(n, p_a, p_b) == pytest.approx(by_outcome, abs=1e-9), (n, p_a, p_b)


def test_mcnemar_cuts_are_the_exact_tests_at_every_discordant_count():
    """The cut of every m up to 5,000 (numpy sums of binomial probabilities) is scipy.stats' exact two-sided
    binomial test's: the largest one-direction count with p <= 0.05 (the blocks of CUT_ROWS rows joined too)."""
    from scipy.stats import binom
    n = 5000
    ms = np.arange(1, n + 1)
    got = I._mcnemar_cuts_upto(n)
    expected = np.full(n, -1.0)
    for m in ms:
        c = int(binom.ppf(0.025, m, 0.5))                         # the 2.5 % quantile, then settled exactly
        while c >= 0 and 2 * binom.cdf(c, m, 0.5) > 0.05:
            c -= 1
        while c + 1 <= m and 2 * binom.cdf(c + 1, m, 0.5) <= 0.05:
            c += 1
        expected[m - 1] = c
    assert (got == expected).all(), np.flatnonzero(got != expected)[:5] + 1


def test_mcnemar_power_equals_scipys_binomial_sum_at_large_n():
    """At GRAB's 2,170 items and beyond, the trinomial sum over the counts that carry the mass equals the sum over
    every discordant count with scipy.stats' binomial, to 1e-10: what the band leaves out is negligible."""
    from scipy.stats import binom
    for n, p_a, p_b in [(2170, 0.3, 0.34), (2170, 0.5, 0.47), (600, 0.02, 0.05), (300, 1.0, 0.99),
                        (5000, 0.7, 0.72), (1000, 0.001, 0.0)]:
        wr, rw = (1 - p_a) * p_b, p_a * (1 - p_b)
        ms = np.arange(1, n + 1)
        cuts = I._mcnemar_cuts_upto(n)
        theta = wr / (wr + rw)
        rejects = np.where(cuts >= 0, binom.cdf(cuts, ms, theta) + binom.sf(ms - cuts - 1, ms, theta), 0.0)
        expected = float((binom.pmf(ms, n, wr + rw) * rejects).sum())
        assert I.mcnemar_power(n, p_a, p_b) == pytest.approx(expected, abs=1e-10), (n, p_a, p_b)


def test_detectable_difference_never_prints_zero():
    constant = I.detectable('design', 1.0, 24, 0.5, 0.0, 23)
    assert constant['value'] is None and constant['note'].startswith('no variation in this run')
    assert I.detectable_text(constant) == 'no variation in this run'
    all_right = I.detectable('binary', 100.0, 41, 1.0)                  # binary: the exact test still answers
    assert all_right['value'] and all_right['value'] > 0


def test_remi_detectable_uses_the_variance_of_the_task_means():
    """ReMI's Overall is the mean of task accuracies: unequal task sizes make its variance larger than the plain
    item variance says."""
    tasks = np.array(['a'] * 40 + ['b'] * 4)
    hits = np.array([1.0, 0.0] * 20 + [1.0, 0.0, 1.0, 0.0])
    mean, var, df, n = I.task_mean(hits, tasks, ['a', 'b'])
    plain = hits.var(ddof=1) / len(hits)
    assert var > 1.5 * plain
    by_tasks = I.detectable('design', 100.0, n, mean, var, df)['value']
    by_items = I.detectable('design', 100.0, n, hits.mean(), plain, n - 1)['value']
    assert by_tasks > by_items


def test_compare_interval_excludes_zero_exactly_when_mcnemar_rejects():
    n = 60
    for m in range(0, 31):
        for wr in range(m + 1):
            lo, hi = mcnemar_interval(m - wr, wr, n)
            assert lo <= (2 * wr - m) / n <= hi
            assert (lo > 0 or hi < 0) == (mcnemar(m - wr, wr) < 0.05), (m, wr, lo, hi)
    lo, hi = mcnemar_interval(0, 4, 41)                # the case: 4 wrong -> right, p = 0.125
    assert lo < 0 < hi and mcnemar(0, 4) == 0.125


def test_p_values_print_in_scientific_notation_when_tiny():
    assert p_text(9.094947e-13) == '9.1e-13' and p_text(0.125) == '0.1250' and p_text(1.0) == '1.0000'
    assert math.copysign(1, I.rounded(-0.00001)) == 1.0                       # rounding never gives -0.0


def _official_rows(items, reply):
    """R-Bench's per-item rows (scores and the verdicts column) from the official protocol in one thread."""
    from helpers.rbench_protocol import FunctionJudge, plans_of
    from vlmeval_ext.dataset.utils import rbench_full as B
    plans = plans_of(items, 'official')
    demands = B.prompt_demands(plans, 'official')
    judge = FunctionJudge(reply)
    answers = {p: B.ask(judge, p, scale, needs) for p, (scale, needs, _) in demands.items()}
    got = B.assign(demands, answers)
    by_key = {p.key: p for p in plans}
    rows = []
    for it in items:
        row = {'pair_id': it['pair_id'], 'name': it['name'], 'type': it['type'], 'distortion': it['distortion'],
               'strength': it['strength']}
        for kind in ('dis', 'ref', 'com'):
            v = got[f"{it['pair_id']}|{kind}"]
            row[f'score_{kind}'] = B.combine(by_key[f"{it['pair_id']}|{kind}"], v, 'official')
            row[f'verdicts_{kind}'] = ';'.join(','.join(map(str, x)) for x in v)
        rows.append(row)
    return pd.DataFrame(rows).astype(str)


def test_judge_noise_from_one_run_predicts_the_spread_of_reruns(fixtures_dir):
    """The judge noise a single official run reads from its five repeats per score is the spread of Overall over
    reruns of the judge (a noisy judge, q = 0.8, 30 reruns, on 200 real MCQ and VQA items)."""
    from helpers.fixtures import llava15_items
    from helpers.rbench_population import judge_calls_benchmark
    bench = judge_calls_benchmark()
    items = [it for it in llava15_items(fixtures_dir) if it['type'] != 'CAP'][::4][:200]
    overall = {'absolute': [], 'relative': []}
    estimated = {'absolute': [], 'relative': []}
    for seed in range(30):
        rows = _official_rows(items, bench.noisy_judge(0.8, seed))
        noise = rbench.judge_noise(rows)
        for metric in overall:
            dis, ref, com = (pd.to_numeric(rows[f'score_{k}']) for k in ('dis', 'ref', 'com'))
            overall[metric].append((dis if metric == 'absolute' else com * ref).mean())
            estimated[metric].append(noise[metric]['Overall'])
    for metric in overall:
        ratio = np.mean(estimated[metric]) / np.std(overall[metric], ddof=1)
        assert 0.7 < ratio < 1.4, (metric, ratio)


def test_judge_noise_leaves_out_a_failed_score_and_reads_repeats():
    rows = pd.DataFrame({'pair_id': ['1', '2'], 'name': 'x', 'type': 'VQA', 'distortion': '1', 'strength': '1',
                         'score_dis': ['0.8', ''],
                         'verdicts_dis': ['2,2,1,2,1', 'no verdict in (0, 1, 2) in 3 replies'],
                         'score_ref': ['1.0', '1.0'], 'verdicts_ref': ['2,2,2,2,2', '2,2,2,2,2'],
                         'score_com': ['1.0', '1.0'], 'verdicts_com': ['2,2,2,2,2', '2,2,2,2,2']})
    noise = rbench.judge_noise(rows)
    # one scored item: var(score) = 5 s^2 / (2 x 5)^2 = s^2 / 20 (the failed one is left out)
    assert noise['absolute']['Overall'] == pytest.approx(math.sqrt(np.var([2, 2, 1, 2, 1], ddof=1) / 20), abs=1e-5)
    assert noise['relative']['Overall'] == 0.0                       # every repeat agreed


@pytest.mark.parametrize('n,var', [(24, 1e-4), (1485, 1.7e-4), (2170, 1e-6), (5, 0.002)])
def test_detectable_difference_on_a_design_variance_is_where_the_paired_t_power_reaches_80_percent(n, var):
    """Where the noncentral t's distribution function has no value (NaN in its far left tail, from a noncentrality
    of about 7), the search must not read "too little power" (it did: 0.57 instead of 0.04 for 24 strata at
    variance 1e-4). The cases span a handful of strata to R-Bench's 1,485 items and a near-constant run."""
    from scipy.stats import nct, t
    got = I.detectable('design', 1.0, n, 0.5, var, n - 1)
    dof, se = n - 1, (2 * var) ** 0.5
    crit = t.ppf(0.975, dof)

    def power(d):
        return nct.sf(crit, dof, d / se) + nct.cdf(-crit, dof, d / se)
    d = got['value']
    assert power(d) >= 0.8 - 1e-3 and power(0.97 * d) < 0.8, (got, power(d), power(0.97 * d))
