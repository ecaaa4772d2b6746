"""`vlmeval-ext compare A B --data NAME`: does B really score differently from A on the same items?

A and B are two evaluated predictions files of one dataset (or two work dirs holding one each). The comparison
reads the per-item files their evaluations wrote (GRAB `_items.tsv`, R-Bench `_scores.csv`, ReMI `_items.tsv`,
RoCOCO-MCQ `_items.tsv`, RoCOCO retrieval `_ranks.tsv`, `-RC` `_rc_scores.csv`), matches the items by their key
(index, pair_id, or seed and query) and refuses, in one line, two runs of different dataset files (the manifests'
TSV md5) or of different item sets, a file that is an evaluation of another dataset, an unfinished evaluation
(only `_score_incomplete.json`), and two runs with no item scored in both. R-Bench: `--mode` picks the judge mode
(default: official when both runs have it). Who judged each side is recorded; when the judges differ, every
judged score is marked "not comparable".

Every headline is a weighted mean of item scores (a plain mean; ReMI: the mean of task means; RoCOCO t2i: the
mean over seeds), so for each one: the difference B - A; a paired p-value: the exact McNemar test when the item
scores are 0/1 and the mean is plain, otherwise a paired sign-flip permutation test (10,000 flips, seeded, the
images as units for retrieval); its paired 95 % interval, one that agrees with that test (for McNemar: the
Clopper-Pearson interval of the discordant pairs' split, inverted; otherwise a bootstrap over the items, or over
images for retrieval, within the benchmark's strata); and how many items went from right to wrong and back (right: a score of at least
0.5 for R-Bench's fractional scores). R-Bench adds the reference vs distorted comparison within each run.

Output: a labelled table on the console and `<A>_vs_<B>_compare.{md,csv,json}` (--out DIR, default: beside A's
predictions file); the JSON holds, per headline, a, b, difference, ci95, p_value, test, n_matched, right_to_wrong,
wrong_to_right; and the judges of both sides. Resampling strata of one unit are pooled (one unit alone
resamples to itself), and resamples and permutations are drawn a chunk at a time (bounded memory at any size).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from vlmeval_ext.errors import ExtError
from vlmeval_ext.io import stem_path, typed_path, write_json
from vlmeval_ext.records.intervals import B, SEED, chunked_draws

PERMUTATIONS = 10_000


class CompareError(ExtError):
    """Two runs that cannot be compared item by item."""


@dataclass
class Headline:
    """One headline score of a run as per-item values (NaN: not scored, e.g. an inference failure). The score is
    their mean, or with `groups` the mean of the group means (ReMI's tasks, RoCOCO t2i's seeds)."""
    name: str
    unit: str                        # '%' or '0-1'
    keys: list                       # the item keys, in order
    values: np.ndarray
    strata: np.ndarray               # resampling strata
    clusters: np.ndarray             # resampling / permutation units
    binary: bool = False
    groups: np.ndarray | None = None
    clustered: bool = False
    judged: bool = False             # the item scores come from a judge model (two judges: not comparable)

    @property
    def scale(self) -> float:
        return 100.0 if self.unit == '%' else 1.0

    def subset(self, keep: np.ndarray) -> 'Headline':
        pick = lambda x: None if x is None else x[keep]  # noqa: E731
        return Headline(self.name, self.unit, [k for k, m in zip(self.keys, keep) if m], self.values[keep],
                        self.strata[keep], self.clusters[keep], self.binary, pick(self.groups), self.clustered,
                        self.judged)

    def weights(self) -> np.ndarray:
        if self.groups is None:
            return np.full(len(self.values), 1.0 / max(1, len(self.values)))
        sizes = pd.Series(self.groups).map(pd.Series(self.groups).value_counts()).to_numpy(float)
        return 1.0 / (sizes * len(set(self.groups)))


# ------------------------------------------------------------------------- reading a benchmark's per-item file
def item_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise CompareError(f'{path}: not found: evaluate the predictions first (`vlmeval-ext eval --data NAME '
                           '--pred FILE`), then compare')
    return pd.read_csv(path, sep='\t' if path.suffix == '.tsv' else ',', dtype=str, keep_default_na=False)


def num(series) -> np.ndarray:
    return pd.to_numeric(series.map(lambda v: {'True': 1, 'False': 0}.get(v, v)), errors='coerce').to_numpy(float)


def plain(name, unit, keys, values, strata=None, binary=True, judged=False) -> Headline:
    n = len(keys)
    return Headline(name, unit, list(keys), values, np.zeros(n, int) if strata is None else strata, np.arange(n),
                    binary, judged=judged)


# ------------------------------------------------------------------------------------------------ the test
def pooled_strata(strata: np.ndarray) -> np.ndarray:
    """The resampling strata with every stratum of one unit pooled with the others of one unit (and, when only one
    such unit is left, with the largest stratum): a stratum of one unit resamples to itself and gives no spread, so
    runs whose strata all hold one item would get a [0, 0] interval."""
    labels = pd.Series(strata).astype(str)
    sizes = labels.map(labels.value_counts())
    single = (sizes < 2).to_numpy()
    if not single.any():
        return labels.to_numpy()
    pooled = labels.to_numpy().copy()
    pooled[single] = '\x00pooled'
    if single.sum() == 1 and (~single).any():
        pooled[single] = labels[~single].value_counts().idxmax()
    return pooled


def resampled_sums(strata: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """`draws(strata) @ sums`, drawn a chunk of resamples at a time (bounded memory at any number of units)."""
    out = np.empty(B)
    for start, counts in chunked_draws(strata):
        out[start:start + len(counts)] = counts @ sums
    return out


def mcnemar(right_to_wrong: int, wrong_to_right: int) -> float:
    """Exact two-sided McNemar p-value: the discordant pairs as a Binomial(n, 1/2) (1.0 with none)."""
    n = right_to_wrong + wrong_to_right
    if n == 0:
        return 1.0
    k = min(right_to_wrong, wrong_to_right)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def mcnemar_interval(right_to_wrong: int, wrong_to_right: int, n: int) -> tuple[float, float]:
    """The 95 % interval of the difference B - A (a share of n paired 0/1 items) that inverts the exact McNemar
    test given the discordant count m: the Clopper-Pearson interval of theta = wrong->right / m, mapped to
    (m / n)(2 theta - 1). It excludes 0 exactly when the test's p-value is below 0.05, so interval and test agree.
    Conditional on m throughout: with no discordant pair, B - A is 0 on these items, [0, 0]."""
    from vlmeval_ext.records.intervals import clopper_pearson
    m = right_to_wrong + wrong_to_right
    if m == 0:
        return 0.0, 0.0
    lo, hi = clopper_pearson(wrong_to_right, m)
    return m / n * (2 * lo - 1), m / n * (2 * hi - 1)


def _clean(x: float, digits: int) -> float:
    return round(float(x), digits) + 0.0            # + 0.0: never -0.0


def p_text(p: float) -> str:
    """A p-value as printed: four decimals, scientific notation below 1e-4 (never `0`)."""
    return f'{p:.1e}' if p < 1e-4 else f'{p:.4f}'


def _cluster_sums(values: np.ndarray, clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids, inverse = np.unique(clusters, return_inverse=True)
    return np.bincount(inverse, weights=values, minlength=len(ids)), inverse


def compare_headline(a: Headline, b: Headline) -> dict:
    """The paired comparison of one headline (a and b on the same items, in the same order, both scored)."""
    weights = a.weights()
    diff_items = (b.values - a.values) * weights
    difference = float(diff_items.sum()) * a.scale
    sums, inverse = _cluster_sums(diff_items, a.clusters)
    strata = pooled_strata(pd.Series(a.strata).groupby(inverse).first().to_numpy())
    ra, rb = a.values >= 0.5, b.values >= 0.5
    right_to_wrong, wrong_to_right = int((ra & ~rb).sum()), int((~ra & rb).sum())
    if a.binary and a.groups is None and not a.clustered:
        p, test = mcnemar(right_to_wrong, wrong_to_right), 'exact McNemar'
        lo, hi = (a.scale * x for x in mcnemar_interval(right_to_wrong, wrong_to_right, len(a.values)))
        interval = 'inverted exact McNemar (conditional on the discordant pairs)'
    else:
        interval = f'paired bootstrap ({B:,} resamples{", images as units" if a.clustered else ""})'
        boot = resampled_sums(strata, sums) * a.scale        # (B,), resampled within strata
        lo, hi = np.percentile(boot, [2.5, 97.5])
        rng = np.random.default_rng(SEED)
        beyond = 0
        per = min(500, max(1, (32 << 20) // (16 * len(sums))))    # flips at a time: memory bounded at any size
        for start in range(0, PERMUTATIONS, per):
            flips = rng.choice((-1.0, 1.0), size=(min(per, PERMUTATIONS - start), len(sums)))
            beyond += int((np.abs(flips @ sums) * a.scale >= abs(difference) - 1e-12).sum())
        p = float((1 + beyond) / (1 + PERMUTATIONS))
        test = ('paired sign-flip permutation' + (' (images as units)' if a.clustered else '')
                + f' ({PERMUTATIONS:,} flips)')
        if difference == 0 and not sums.any():
            p = 1.0
    digits = 4 if a.unit == '0-1' else 2
    return {'a': _clean((a.values * weights).sum() * a.scale, digits),
            'b': _clean((b.values * weights).sum() * b.scale, digits),
            'difference': _clean(difference, digits), 'ci95': [_clean(lo, digits), _clean(hi, digits)],
            'ci95_method': interval, 'p_value': float(f'{p:.6g}'), 'test': test, 'n_matched': len(a.keys),
            'right_to_wrong': right_to_wrong, 'wrong_to_right': wrong_to_right, 'unit': a.unit}


# ------------------------------------------------------------------------------------------------ the runs
def find_predictions(path: Path, dataset: str) -> Path:
    """A predictions file, or the one `<model>_<dataset>.<tsv|xlsx|csv>` under a work dir (a model name may be typed
    with its '/')."""
    path = typed_path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise CompareError(f'{path}: neither a predictions file nor a work dir')
    found = sorted({p for ext in ('tsv', 'xlsx', 'csv') for p in path.rglob(f'*_{dataset}.{ext}')
                    if not p.is_symlink()})
    if not found:
        others = datasets_under(path)
        hint = (f'; it holds predictions of {", ".join(others)}: pass one of them to --data' if others else
                '; it holds no predictions file of any dataset this plugin knows')
        raise CompareError(f'{path}: no predictions file of {dataset} (<model>_{dataset}.<tsv|xlsx|csv>){hint}')
    if len(found) != 1:
        raise CompareError(f'{path}: {len(found)} predictions files of {dataset} '
                           f'({", ".join(p.name for p in found[:4])}); name the file itself')
    return found[0]


def datasets_under(path: Path) -> list[str]:
    """The datasets with a predictions file under a work dir: those its run records name, and those of this plugin
    whose `<model>_<dataset>` file name it holds."""
    from vlmeval_ext.registry import dataset_names
    names = sorted(dataset_names(), key=len, reverse=True)       # 'GRAB_DEMO' before 'GRAB'
    seen = set()
    for p in path.rglob('*'):
        if p.is_symlink() or not p.is_file():
            continue
        if p.name.endswith('_manifest.json'):
            try:
                name = (json.loads(p.read_text(encoding='utf-8')).get('dataset') or {}).get('name')
            except (OSError, ValueError, AttributeError):
                name = None
            if isinstance(name, str):
                seen.add(name)
        elif p.suffix in ('.tsv', '.xlsx', '.csv'):
            match = next((n for n in names if p.stem.endswith(f'_{n}')), None)
            if match:
                seen.add(match)
    return sorted(seen)


def manifest_of(eval_file: Path) -> dict:
    """The run record beside the predictions (`<stem>_manifest.json`), or {} when there is none."""
    path = Path(stem_path(eval_file, '_manifest.json'))
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding='utf-8'))
    except (OSError, ValueError) as err:
        raise CompareError(f'{path}: unreadable run record ({type(err).__name__}); evaluate the predictions again') \
            from None
    return data if isinstance(data, dict) else {}


def check_dataset(eval_file: Path, manifest: dict, dataset: str) -> None:
    """The file must be an evaluation of `dataset`: its run record says so, or (without one) its name does."""
    recorded = (manifest.get('dataset') or {}).get('name')
    if recorded is not None and recorded != dataset:
        raise CompareError(f'{eval_file.name} is an evaluation of {recorded}, not {dataset}: compare it with '
                           f'--data {recorded}')
    if recorded is None and not eval_file.stem.endswith(f'_{dataset}'):
        raise CompareError(f'{eval_file.name}: not a predictions file of {dataset} (the kit names them '
                           f'<model>_{dataset}.<tsv|xlsx|csv>, and it has no run record saying otherwise)')


def judge_of(manifest: dict) -> dict | None:
    """Who judged the evaluation (name, mode, endpoint, parameters), from its run record; None without a judge."""
    judge = manifest.get('judge')
    if not isinstance(judge, dict) or not judge.get('model'):
        return None
    return {k: judge.get(k) for k in ('model', 'mode', 'endpoint', 'parameters')}


MODES = ('official', 'efficient')


def mode_tag(mode: str) -> str:
    return '' if mode == 'official' else f'_{mode}'


def rbench_mode(a_file: Path, b_file: Path, wanted: str | None) -> str:
    """R-Bench: the judge mode both runs were evaluated in (--mode, else official when both have it)."""
    have = {side: [m for m in MODES if Path(stem_path(path, f'{mode_tag(m)}_scores.csv')).is_file()]
            for side, path in (('A', a_file), ('B', b_file))}
    if wanted is not None:
        for side, path in (('A', a_file), ('B', b_file)):
            if wanted not in have[side]:
                raise CompareError(f'{path.name} has no {wanted}-mode evaluation (it has: '
                                   f'{", ".join(have[side]) or "none"}); evaluate it with --judge-args '
                                   f'\'{{"judge_mode": "{wanted}"}}\' first')
        return wanted
    both = [m for m in MODES if m in have['A'] and m in have['B']]
    if not both:
        raise CompareError(f'{a_file.name} ({", ".join(have["A"]) or "not evaluated"}) and {b_file.name} '
                           f'({", ".join(have["B"]) or "not evaluated"}) have no R-Bench judge mode in common; '
                           'evaluate both in one mode, then compare with --mode')
    return both[0]


def check_finished(eval_file: Path, tag: str) -> None:
    """An evaluation whose judge could not give every verdict is not a result: refused, with the way on."""
    incomplete = Path(stem_path(eval_file, f'{tag}_score_incomplete.json'))
    if incomplete.is_file() and not Path(stem_path(eval_file, f'{tag}_score.json')).is_file():
        raise CompareError(f'{eval_file.name}: its evaluation is incomplete ({incomplete.name}: the judge did not '
                           'give every verdict); run the same evaluation again to finish it, then compare')


def aligned(a: Headline, b: Headline, where_a: Path, where_b: Path) -> tuple[Headline, Headline, int]:
    """The two runs on the items both scored, in A's order; and how many items one of them did not score."""
    if set(a.keys) != set(b.keys):
        only_a, only_b = set(a.keys) - set(b.keys), set(b.keys) - set(a.keys)
        raise CompareError(f'{where_a.name} and {where_b.name} score different items ({len(only_a)} only in A, '
                           f'{len(only_b)} only in B, e.g. {sorted(only_a or only_b)[:3]}): compare runs of the '
                           'same items')
    order = {k: i for i, k in enumerate(b.keys)}
    pick = np.array([order[k] for k in a.keys], dtype=np.int64)
    b = Headline(b.name, b.unit, a.keys, b.values[pick], a.strata, a.clusters, b.binary, a.groups, a.clustered)
    keep = ~np.isnan(a.values) & ~np.isnan(b.values)
    if not keep.any():
        raise CompareError(f'{a.name}: no item is scored in both {where_a.name} ({int((~np.isnan(a.values)).sum())} '
                           f'scored) and {where_b.name} ({int((~np.isnan(b.values)).sum())} scored), e.g. every '
                           'item of one run an inference failure: nothing to compare')
    return a.subset(keep), b.subset(keep), int((~keep).sum())


def compare_runs(a_file: Path, b_file: Path, dataset: str, mode: str | None = None) -> dict:
    from vlmeval_ext.registry import benchmark_of, load_object
    record = benchmark_of(dataset)
    if record is None or record.report is None:
        raise CompareError(f'{dataset}: not a dataset of vlmeval-ext (compare reads our per-item files)')
    manifests = {'a': manifest_of(a_file), 'b': manifest_of(b_file)}
    check_dataset(a_file, manifests['a'], dataset)
    check_dataset(b_file, manifests['b'], dataset)
    if mode is not None and record.key != 'R-Bench-Full':
        raise CompareError(f'--mode is R-Bench\'s judge mode; {dataset} has none')
    mode = rbench_mode(a_file, b_file, mode) if record.key == 'R-Bench-Full' else None
    tag = mode_tag(mode) if mode else ''
    for path in (a_file, b_file):
        check_finished(path, tag)
    md5 = tuple((manifests[side].get('dataset') or {}).get('tsv_md5') for side in ('a', 'b'))
    if None not in md5 and md5[0] != md5[1]:
        raise CompareError(f'{a_file.name} and {b_file.name} were evaluated on different {dataset} files (md5 '
                           f'{md5[0]} vs {md5[1]}): not comparable item by item')
    report = load_object(record.report)       # the benchmark's plugin file says what its headlines are
    judges = {side: judge_of(manifest) for side, manifest in manifests.items()}
    differ = judges['a'] != judges['b'] and None not in judges.values()
    from vlmeval_ext.records.manifest import typed_model_name
    models = {side: typed_model_name(manifests[side], path.stem[:-len(dataset) - 1] if path.stem.endswith(
        f'_{dataset}') else path.stem) for side, path in (('a', a_file), ('b', b_file))}
    out = {'dataset': dataset, 'a': str(a_file), 'b': str(b_file), 'models': models, 'dataset_md5': md5[0] or md5[1],
           'judges': judges, 'bootstrap': {'resamples': B, 'seed': SEED}, 'scores': {}}
    if mode:
        out['mode'] = mode
    if differ:
        out['not_comparable'] = (f'A was judged by {_judge_text(judges["a"])} and B by {_judge_text(judges["b"])}: '
                                 'a difference of judged scores is partly the judges\' difference')
    heads_a, heads_b = ({h.name: h for h in report.headlines(path, tag)}
                        for path in (a_file, b_file))
    common = [name for name in heads_a if name in heads_b]
    if not common:
        raise CompareError(f'no item is scored in both {a_file.name} and {b_file.name} (e.g. every item of one run '
                           'an inference failure): nothing to compare')
    only = {name: 'only in A' for name in heads_a if name not in heads_b}
    only.update({name: 'only in B' for name in heads_b if name not in heads_a})
    if only:
        out['not_compared'] = only
    for ha, hb in ((heads_a[name], heads_b[name]) for name in common):
        ha, hb, unscored = aligned(ha, hb, a_file, b_file)
        out['scores'][ha.name] = {**compare_headline(ha, hb), 'left_out_unscored': unscored}
        if differ and ha.judged:
            out['scores'][ha.name]['not_comparable'] = 'different judges'
    if record.key == 'R-Bench-Full':
        out['reference_vs_distorted'] = {}
        for side, path in (('a', a_file), ('b', b_file)):
            rows = item_table(Path(stem_path(path, f'{tag}_scores.csv')))
            strata = (rows['type'] + '|' + rows['strength']).to_numpy()
            keys = rows['pair_id'].tolist()
            ref = plain('reference', '0-1', keys, num(rows['score_ref']), strata, binary=False)
            dis = plain('distorted', '0-1', keys, num(rows['score_dis']), strata, binary=False)
            ref, dis, _ = aligned(ref, dis, path, path)
            out['reference_vs_distorted'][side] = compare_headline(ref, dis)
    return out


def _judge_text(judge: dict) -> str:
    where = f' at {judge["endpoint"]}' if judge.get('endpoint') else ''
    return f'{judge["model"]} ({judge.get("mode") or "official"} mode{where})'


def markdown(result: dict) -> str:
    models = result.get('models') or {}
    a, b = models.get('a') or Path(result['a']).stem, models.get('b') or Path(result['b']).stem
    mode = f' ({result["mode"]} judge mode)' if result.get('mode') else ''
    lines = [f'# {result["dataset"]}{mode}: B = {b} vs A = {a}', '']
    if result.get('not_comparable'):
        lines += [f'**Not comparable where marked:** {result["not_comparable"]}.', '']
    lines += ['| score | A | B | B - A | 95 % CI of B - A | interval | p | test | items | right -> wrong | '
              'wrong -> right | reading |',
              '|---|---|---|---|---|---|---|---|---|---|---|---|']
    for name, r in result['scores'].items():
        mark = ' **not comparable: different judges**' if r.get('not_comparable') else ''
        lines.append(f'| {name} ({r["unit"]}){mark} | {r["a"]} | {r["b"]} | {r["difference"]:+} | '
                     f'[{r["ci95"][0]}, {r["ci95"][1]}] | {r["ci95_method"]} | {p_text(r["p_value"])} | {r["test"]} | '
                     f'{r["n_matched"]} | {r["right_to_wrong"]} | {r["wrong_to_right"]} | {reading(r)} |')
    if 'reference_vs_distorted' in result:
        lines += ['', 'Within each run, the distorted image against the reference image (absolute vs reference '
                  'score, the gap relative robustness measures):', '',
                  '| run | reference | distorted | distorted - reference | 95 % CI | p | items |',
                  '|---|---|---|---|---|---|---|']
        for side, r in result['reference_vs_distorted'].items():
            lines.append(f'| {side.upper()} | {r["a"]} | {r["b"]} | {r["difference"]:+} | [{r["ci95"][0]}, '
                         f'{r["ci95"][1]}] | {p_text(r["p_value"])} | {r["n_matched"]} |')
    lines += ['', f'Paired over the same items. 0/1 item scores with a plain mean: the interval inverts the exact '
              f'McNemar test, so it excludes 0 exactly when p < 0.05; other scores: {B:,} bootstrap resamples (seed '
              f'{SEED}) and a sign-flip permutation test. "not detectably different" is not "equal": the interval '
              'says how large a difference these items cannot rule out.']
    return '\n'.join(lines) + '\n'


def reading(r: dict) -> str:
    """The comparison in words, from the test: a difference, or not detectably different (never "no difference")."""
    if r['p_value'] < 0.05:
        return f'B {"higher" if r["difference"] > 0 else "lower"} (p {p_text(r["p_value"])})'
    return 'not detectably different at these items'


def short_stem(stem: str, limit: int = 100) -> str:
    """A predictions stem short enough for a file name (the two of them, plus the suffix, under 255 bytes): a long
    one keeps its start and gains 8 hex digits of its SHA-1, so two long names stay apart."""
    if len(stem.encode('utf-8')) <= limit:
        return stem
    import hashlib
    head = stem.encode('utf-8')[:limit - 9].decode('utf-8', 'ignore')
    return f'{head}-{hashlib.sha1(stem.encode("utf-8")).hexdigest()[:8]}'


def compare_main(argv=None) -> int:
    p = argparse.ArgumentParser(prog='vlmeval-ext compare', description=__doc__.split('\n\n')[0])
    p.add_argument('a', metavar='A', help='predictions file (evaluated), or a work dir holding one')
    p.add_argument('b', metavar='B', help='the other run, same dataset')
    p.add_argument('--data', required=True, metavar='NAME')
    p.add_argument('--out', default=None, metavar='DIR',
                   help="where <A>_vs_<B>_compare.{md,csv,json} go (default: the folder of A's predictions file)")
    p.add_argument('--mode', choices=MODES, default=None,
                   help="R-Bench: which judge mode's evaluations to compare (default: official when both have it)")
    args = p.parse_args(argv)
    a_file, b_file = find_predictions(Path(args.a), args.data), find_predictions(Path(args.b), args.data)
    out = Path(args.out) if args.out is not None else a_file.parent
    if out.exists() and not out.is_dir():
        raise CompareError(f'--out {out}: a file, not a folder')
    result = compare_runs(a_file, b_file, args.data, args.mode)
    text = markdown(result)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    prefix = out / f'{short_stem(a_file.stem)}_vs_{short_stem(b_file.stem)}_compare'
    write_json(result, f'{prefix}.json')
    Path(f'{prefix}.md').write_text(text, encoding='utf-8')
    with open(f'{prefix}.csv', 'w', newline='', encoding='utf-8') as f:
        fields = ['score', 'unit', 'a', 'b', 'difference', 'ci95_low', 'ci95_high', 'ci95_method', 'p_value', 'test', 'n_matched',
                  'right_to_wrong', 'wrong_to_right']
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for name, r in result['scores'].items():
            writer.writerow({'score': name, **{k: r[k] for k in fields[1:] if k in r},
                             'ci95_low': r['ci95'][0], 'ci95_high': r['ci95'][1]})
    print(f'written: {prefix}.md, .csv, .json')
    return 0


if __name__ == '__main__':
    sys.exit(compare_main())
