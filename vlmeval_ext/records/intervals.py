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

import functools
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
    return [rounded(scale * max(0.0, centre - half)), rounded(scale * min(1.0, centre + half))]


def rounded(x: float) -> float:
    return round(float(x), 4) + 0.0          # + 0.0: never -0.0


def clopper_pearson(hits: float, n: float, scale: float = 1.0) -> list[float]:
    """The exact (Clopper-Pearson) interval of hits / n; n may be an effective, non-integer size."""
    from scipy.special import betaincinv        # the beta distribution's quantile (scipy.stats' beta.ppf)
    a = (1 - LEVEL) / 2
    lo = 0.0 if hits <= 0 else float(betaincinv(hits, n - hits + 1, a))
    hi = 1.0 if hits >= n else float(betaincinv(hits + 1, n - hits, 1 - a))
    return [rounded(scale * lo), rounded(scale * hi)]


def korn_graubard(mean: float, var: float, n: int, df: float, scale: float = 1.0) -> list[float] | None:
    """The 95 % interval of a mean of [0, 1] values with design variance `var` (of the mean) on `df` degrees of
    freedom and n units: Clopper-Pearson on n_eff = p (1 - p) / var, times (z / t_df)^2. No spread (var 0, or
    every value 0 or every value 1): Clopper-Pearson on the n units themselves. None below 2 units."""
    if n < 2 or mean != mean:
        return None
    p = min(1.0, max(0.0, float(mean)))
    if var <= 1e-15 or p * (1 - p) <= 0:
        return clopper_pearson(p * n, n, scale)
    n_eff = p * (1 - p) / var * (Z / t_quantile(1 - (1 - LEVEL) / 2, max(df, 1.0))) ** 2
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
# scipy.special, not scipy.stats, for the t test's power: the same functions (scipy.stats calls them), without
# scipy.stats' 0.5 s import and its per-call argument checks, which a bisection calling them dozens of times per
# evaluation paid each time
def t_quantile(q: float, df: float) -> float:
    """Student's t quantile (scipy.stats' t.ppf)."""
    from scipy.special import stdtrit
    return float(stdtrit(df, q))


@functools.lru_cache(maxsize=8)
def _log_factorials(n: int) -> np.ndarray:
    """log k! for k = 0..n (math.lgamma: exact to the last bit or two, unlike a running sum of logs)."""
    return np.array([math.lgamma(k + 1.0) for k in range(n + 1)])


def _xlogy(k: np.ndarray, p: float) -> np.ndarray:
    """k log p, 0 where k == 0 (also when p == 0)."""
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(k == 0, 0.0, k * math.log(p) if p > 0 else -np.inf)


def _band(n: int, p: float) -> np.ndarray:
    """The counts of Binomial(n, p) that carry its mass: mean +- 9 sd, and 12 more for the heavier tail of a small
    mean; what lies outside is under 1e-18 of it."""
    sd = math.sqrt(n * p * (1 - p))
    return np.arange(max(0, math.floor(n * p - 9 * sd - 12)), min(n, math.ceil(n * p + 9 * sd + 12)) + 1)


# The exact McNemar test's cuts and power are computed here with numpy alone (log-factorials and sums of binomial
# probabilities), which keeps scipy out of every evaluation of a mean of 0/1 items: tests/plugin/
# test_interval_coverage_and_power.py checks both against scipy.stats.
CUT_ROWS = 4096                          # rows of m per block in _mcnemar_cuts_upto (memory: rows x window floats)


@functools.lru_cache(maxsize=64)
def _mcnemar_cuts_upto(n: int) -> np.ndarray:
    """_mcnemar_cuts of m = 1..n (the same for every pair of accuracies: computed once per item count). For each m,
    P(X <= j), X ~ Binomial(m, 1/2), is summed over the j from 10 sd below m/2 up to m/2 (the mass below is under
    1e-22 of ALPHA); the cut is the last j where twice that is <= ALPHA."""
    lf = _log_factorials(n)
    cuts = np.empty(n, dtype=float)
    width = int(5 * math.sqrt(n)) + 3
    for first in range(1, n + 1, CUT_ROWS):
        ms = np.arange(first, min(n, first + CUT_ROWS - 1) + 1)[:, None]
        j = ms // 2 - np.arange(width)[::-1][None, :]            # ascending; the last column is floor(m/2)
        inside = j >= 0
        jj = np.where(inside, j, 0)
        probs = np.where(inside, np.exp(lf[ms] - lf[jj] - lf[ms - jj] - ms * math.log(2)), 0.0)
        rejected = (2 * np.cumsum(probs, axis=1) <= ALPHA) & inside
        count = rejected.sum(axis=1)                              # rejected j: a run from the first one inside
        last = j[np.arange(len(ms)), np.maximum((~inside).sum(axis=1) + count - 1, 0)]
        cuts[first - 1:first - 1 + len(ms)] = np.where(count > 0, last, -1)
    return cuts


def _mcnemar_cuts(ms: np.ndarray) -> np.ndarray:
    """For each count m >= 1 of discordant pairs: the largest count c of one direction that the exact two-sided
    McNemar test at ALPHA rejects (p = 2 P(X <= c) <= ALPHA, X ~ Binomial(m, 1/2)); -1 when no count is rejected.
    The test rejects exactly the counts b <= c and b >= m - c (the binomial at 1/2 is symmetric)."""
    ms = np.asarray(ms)
    return _mcnemar_cuts_upto(int(ms.max()))[ms - 1] if ms.size else np.asarray([], dtype=float)


def mcnemar_power(n: int, p_a: float, p_b: float) -> float:
    """The power of the exact McNemar test at ALPHA for two uncorrelated runs of accuracies p_a and p_b on n
    items: the counts (b, r) of wrong->right and right->wrong items are trinomial (n; wr, rw, 1 - wr - rw), and the
    test rejects when min(b, r) <= the cut of m = b + r. The sum runs over the counts that carry the mass."""
    wr, rw = (1 - p_a) * p_b, p_a * (1 - p_b)
    pi = wr + rw
    if pi <= 0:
        return 0.0
    b, r = _band(n, wr)[:, None], _band(n, rw)[None, :]
    m = b + r
    possible = (m <= n) & (m >= 1)
    rest = np.where(possible, n - m, 0)
    lf = _log_factorials(n)
    logp = (lf[n] - lf[b] - lf[r] - lf[rest] + _xlogy(b, wr) + _xlogy(r, rw)
            + _xlogy(rest, max(0.0, 1 - pi)))
    cut = _mcnemar_cuts_upto(n)[np.clip(m, 1, n) - 1]
    rejects = possible & (np.minimum(b, r) <= cut)
    return float(np.exp(np.where(rejects, logp, -np.inf)).sum())


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
        from scipy.special import nctdtr          # the noncentral t's distribution function (scipy.stats' nct)
        dof = max(df, 1.0)
        crit = t_quantile(1 - ALPHA / 2, dof)
        se = math.sqrt(2 * var)

        def power(nc):
            # P(T > crit) + P(T < -crit) for T noncentral t; the left tail is below Phi(-nc), under 1e-13 from
            # nc 7.4 on, where nctdtr returns NaN for it (a NaN power read as "too small" once sent the search to
            # the top of the scale: 0.57 instead of 0.04 for 24 strata at variance 1e-4)
            left = float(nctdtr(dof, nc, -crit))
            return float(1 - nctdtr(dof, nc, crit)) + (0.0 if left != left else left)
        # searched over the noncentrality d / se, up to 50 (80 % power is reached by nc 20 at every df >= 1, and
        # nctdtr is finite below 60) and up to d = 1, the whole scale
        nc = _smallest(power, min(1.0 / se, 50.0))
        d = None if nc is None else nc * se
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


def binary(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(frame[column], errors='coerce')


def binary_detectable(hits: Sequence[float]) -> dict:
    x = np.asarray(hits, float)
    x = x[~np.isnan(x)]
    return detectable('binary', 100.0, len(x), float(x.mean()) if len(x) else float('nan'))


# ------------------------------------------------------------------------------------------------ benchmarks


def dimension_masks(rows: pd.DataFrame, dims: Sequence[str], dims_of: Callable) -> np.ndarray:
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
    masks = dimension_masks(rows, dims, dims_of)
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


def design_detectable(stats_: tuple, scale: float = 1.0) -> dict:
    mean, var, df, n = stats_
    return detectable('design', scale, n, mean, var, df)


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
