"""How sure every score is: a 95 % interval beside each, from the per-item files an evaluation writes.

Each benchmark's interval follows its own estimator, so the point estimate stays the number the score file holds
(dataset_specs/intervals.yaml says which method each benchmark uses and why):

- a mean of 0/1 item scores (GRAB, ReMI per task, RoCOCO-MCQ): the Wilson score interval (analytic, good at
  small n and near 0 or 100 %);
- a mean of item means that share nothing (R-Bench, -RC): a bootstrap over items, stratified so that the
  estimator's weighting is kept (R-Bench: task x strength; ReMI's Overall, the mean of task accuracies: task);
- RoCOCO retrieval: queries clustered by their image (the captions of one image are not independent; text-to-
  image queries share images too): a bootstrap over images; t2i averages the three mixing seeds within each draw.

Bootstraps draw B = 2,000 resamples with a fixed seed (SEED, recorded in the score file and the manifest) and take
the 2.5 / 97.5 percentiles. A cell with fewer than 2 items gets no interval (None) and its n says why.

The result goes into `_score.json` as `ci95` (intervals under the same key paths as the scores they qualify,
each [low, high]), `ci95_n` (the item count of every interval whose count differs from the file's items) and
`ci95_method`. `detectable_difference` is the smallest difference a paired comparison of two runs of this size
could detect (80 % power, 5 % level).
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
Z_POWER = 0.8416212335729143   # the 80 % normal quantile


# ------------------------------------------------------------------------------------------------ methods
def wilson(hits: float, n: int, scale: float = 100.0) -> list[float] | None:
    """The Wilson score interval of hits / n (in `scale` units); None below 2 items."""
    if n < 2:
        return None
    p = float(hits) / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return [round(float(scale * max(0.0, centre - half)), 4), round(float(scale * min(1.0, centre + half)), 4)]


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


def masked_means(values: np.ndarray, masks: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(b, d) resampled means of masked cells: values (n,), masks (n, d), counts (b, n); NaN values left out."""
    ok = ~np.isnan(values)
    v = np.where(ok, values, 0.0)
    m = masks & ok[:, None]
    num = counts @ (v[:, None] * m)
    den = counts @ m.astype(np.float32)
    with np.errstate(invalid='ignore', divide='ignore'):
        return num / den


def bootstrap_means(values: np.ndarray, masks: np.ndarray, counts: np.ndarray, scale: float) -> list:
    """Percentile intervals of masked means: values (n,), masks (n, d) of which units each cell averages,
    counts (b, n) the resamples. NaN values are left out (a failed score). [low, high] per cell, None below 2."""
    return percentile_cells(masked_means(values, masks, counts), masks & ~np.isnan(values)[:, None], scale)


def percentile_cells(means: np.ndarray, m: np.ndarray, scale: float) -> list:
    """[low, high] of each column of the (b, d) resampled means; None for a cell of fewer than 2 units."""
    out = []
    for j in range(m.shape[1]):
        if m[:, j].sum() < 2:
            out.append(None)
            continue
        col = means[:, j][~np.isnan(means[:, j])]
        lo, hi = np.percentile(col, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
        out.append([round(scale * float(lo), 4), round(scale * float(hi), 4)])
    return out


def detectable(values: Sequence[float], scale: float = 100.0) -> float | None:
    """The smallest difference of means a paired comparison of two runs on these items detects with 80 % power at
    the 5 % level, taking the two runs' item scores as uncorrelated (the conservative case; `vlmeval-ext
    compare` measures the actual pairing): (z_0.975 + z_0.8) * sqrt(2 var / n)."""
    x = np.asarray([v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))], float)
    if len(x) < 2 or float(np.var(x)) == 0.0:
        return None                 # every item the same score: its variance is no yardstick (never print 0.00)
    return round(scale * (Z + Z_POWER) * math.sqrt(2 * float(np.var(x, ddof=1)) / len(x)), 2 if scale > 1 else 4)


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

    def block(self, detectable_difference: float | None, unit: str) -> dict:
        out = {'ci95': self.ci95, 'ci95_method': {**self.method, 'level': LEVEL}}
        if self.n:
            out['ci95_n'] = self.n
        if detectable_difference is not None:
            out['detectable_difference'] = {'value': detectable_difference, 'unit': unit,
                                            'note': 'the smallest difference to another run on these items that '
                                                    'a paired test detects (80 % power, 5 % level), taking the '
                                                    'two runs as uncorrelated'}
        return out


def _binary(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(frame[column], errors='coerce')


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
    return iv.block(detectable(_binary(items, 'official').tolist()) if 'official' in items else None, '%')


def _dimension_masks(rows: pd.DataFrame, dims: Sequence[str], dims_of: Callable) -> np.ndarray:
    masks = np.zeros((len(rows), len(dims)), bool)
    position = {d: j for j, d in enumerate(dims)}
    for i, row in enumerate(rows.to_dict('records')):
        for d in dims_of(row):
            if d in position:
                masks[i, position[d]] = True
    return masks


def robustness(rows: pd.DataFrame, metrics: Mapping[str, Callable[[pd.DataFrame], np.ndarray]],
               dims: Sequence[str], dims_of: Callable, strata: np.ndarray) -> dict:
    """R-Bench and -RC: every metric x dimension, one stratified item bootstrap (the same resamples for all),
    drawn a chunk of resamples at a time (memory bounded at any number of items)."""
    masks = _dimension_masks(rows, dims, dims_of)
    iv = Intervals(len(rows), {'method': 'bootstrap', 'resamples': B, 'seed': SEED, 'unit': 'items',
                               'strata': 'task x strength'})
    values = {metric: value(rows) for metric, value in metrics.items()}
    means = {metric: np.empty((B, len(dims))) for metric in metrics}
    for start, counts in chunked_draws(strata):
        for metric, v in values.items():
            means[metric][start:start + len(counts)] = masked_means(v, masks, counts)
    for metric, v in values.items():
        used = masks & ~np.isnan(v)[:, None]
        for dim, interval, n in zip(dims, percentile_cells(means[metric], used, 1.0), used.sum(axis=0)):
            iv.put([metric, dim], interval, int(n))
    return iv


def rbench(scores: pd.DataFrame) -> dict:
    """R-Bench from `_scores.csv`: absolute = mean(score_dis), relative = mean(score_com x score_ref)."""
    from vlmeval_ext.dataset.utils.rbench_full import TASKS, dimension_order, dimensions_of
    tasks = [t for t in TASKS if (scores['type'] == t).any()] or list(TASKS)
    metrics = {'absolute': lambda f: pd.to_numeric(f['score_dis'], errors='coerce').to_numpy(float),
               'relative': lambda f: (pd.to_numeric(f['score_com'], errors='coerce')
                                      * pd.to_numeric(f['score_ref'], errors='coerce')).to_numpy(float)}
    strata = (scores['type'].astype(str) + '|' + scores['strength'].astype(str)).to_numpy()
    iv = robustness(scores, metrics, dimension_order(tasks), dimensions_of, strata)
    return iv.block(detectable(metrics['absolute'](scores).tolist(), 1.0), '0-1')


def rc(scores: pd.DataFrame) -> dict:
    """`<Dataset>-RC` from `_rc_scores.csv`: reference, absolute, relative, stratified by strength."""
    from vlmeval_ext.dataset.utils.rbench_full import dimension_order, dimensions_of
    task = str(scores['type'].iloc[0]) if len(scores) else ''
    num = {c: pd.to_numeric(scores[c], errors='coerce') for c in ('score_ref', 'score_dis', 'score_com')}
    metrics = {'reference': lambda f: num['score_ref'].to_numpy(float),
               'absolute': lambda f: num['score_dis'].to_numpy(float),
               'relative': lambda f: (num['score_com'] * num['score_ref']).to_numpy(float)}
    iv = robustness(scores, metrics, dimension_order((task,)), dimensions_of, scores['strength'].astype(str)
                    .to_numpy())
    iv.method['strata'] = 'strength'
    return iv.block(detectable(num['score_dis'].tolist(), 1.0), '0-1')


def remi(items: pd.DataFrame, score: Mapping) -> dict:
    """ReMI: Wilson per task; Overall (the mean of task accuracies) and the ERP Overall by a bootstrap within
    tasks, the naive baseline of each task held at its value in the score file."""
    iv = Intervals(len(items), {'method': 'wilson per task; bootstrap within tasks for Overall and ERP',
                                'resamples': B, 'seed': SEED, 'unit': 'items'})
    scored = items[items['kind'].astype(str) != 'failed'].reset_index(drop=True)
    tasks = list(score['accuracy']['task'])
    strata = scored['task'].astype(str).to_numpy()
    counts = draws(strata) if len(scored) else np.zeros((B, 0), np.float32)
    masks = np.stack([strata == t for t in tasks], axis=1) if len(scored) else np.zeros((0, len(tasks)), bool)
    for scoring, block in (('official', score), ('lenient', score['lenient'])):
        hits = scored[scoring].astype(str).str.lower().map({'true': 1.0, 'false': 0.0, '1': 1.0, '0': 0.0,
                                                            '1.0': 1.0, '0.0': 0.0}).to_numpy(float)
        prefix = [] if scoring == 'official' else ['lenient']
        for t in tasks:
            sel = strata == t
            iv.put([*prefix, 'accuracy', 'task', t], wilson(np.nansum(hits[sel]), int(sel.sum())), int(sel.sum()))
        if not tasks or min(int((strata == t).sum()) for t in tasks) < 2:
            # a task of one item gives its resamples no spread: the Overall would look certain
            iv.put([*prefix, 'accuracy', 'Overall'], None, len(scored))
            iv.put([*prefix, 'erp', 'Overall'], None, len(scored))
        else:
            ok = ~np.isnan(hits)
            num = counts @ (np.where(ok, hits, 0)[:, None] * masks)
            den = counts @ (masks & ok[:, None]).astype(np.float32)
            with np.errstate(invalid='ignore', divide='ignore'):
                acc = num / den                                   # (B, tasks)
            overall = np.nanmean(acc, axis=1)
            iv.put([*prefix, 'accuracy', 'Overall'], _pct(overall), len(scored))
            base = np.array([(block['naive_baseline']['task'].get(t) or 0) / 100.0 for t in tasks])
            usable = base < 1
            if usable.any():
                erp = 100.0 * (acc[:, usable] - base[usable]) / (1 - base[usable])
                lo, hi = np.nanpercentile(np.nanmean(erp, axis=1), [2.5, 97.5])
                iv.put([*prefix, 'erp', 'Overall'], [round(float(lo), 4), round(float(hi), 4)], len(scored))
    return iv.block(detectable(scored['official'].astype(str).str.lower().map({'true': 1.0, 'false': 0.0})
                               .tolist()), '%')


def _pct(samples: np.ndarray) -> list[float] | None:
    samples = samples[~np.isnan(samples)]
    if len(samples) < 2:
        return None
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return [round(100 * float(lo), 4), round(100 * float(hi), 4)]


def rococo_mcq(items: pd.DataFrame) -> dict:
    """RoCOCO-MCQ: Wilson for accuracy and the twin rate over the answered items (inference failures left out)."""
    answered = items[items['how'].astype(str) != 'inference_failed']
    n = len(answered)
    iv = Intervals(n, {'method': 'wilson', 'unit': 'items'})
    right = (answered['choice'].astype(str) == answered['answer'].astype(str)).astype(float)
    twin = (answered['choice'].astype(str) == answered['twin'].astype(str)).astype(float)
    iv.put(['accuracy'], wilson(right.sum(), n), n)
    iv.put(['twin_rate'], wilson(twin.sum(), n), n)
    return iv.block(detectable(right.tolist()), '%')


def rococo_retrieval(ranks: pd.DataFrame, b: int = B) -> dict:
    """RoCOCO retrieval from `_ranks.tsv`: R@1/5/10, R_mean and the false rate, images (clusters) resampled;
    text-to-image: each draw averages the mixing seeds, and `per_seed` gets its own intervals."""
    clusters = ranks['cluster'].astype(int).to_numpy()
    ids, inverse = np.unique(clusters, return_inverse=True)
    counts = draws(np.zeros(len(ids), int), b)               # (b, images)
    seeds = sorted(ranks['seed'].astype(str).unique())
    iv = Intervals(len(ids), {'method': 'cluster bootstrap', 'clusters': 'images', 'resamples': b, 'seed': SEED,
                              'unit': 'images'})
    stats = {'R@1': lambda r, f: r < 1, 'R@5': lambda r, f: r < 5, 'R@10': lambda r, f: r < 10,
             'false_rate': lambda r, f: f == 1}
    per_seed = {}
    for seed in seeds:
        sel = (ranks['seed'].astype(str) == seed).to_numpy()
        rank = ranks.loc[sel, 'rank'].astype(int).to_numpy()
        false = ranks.loc[sel, 'top1_false'].astype(int).to_numpy()
        who = inverse[sel]
        n_per = np.bincount(who, minlength=len(ids)).astype(np.float32)
        den = counts @ n_per
        per_seed[seed] = {k: 100.0 * (counts @ np.bincount(who, weights=f(rank, false).astype(float),
                                                             minlength=len(ids))) / den for k, f in stats.items()}
        per_seed[seed]['R_mean'] = (per_seed[seed]['R@1'] + per_seed[seed]['R@5'] + per_seed[seed]['R@10']) / 3
    for key in ('R@1', 'R@5', 'R@10', 'R_mean', 'false_rate'):
        mean = np.mean([per_seed[s][key] for s in seeds], axis=0)
        iv.put(['metrics', key], _interval(mean), len(ids))
        if len(seeds) > 1:
            for s in seeds:
                iv.put(['per_seed', s, key], _interval(per_seed[s][key]), len(ids))
    return iv.block(None, '%')


def _interval(samples: np.ndarray) -> list[float] | None:
    if len(samples) < 2:
        return None
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return [round(float(lo), 4), round(float(hi), 4)]


# ------------------------------------------------------------------------------------------------ reading
def leaf(ci95: Mapping | None, path: Sequence[str]):
    """The interval at a score path, or None."""
    node = ci95 or {}
    for key in path:
        if not isinstance(node, Mapping) or str(key) not in node:
            return None
        node = node[str(key)]
    return node if isinstance(node, list) else None


def text(interval, digits: int = 2) -> str:
    """'[low, high]' for tables; 'n<2' where a cell has too few items; a text as it is ('-': no interval)."""
    if isinstance(interval, str):
        return interval
    if interval is None:
        return 'n<2'
    return f'[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]'
