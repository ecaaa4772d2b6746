"""How sure every score is: a 95 % interval beside each, from the per-item files an evaluation writes.

Each benchmark's interval follows its own estimator, so the point estimate stays the number the score file holds
(dataset_specs/intervals.yaml says which method each benchmark uses and why):

- a mean of 0/1 item scores (GRAB, ReMI per task, RoCOCO-MCQ): the Wilson score interval (analytic, good at
  small n and near 0 or 100 %);
- a mean of bounded item scores in [0, 1] under a sampling design (R-Bench and -RC: items within task x strength;
  ReMI's Overall: the mean of task accuracies; RoCOCO retrieval: queries clustered by their image, t2i averaged
  over the mixing seeds): the Korn-Graubard interval, a Clopper-Pearson interval on the effective sample size
  n_eff = p (1 - p) / var (the design's variance: within strata, between clusters), shrunk for the variance's
  degrees of freedom. It covers 95 % from 45 R-Bench items up (the bootstrap it replaced covered 0.80-0.89 there)
  and a constant cell gets the exact interval of its item count (0 of 8: [0, 0.37]), never [0, 0].

A cell with fewer than 2 items gets no interval (None) and its n says why.

The result goes into `_score.json` as `ci95` (intervals under the same key paths as the scores they qualify,
each [low, high]), `ci95_n` (the item count of every interval whose count differs from the file's items) and
`ci95_method`. `detectable_difference` is the smallest difference to another run on the same items that the test
`vlmeval-ext compare` applies detects with 80 % power at the 5 % level (the exact McNemar test for a mean of 0/1
items, a t test on the design's variance otherwise), taking the two runs as uncorrelated; a run whose items all
have the same fractional score says "no variation in this run" instead.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from vlmeval_ext.spec import load_spec

_SPEC = load_spec('intervals')
B, SEED, LEVEL = _SPEC['bootstrap']['resamples'], _SPEC['bootstrap']['seed'], _SPEC['level']
Z = 1.959963984540054          # the 97.5 % normal quantile
POWER, ALPHA = 0.8, 0.05


# ------------------------------------------------------------------------------------------------ methods
def wilson(hits: float, n: int, scale: float = 100.0) -> list[float] | None:
    """The Wilson score interval of hits / n (in `scale` units); None below 2 items."""
    if n < 2:
        return None
    p = float(hits) / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return [_r(scale * max(0.0, centre - half)), _r(scale * min(1.0, centre + half))]


def _r(x: float) -> float:
    return round(float(x), 4) + 0.0          # + 0.0: never -0.0


def clopper_pearson(hits: float, n: float, scale: float = 1.0) -> list[float]:
    """The exact (Clopper-Pearson) interval of hits / n; n may be an effective, non-integer size."""
    from scipy.stats import beta
    a = (1 - LEVEL) / 2
    lo = 0.0 if hits <= 0 else float(beta.ppf(a, hits, n - hits + 1))
    hi = 1.0 if hits >= n else float(beta.ppf(1 - a, hits + 1, n - hits))
    return [_r(scale * lo), _r(scale * hi)]


def korn_graubard(mean: float, var: float, n: int, df: float, scale: float = 1.0) -> list[float] | None:
    """The 95 % interval of a mean of [0, 1] values with design variance `var` (of the mean) on `df` degrees of
    freedom and n units: Clopper-Pearson on n_eff = p (1 - p) / var, times (z / t_df)^2. No spread (var 0, or
    every value 0 or every value 1): Clopper-Pearson on the n units themselves. None below 2 units."""
    if n < 2 or mean != mean:
        return None
    p = min(1.0, max(0.0, float(mean)))
    if var <= 1e-15 or p * (1 - p) <= 0:
        return clopper_pearson(p * n, n, scale)
    from scipy.stats import t
    n_eff = p * (1 - p) / var * (Z / float(t.ppf(1 - (1 - LEVEL) / 2, max(df, 1.0)))) ** 2
    return clopper_pearson(p * n_eff, n_eff, scale)


def stratified(values: np.ndarray, strata: np.ndarray) -> tuple[float, float, float, int]:
    """(mean, variance of the mean, Satterthwaite degrees of freedom, n) of a plain mean of `values` (NaN left
    out) whose items were drawn within `strata`. A stratum of one item has no variance of its own: when one exists,
    the cell is taken as one stratum (the conservative case)."""
    ok = ~np.isnan(values)
    x, g = values[ok], np.asarray(strata)[ok]
    n = len(x)
    if n == 0:
        return float('nan'), 0.0, 0.0, 0
    _, inverse = np.unique(g, return_inverse=True)
    sizes = np.bincount(inverse)
    if (sizes < 2).any():
        inverse, sizes = np.zeros(n, int), np.array([n])
    if n < 2:
        return float(x.mean()), 0.0, 0.0, n
    sums = np.bincount(inverse, weights=x)
    squares = np.bincount(inverse, weights=x * x)
    s2 = np.maximum(0.0, (squares - sums * sums / sizes) / (sizes - 1))
    parts = sizes * s2 / (n * n)
    var = float(parts.sum())
    den = float((parts ** 2 / (sizes - 1)).sum())
    return float(x.mean()), var, (var * var / den if den > 0 else float(n - 1)), n


def task_mean(hits: np.ndarray, tasks: np.ndarray, order: Sequence[str]) -> tuple[float, float, float, int]:
    """(mean of the task means, its variance, degrees of freedom, n) for 0/1 hits: ReMI's Overall. A task's
    variance is p (1 - p) / (n_t - 1) (the unbiased one); a task of one item counts 1/4, the most a 0/1 value has."""
    ok = ~np.isnan(hits)
    parts, dfs, means = [], [], []
    for t in order:
        x = hits[ok & (tasks == t)]
        if not len(x):
            continue
        means.append(float(x.mean()))
        v = float(x.var(ddof=1)) / len(x) if len(x) > 1 else 0.25
        parts.append(v)
        dfs.append(max(1, len(x) - 1))
    k = len(means)
    if not k:
        return float('nan'), 0.0, 0.0, 0
    parts = np.array(parts) / (k * k)
    var = float(parts.sum())
    den = float((parts ** 2 / np.array(dfs)).sum())
    return float(np.mean(means)), var, (var * var / den if den > 0 else float(ok.sum() - 1)), int(ok.sum())


def draws(groups: np.ndarray, b: int = B, seed: int = SEED) -> np.ndarray:
    """(b, n) resampling counts of n units, drawn with replacement within each group (one group: plain)."""
    rng = np.random.default_rng(seed)
    n = len(groups)
    counts = np.zeros(b * n, np.float32)
    offsets = (np.arange(b, dtype=np.int64) * n)[:, None]
    for g in np.unique(groups):
        members = np.flatnonzero(groups == g)
        picks = members[rng.integers(0, len(members), size=(b, len(members)))]
        counts += np.bincount((offsets + picks).ravel(), minlength=b * n).astype(np.float32)
    return counts.reshape(b, n)


CHUNK_BYTES = 64 << 20        # the resampling counts held at once (about 16 bytes per unit and resample)


def chunked_draws(groups: np.ndarray, b: int = B):
    """(start, counts) pairs whose counts, stacked, are b resamples of the units within their groups; a chunk
    holds about CHUNK_BYTES, so memory stays bounded whatever the number of units. A run small enough for one
    chunk gets exactly `draws(groups, b)`."""
    per_chunk = max(1, min(b, CHUNK_BYTES // (16 * max(1, len(groups)))))
    for start in range(0, b, per_chunk):
        yield start, draws(groups, min(per_chunk, b - start), seed=SEED + start)


# ------------------------------------------------------------------------------------------------ power
def _mcnemar_cuts(ms: np.ndarray) -> np.ndarray:
    """For each count m of discordant pairs: the largest count c of one direction that the exact two-sided McNemar
    test at ALPHA rejects (p = 2 P(X <= c) <= ALPHA, X ~ Binomial(m, 1/2)); -1 when no count is rejected. The test
    rejects exactly the counts b <= c and b >= m - c (the binomial at 1/2 is symmetric)."""
    from scipy.stats import binom
    k = binom.ppf(ALPHA / 2, ms, 0.5)                  # the smallest k with P(X <= k) >= ALPHA / 2
    return np.where(2 * binom.cdf(k, ms, 0.5) <= ALPHA, k, k - 1)


def mcnemar_power(n: int, p_a: float, p_b: float) -> float:
    """The power of the exact McNemar test at ALPHA for two uncorrelated runs of accuracies p_a and p_b on n
    items: the discordant count M ~ Binomial(n, pi), given M the wrong->right count ~ Binomial(M, theta). One
    vectorised pass over M (linear in n)."""
    from scipy.stats import binom
    wr, rw = (1 - p_a) * p_b, p_a * (1 - p_b)
    pi = wr + rw
    if pi <= 0:
        return 0.0
    theta = min(1.0, wr / pi)
    ms = np.arange(1, n + 1)
    weights = binom.pmf(ms, n, pi)
    keep = weights >= 1e-12
    ms, weights = ms[keep], weights[keep]
    cuts = _mcnemar_cuts(ms)
    rejects = np.where(cuts >= 0, binom.cdf(cuts, ms, theta) + binom.sf(ms - cuts - 1, ms, theta), 0.0)
    return float((weights * rejects).sum())


def _smallest(power_of, top: float, steps: int = 60) -> float | None:
    """The smallest d in (0, top] with power_of(d) >= POWER (power rises with d), or None."""
    if top <= 0 or power_of(top) < POWER:
        return None
    lo, hi = 0.0, top
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if power_of(mid) >= POWER else (mid, hi)
        if hi - lo < 1e-5:
            break
    return hi


def detectable(kind: str, scale: float, n: int, mean: float, var: float = 0.0, df: float = 0.0) -> dict:
    """The smallest difference to another run on these n items that the comparison test detects with 80 % power at
    the 5 % level, the two runs taken as uncorrelated (the conservative case: `compare` measures the real pairing).
    kind 'binary': a plain mean of 0/1 items, the exact McNemar test (the second run's accuracy moved by d in the
    direction with more room); 'design': the mean's design variance `var` on `df` degrees of freedom, a paired t test
    (noncentral t). Returns {'value' (None when nothing is detectable), 'unit', 'test', 'note'}."""
    unit = '%' if scale > 1 else '0-1'
    digits = 2 if scale > 1 else 4
    out = {'value': None, 'unit': unit, 'n': int(n)}
    if kind == 'binary':
        out['test'] = 'exact McNemar'
        if n < 2 or mean != mean:
            out['note'] = f'{n} item(s): too few for any test'
            return out
        up = mean <= 0.5
        top = (1 - mean) if up else mean
        d = _smallest(lambda d: mcnemar_power(n, mean, mean + d if up else mean - d), top)
    else:
        out['test'] = 'paired t on the design variance'
        if n < 2 or var <= 1e-15:
            out['note'] = 'no variation in this run: every item has the same score, so no power can be computed'
            return out
        from scipy.stats import nct, t
        dof = max(df, 1.0)
        crit = float(t.ppf(1 - ALPHA / 2, dof))
        se = math.sqrt(2 * var)
        d = _smallest(lambda d: float(nct.sf(crit, dof, d / se) + nct.cdf(-crit, dof, d / se)), 1.0)
    if d is None:
        out['note'] = (f'at {n} items no difference of any size reaches 80 % power with the {out["test"]} test at '
                       'the 5 % level')
        return out
    out['value'] = round(scale * d, digits) + 0.0
    what = 'points' if scale > 1 else '(0-1 scale)'
    out['note'] = (f'differences under {out["value"]:g} {what} cannot be detected with 80 % power at the 5 % level '
                   f'({out["test"]}, {n} items, the two runs taken as uncorrelated)')
    return out


# ------------------------------------------------------------------------------------------------ writing
class Intervals:
    """ci95 / ci95_n under score-file key paths."""

    def __init__(self, n_items: int, method: dict):
        self.n_items, self.method = n_items, method
        self.ci95: dict = {}
        self.n: dict = {}

    def put(self, path: Sequence[str], interval, n: int) -> None:
        node = self.ci95
        for key in path[:-1]:
            node = node.setdefault(str(key), {})
        node[str(path[-1])] = interval
        if n != self.n_items:
            node = self.n
            for key in path[:-1]:
                node = node.setdefault(str(key), {})
            node[str(path[-1])] = n

    def block(self, detect: dict | None) -> dict:
        out = {'ci95': self.ci95, 'ci95_method': {**self.method, 'level': LEVEL}}
        if self.n:
            out['ci95_n'] = self.n
        if detect is not None:
            out['detectable_difference'] = detect
        return out


def _binary(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(frame[column], errors='coerce')


def binary_detectable(hits: Sequence[float]) -> dict:
    x = np.asarray(hits, float)
    x = x[~np.isnan(x)]
    return detectable('binary', 100.0, len(x), float(x.mean()) if len(x) else float('nan'))


# ------------------------------------------------------------------------------------------------ benchmarks
def grab(items: pd.DataFrame) -> dict:
    """GRAB: Wilson per scoring x (Overall, task, category, complexity) from `_items.tsv`."""
    scorings = [s for s in ('official', 'normalized', 'llm_extracted') if s in items]
    iv = Intervals(len(items), {'method': 'wilson', 'unit': 'items'})
    for scoring in scorings:
        hits = _binary(items, scoring)
        scored = hits.notna()
        iv.put([scoring, 'Overall'], wilson(hits[scored].sum(), int(scored.sum())), int(scored.sum()))
        for dim in ('task', 'category', 'complexity'):
            for group, part in hits[scored].groupby(items.loc[scored, dim].astype(str), sort=False):
                iv.put([scoring, dim, group], wilson(part.sum(), len(part)), len(part))
    return iv.block(binary_detectable(_binary(items, 'official')) if 'official' in items else None)


def _dimension_masks(rows: pd.DataFrame, dims: Sequence[str], dims_of: Callable) -> np.ndarray:
    masks = np.zeros((len(rows), len(dims)), bool)
    position = {d: j for j, d in enumerate(dims)}
    for i, row in enumerate(rows.to_dict('records')):
        for d in dims_of(row):
            if d in position:
                masks[i, position[d]] = True
    return masks


def robustness(rows: pd.DataFrame, metrics: Mapping[str, Callable[[pd.DataFrame], np.ndarray]],
               dims: Sequence[str], dims_of: Callable, strata: np.ndarray, strata_name: str):
    """R-Bench and -RC: every metric x dimension, the Korn-Graubard interval of the cell's mean, its items drawn
    within the strata. Returns (Intervals, {metric: (mean, var, df, n) of Overall})."""
    masks = _dimension_masks(rows, dims, dims_of)
    iv = Intervals(len(rows), {'method': 'korn-graubard', 'strata': strata_name, 'unit': 'items'})
    overall = {}
    for metric, value in metrics.items():
        v = value(rows)
        for j, dim in enumerate(dims):
            sel = masks[:, j]
            mean, var, df, n = stratified(v[sel], strata[sel])
            iv.put([metric, dim], korn_graubard(mean, var, n, df), n)
            if dim == 'Overall':
                overall[metric] = (mean, var, df, n)
    return iv, overall


def _design_detectable(stats_: tuple, scale: float = 1.0) -> dict:
    mean, var, df, n = stats_
    return detectable('design', scale, n, mean, var, df)


def rbench(scores: pd.DataFrame) -> dict:
    """R-Bench from `_scores.csv`: absolute = mean(score_dis), relative = mean(score_com x score_ref)."""
    from vlmeval_ext.dataset.utils.rbench_full import TASKS, dimension_order, dimensions_of
    tasks = [t for t in TASKS if (scores['type'] == t).any()] or list(TASKS)
    metrics = {'absolute': lambda f: pd.to_numeric(f['score_dis'], errors='coerce').to_numpy(float),
               'relative': lambda f: (pd.to_numeric(f['score_com'], errors='coerce')
                                      * pd.to_numeric(f['score_ref'], errors='coerce')).to_numpy(float)}
    strata = (scores['type'].astype(str) + '|' + scores['strength'].astype(str)).to_numpy()
    iv, overall = robustness(scores, metrics, dimension_order(tasks), dimensions_of, strata, 'task x strength')
    return iv.block(_design_detectable(overall['absolute']))


def rc(scores: pd.DataFrame) -> dict:
    """`<Dataset>-RC` from `_rc_scores.csv`: reference, absolute, relative, stratified by strength."""
    from vlmeval_ext.dataset.utils.rbench_full import dimension_order, dimensions_of
    task = str(scores['type'].iloc[0]) if len(scores) else ''
    num = {c: pd.to_numeric(scores[c], errors='coerce') for c in ('score_ref', 'score_dis', 'score_com')}
    metrics = {'reference': lambda f: num['score_ref'].to_numpy(float),
               'absolute': lambda f: num['score_dis'].to_numpy(float),
               'relative': lambda f: (num['score_com'] * num['score_ref']).to_numpy(float)}
    iv, overall = robustness(scores, metrics, dimension_order((task,)), dimensions_of,
                             scores['strength'].astype(str).to_numpy(), 'strength')
    return iv.block(_design_detectable(overall['absolute']))


def _score_variance(verdicts: str, majority: bool) -> float:
    """The variance of one score over a rerun of its judge calls, from the verdicts its repeats gave
    ('1,1,0,1,1' per prompt, ';' between prompts); a prompt asked once tells nothing (0)."""
    lists = [[float(v) for v in part.split(',') if v.strip()] for part in str(verdicts).split(';')]
    lists = [v for v in lists if v]
    if not lists:
        return 0.0
    if majority:
        flat = [v for vs in lists for v in vs]
        if len(flat) < 2:
            return 0.0
        p1, n = sum(flat) / len(flat), len(flat)
        win = sum(math.comb(n, j) * p1 ** j * (1 - p1) ** (n - j) for j in range(n // 2 + 1, n + 1))
        return win * (1 - win)
    total = sum(len(vs) for vs in lists)
    var = sum(len(vs) * float(np.var(vs, ddof=1)) for vs in lists if len(vs) > 1)
    return var / (2.0 * total) ** 2


def rbench_judge_noise(scores: pd.DataFrame) -> dict:
    """R-Bench official mode: the standard deviation of every cell's mean over a rerun of the judge, from the spread
    of each score's five repeated verdicts (a CAP dis/ref score asks each caption once: its share is not measured
    and counts 0, so a CAP cell's noise is a lower bound)."""
    from vlmeval_ext.dataset.utils.rbench_full import TASKS, dimension_order, dimensions_of
    tasks = [t for t in TASKS if (scores['type'] == t).any()] or list(TASKS)
    majority = (scores['type'].astype(str) == 'MCQ').to_numpy()
    num = {k: pd.to_numeric(scores[f'score_{k}'], errors='coerce').to_numpy(float) for k in ('dis', 'ref', 'com')}
    # an unscored score's verdicts column holds its failure reason: left out with the score
    var = {k: np.array([_score_variance(v, m) if s == s else np.nan
                        for v, m, s in zip(scores[f'verdicts_{k}'], majority, num[k])]) for k in ('dis', 'ref', 'com')}
    item_var = {'absolute': var['dis'], 'relative': num['ref'] ** 2 * var['com'] + num['com'] ** 2 * var['ref']}
    dims = dimension_order(tasks)
    masks = _dimension_masks(scores, dims, dimensions_of)
    out = {}
    for metric, v in item_var.items():
        out[metric] = {}
        for j, dim in enumerate(dims):
            x = v[masks[:, j] & ~np.isnan(v)]
            out[metric][dim] = round(math.sqrt(float(x.sum())) / len(x), 5) if len(x) else None
    out['note'] = ('standard deviation of each cell over a rerun of the judge, from the spread of each score\'s '
                   'repeated verdicts; CAP dis/ref (one call per caption) not measured, counted as 0')
    return out


_TRUTH = {'true': 1.0, 'false': 0.0, '1': 1.0, '0': 0.0, '1.0': 1.0, '0.0': 0.0}


def remi(items: pd.DataFrame, score: Mapping) -> dict:
    """ReMI: Wilson per task; Overall (the mean of task accuracies) by Korn-Graubard on the tasks' variances; the
    ERP Overall (a linear function of the task accuracies, each task's naive baseline held at its value) by a t
    interval on the same variances, each task's taken at (hits + 1) / (n + 2) so that it is never 0."""
    iv = Intervals(len(items), {'method': 'wilson per task; korn-graubard over tasks for Overall; t over tasks '
                                          'for the ERP Overall', 'unit': 'items'})
    scored = items[items['kind'].astype(str) != 'failed'].reset_index(drop=True)
    tasks = list(score['accuracy']['task'])
    strata = scored['task'].astype(str).to_numpy()
    detect = None
    for scoring, block in (('official', score), ('lenient', score['lenient'])):
        hits = scored[scoring].astype(str).str.lower().map(_TRUTH).to_numpy(float)
        prefix = [] if scoring == 'official' else ['lenient']
        for t in tasks:
            sel = strata == t
            iv.put([*prefix, 'accuracy', 'task', t], wilson(np.nansum(hits[sel]), int(sel.sum())), int(sel.sum()))
        overall = task_mean(hits, strata, tasks)
        iv.put([*prefix, 'accuracy', 'Overall'], korn_graubard(*overall[:2], overall[3], overall[2], 100.0),
               overall[3])
        if scoring == 'official':
            detect = _design_detectable(overall, 100.0)
        iv.put([*prefix, 'erp', 'Overall'], _erp_interval(hits, strata, tasks, block), overall[3])
    return iv.block(detect)


def _erp_interval(hits: np.ndarray, strata: np.ndarray, tasks: Sequence[str], block: Mapping) -> list | None:
    from scipy.stats import t as student
    given = block['naive_baseline']['task']
    base = {t: given[t] / 100.0 for t in tasks if given.get(t) is not None}
    ok = ~np.isnan(hits)
    used = [t for t in tasks if t in base and base[t] < 1 and (ok & (strata == t)).any()]
    if not used or int(ok.sum()) < 2 or block.get('erp', {}).get('Overall') is None:
        return None
    k = len(used)
    parts, dfs = [], []
    for t in used:
        x = hits[ok & (strata == t)]
        p = (x.sum() + 1) / (len(x) + 2)
        parts.append((100.0 / (k * (1 - base[t]))) ** 2 * p * (1 - p) / len(x))
        dfs.append(max(1, len(x) - 1))
    parts = np.array(parts)
    var = float(parts.sum())
    df = var * var / float((parts ** 2 / np.array(dfs)).sum())
    half = float(student.ppf(1 - (1 - LEVEL) / 2, df)) * math.sqrt(var)
    centre = float(block['erp']['Overall'])
    return [_r(centre - half), _r(centre + half)]


def rococo_mcq(items: pd.DataFrame) -> dict:
    """RoCOCO-MCQ: Wilson for accuracy and the twin rate over the answered items (inference failures left out)."""
    answered = items[items['how'].astype(str) != 'inference_failed']
    n = len(answered)
    iv = Intervals(n, {'method': 'wilson', 'unit': 'items'})
    right = (answered['choice'].astype(str) == answered['answer'].astype(str)).astype(float)
    twin = (answered['choice'].astype(str) == answered['twin'].astype(str)).astype(float)
    iv.put(['accuracy'], wilson(right.sum(), n), n)
    iv.put(['twin_rate'], wilson(twin.sum(), n), n)
    return iv.block(binary_detectable(right.to_numpy()))


def clustered_ratio(hits: np.ndarray, who: np.ndarray, seeds: np.ndarray, n_clusters: int) -> tuple:
    """(mean over seeds of each seed's hit rate, its variance, df, clusters): the linearized (ratio-estimator)
    variance with the images as clusters, every seed's rate linearized and averaged within each image."""
    z = np.zeros(n_clusters)
    rates = []
    labels = np.unique(seeds)
    for s in labels:
        sel = seeds == s
        y = np.bincount(who[sel], weights=hits[sel], minlength=n_clusters)
        m = np.bincount(who[sel], minlength=n_clusters).astype(float)
        rate = y.sum() / m.sum()
        rates.append(rate)
        z += (y - rate * m) / (m.sum() / n_clusters) / len(labels)
    n = n_clusters
    var = float((z ** 2).sum() / (n * (n - 1))) if n > 1 else 0.0
    return float(np.mean(rates)), var, float(n - 1), n


def rococo_retrieval(ranks: pd.DataFrame) -> dict:
    """RoCOCO retrieval from `_ranks.tsv`: R@1/5/10, R_mean and the false rate, Korn-Graubard on the images as
    clusters; text-to-image: the mean over the mixing seeds, and `per_seed` gets its own intervals."""
    clusters = ranks['cluster'].astype(int).to_numpy()
    ids, inverse = np.unique(clusters, return_inverse=True)
    seeds = ranks['seed'].astype(str).to_numpy()
    iv = Intervals(len(ids), {'method': 'korn-graubard', 'clusters': 'images', 'unit': 'images'})
    rank = ranks['rank'].astype(int).to_numpy()
    hits = {'R@1': rank < 1, 'R@5': rank < 5, 'R@10': rank < 10,
            'false_rate': ranks['top1_false'].astype(int).to_numpy() == 1}
    hits = {k: v.astype(float) for k, v in hits.items()}
    hits['R_mean'] = (hits['R@1'] + hits['R@5'] + hits['R@10']) / 3
    for key in ('R@1', 'R@5', 'R@10', 'R_mean', 'false_rate'):
        mean, var, df, n = clustered_ratio(hits[key], inverse, seeds, len(ids))
        iv.put(['metrics', key], korn_graubard(mean, var, n, df, 100.0), len(ids))
        if len(set(seeds)) > 1:
            for s in sorted(set(seeds)):
                sel = seeds == s
                m, v, d, k = clustered_ratio(hits[key][sel], inverse[sel], seeds[sel], len(ids))
                iv.put(['per_seed', s, key], korn_graubard(m, v, k, d, 100.0), len(ids))
    return iv.block(None)


# ------------------------------------------------------------------------------------------------ reading
def leaf(ci95: Mapping | None, path: Sequence[str]):
    """The interval at a score path, or None."""
    node = ci95 or {}
    for key in path:
        if not isinstance(node, Mapping) or str(key) not in node:
            return None
        node = node[str(key)]
    return node if isinstance(node, list) else None


def detectable_text(detect: Mapping | None) -> str:
    """The detectable difference for a table cell: its value, or why there is none."""
    if not detect:
        return '-'
    if detect.get('value') is None:
        note = str(detect.get('note') or '')
        return 'no variation in this run' if note.startswith('no variation') else 'none at this n'
    return f"{detect['value']:g}"


def text(interval, digits: int = 2) -> str:
    """'[low, high]' for tables; 'n<2' where a cell has too few items; a text as it is ('-': no interval)."""
    if isinstance(interval, str):
        return interval
    if interval is None:
        return 'n<2'
    return f'[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]'
