"""Offline R-Bench judge vs the official GPT-3.5 verdicts (LLaVA-1.5, distorted side).

Fits the offline judge's small models with 2-fold cross-validation (fit on even rows, measure on odd rows and vice
versa; nothing is fitted on the evaluation fold) and reports, per task: Spearman and mean-score difference
(offline - GPT-3.5), held-out and in-sample with the parameters fitted on all rows (those go into
dataset_specs/rbench.yaml judge.offline).
  VQA: ridge regression of the GPT-3.5 score on rule + MiniLM word-similarity features -> expected score -> 5
       virtual 0/1/2 votes (sum/10, the official granularity).
  CAP: ridge regression on per-caption features (averaged over the captions, as the official score averages the
       per-caption verdicts) + ridge regression on the MiniLM pair vectors of output and caption (pair_vector,
       averaged the same way) -> per-caption expected score -> 0/1/2 per caption by sum_verdicts (nothing fitted)
       -> sum / (2 n_captions); the expected scores are multiplied by a factor fitted on the same rows
       (fit_calibration) so the mean score after the 0/1/2 verdicts equals the GPT-3.5 mean there. Also
       measured: the earlier two thresholds fitted on the same fold, no calibration, the other split (first /
       second half of the rows), and the pair penalty chosen inside the fitting fold (nested).
Run:
    python benchmarks/rbench_offline_judge.py [--fixtures DIR (default: tests/fixtures unpacked)] [--out benchmarks/rbench_offline_judge.md]
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import sys

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))

from helpers.fixtures import llava15_items, read_official_results, unpacked_fixtures  # noqa: E402
from vlmeval_ext.offline.judge import (  # noqa: E402
    CAP_FEATURES, CAP_TOKEN_FEATURES, OFFLINE_LABEL, VQA_FEATURES, VQA_TOKEN_FEATURES, Item, OfflineJudge, _norm,
    _alternatives, _sentences, apply_linear, cap_verdicts, fit_calibration, fit_linear, fit_pair_metric,
    pair_vector, sum_verdicts, votes_for
)

ALPHA = 1.0                                    # ridge penalty (standardised features)
CAP_GRID = np.round(np.arange(0.0, 1.001, 0.025), 3)
PAIR_ALPHA = 0.1                               # ridge penalty of the CAP pair metric (fixed, see .md)
PAIR_ALPHAS = (0.01, 0.03, 0.1, 0.3)           # the grid the nested estimate chooses from inside the fitting fold
CAP_SPREADS = (0.1,)   # fixed: with 5 captions the staggered pairs tile t2 - t1 ~ 0.5 (0..0.15 fitted overfits, see .md)


def agreement(s, gpt):
    return float(spearmanr(s, gpt).statistic), float(np.mean(s) - np.mean(gpt))


# ------------------------------------------------------------------------------------------------------ VQA
def vqa_fit(feats, exact, gpt, idx, names=VQA_FEATURES):
    idx = [i for i in idx if not exact[i]]
    X = np.array([[feats[i][k] for k in names] for i in idx])
    return fit_linear(X, gpt[idx], names, ALPHA)


def vqa_scores(model, feats, exact, idx, votes=5):
    out = []
    for i in idx:
        p = 1.0 if exact[i] else float(np.clip(apply_linear(model, feats[i]), 0, 1))
        out.append(sum(votes_for(p, votes)) / (2.0 * votes))
    return np.array(out)


# ------------------------------------------------------------------------------------------------------ CAP
def cap_linear(feats, idx, names=CAP_FEATURES):
    X = np.array([[np.mean([f[k] for f in feats[i]]) for k in names] for i in idx])
    return X


def cap_scores(model, feats, idx, thresholds, spread):
    return np.array([np.mean(cap_verdicts([apply_linear(model, f) for f in feats[i]], thresholds, spread)) / 2.0
                     for i in idx])


def cap_fit(feats, gpt, idx, names=CAP_FEATURES):
    """Ridge on caption-averaged features, then the (t1, t2, spread) maximising Spearman - |mean difference| on
    idx (vectorised over the grid: captions ranked per item, padded)."""
    model = fit_linear(cap_linear(feats, idx, names), gpt[idx], names, ALPHA)
    z = [np.sort([apply_linear(model, f) for f in feats[i]])[::-1] for i in idx]
    width = max(len(zi) for zi in z)
    Z = np.full((len(z), width), np.nan)
    offs = np.zeros((len(z), width))
    for r, zi in enumerate(z):
        Z[r, :len(zi)] = zi
        offs[r, :len(zi)] = np.arange(len(zi)) - (len(zi) - 1) / 2
    valid = ~np.isnan(Z)
    n = valid.sum(1)
    best = None
    for spread in CAP_SPREADS:
        for t1, t2 in itertools.combinations(CAP_GRID, 2):
            o = spread * offs
            g = ((Z >= t1 + o) & valid).astype(int) + ((Z >= t2 + o) & valid)
            s = g.sum(1) / (2.0 * n)
            if np.std(s) == 0:
                continue
            rho, diff = agreement(s, gpt[idx])
            if best is None or rho - abs(diff) > best[0]:
                best = (rho - abs(diff), (float(t1), float(t2)), float(spread))
    return {**model, 'thresholds': list(best[1]), 'spread': best[2]}


def cap_pair_fit(feats, pairs, gpt, idx, alpha=PAIR_ALPHA, names=CAP_FEATURES, calibrate=True):
    """The shipped CAP model: ridge on caption-averaged features + ridge pair metric on caption-averaged pair
    vectors, both fitted to the GPT-3.5 score on idx (their per-caption sum is the per-caption expected score);
    calibrate: then the factor (fit_calibration) that puts the mean sum_verdicts score on idx on the GPT-3.5 mean
    on idx."""
    model = fit_linear(cap_linear(feats, idx, names), gpt[idx], names, ALPHA)
    M = np.array([np.mean(pairs[i], 0) for i in idx])
    model = {**model, 'pair': fit_pair_metric(M, gpt[idx] - gpt[idx].mean(), alpha)}
    if calibrate:
        model['calibration'] = fit_calibration([cap_z(model, feats, pairs, i) for i in idx], float(gpt[idx].mean()))
    return model


def cap_z(model, feats, pairs, i):
    w, b = np.array(model['pair']['coef']), model['pair']['intercept']
    c = model.get('calibration', 1.0)
    return [c * (apply_linear(model, f) + b + float(v @ w)) for f, v in zip(feats[i], pairs[i])]


def cap_pair_scores(model, feats, pairs, idx, mapping='sum'):
    """mapping 'sum': sum_verdicts (shipped); 'continuous': the mean expected score, no verdicts."""
    zs = [cap_z(model, feats, pairs, i) for i in idx]
    if mapping == 'continuous':
        return np.array([np.mean(z) for z in zs])
    return np.array([np.mean(sum_verdicts(z)) / 2.0 for z in zs])


def cap_pair_thresholds(feats, pairs, gpt, idx):
    """The pair model with the earlier mapping: (t1, t2) fitted on idx like cap_fit, spread 0.1."""
    model = cap_pair_fit(feats, pairs, gpt, idx, calibrate=False)
    shifted = [[{'z': z} for z in cap_z(model, feats, pairs, i)] for i in range(len(feats))]
    m = cap_fit(shifted, gpt, idx, ('z',))           # an affine recalibration of z + the thresholds, on idx
    return lambda test: cap_scores(m, shifted, test, m['thresholds'], m['spread'])


def cap_pair_nested(feats, pairs, gpt, idx, calibrate=True):
    """PAIR_ALPHA chosen inside idx (inner 2-fold: idx's even / odd positions), then refitted on idx."""
    inner = (idx[0::2], idx[1::2]), (idx[1::2], idx[0::2])

    def inner_rho(alpha):
        s = np.empty(len(feats))
        for a, b in inner:
            s[b] = cap_pair_scores(cap_pair_fit(feats, pairs, gpt, a, alpha, calibrate=calibrate), feats, pairs, b)
        return agreement(s[idx], gpt[idx])[0]
    return cap_pair_fit(feats, pairs, gpt, idx, max(PAIR_ALPHAS, key=inner_rho), calibrate=calibrate)


def main():
    ap = argparse.ArgumentParser()
    root = unpacked_fixtures() / 'rbench'
    ap.add_argument('--fixtures', default=str(root))
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    fx = Path(args.fixtures)
    items = [Item(it) for it in llava15_items(fx)]       # the judge reads an item's fields by attribute
    gpt_all = np.array(read_official_results(fx / 'Result_dis_llava15.csv'))
    t0 = time.time()
    judge = OfflineJudge()
    t_load = time.time() - t0
    t0 = time.time()
    lines = [f'# R-Bench offline judge: {OFFLINE_LABEL}', '',
             'Agreement with the official GPT-3.5 verdicts (Result_dis_llava15.csv, LLaVA-1.5 on distorted '
             'images, score_dis). Spearman over items; diff = mean(offline) - mean(GPT-3.5). Held-out: 2-fold '
             '(even / odd rows), every fitted parameter fitted on the other fold only.', '']
    rows, fitted = [], {}
    for task in ('MCQ', 'VQA', 'CAP'):
        sel = [i for i, it in enumerate(items) if it.type == task]
        sub = [items[i] for i in sel]
        gpt = gpt_all[sel]
        if task == 'MCQ':
            s = np.array(judge.score_many(sub, 'dis'), dtype=float)
            rows.append((task, 'rules + nearest option (nothing fitted)', *agreement(s, gpt), len(sel)))
            continue
        even, odd = np.arange(0, len(sub), 2), np.arange(1, len(sub), 2)
        held = np.empty(len(sub))
        every = np.arange(len(sub))
        if task == 'VQA':
            judge._vectors([t for it in sub for t in judge._vqa_texts(it.question, it.pred_dis, it.answer) if t])
            judge._tokens_of([t for it in sub for t in (str(it.pred_dis), _sentences(str(it.pred_dis))[0],
                                                         *_alternatives(it.answer)) if t])
            feats = [judge.vqa_features(it.question, str(it.pred_dis), it.answer, tokens=True) for it in sub]
            exact = [any(_norm(it.pred_dis) == _norm(a) for a in [it.answer, *_alternatives(it.answer)])
                     for it in sub]
            names = VQA_FEATURES + VQA_TOKEN_FEATURES
            for fit_idx, test_idx in ((even, odd), (odd, even)):
                held[test_idx] = vqa_scores(vqa_fit(feats, exact, gpt, fit_idx, names), feats, exact, test_idx)
            rows.append((task, 'ridge on rules + MiniLM word similarity + token alignment (tra, tra1, tfa) -> 5 '
                         'votes, 2-fold held-out', *agreement(held, gpt), len(sel)))
            first, second = np.arange(len(sub) // 2), np.arange(len(sub) // 2, len(sub))
            for fit_idx, test_idx in ((first, second), (second, first)):
                held[test_idx] = vqa_scores(vqa_fit(feats, exact, gpt, fit_idx), feats, exact, test_idx)
            rows.append((task, 'ridge on rules + MiniLM word similarity -> 5 votes, 2-fold held-out, first / second '
                         'half', *agreement(held, gpt), len(sel)))
            judge._vectors([t for it in sub for t in (str(it.pred_dis), it.answer)])
            pairs = np.array([pair_vector(judge._cache[str(it.pred_dis)], judge._cache[it.answer]) for it in sub])
            for fit_idx, test_idx in ((even, odd), (odd, even)):
                m = vqa_fit(feats, exact, gpt, fit_idx)
                f = [i for i in fit_idx if not exact[i]]
                pm = fit_pair_metric(pairs[f], gpt[f] - gpt[f].mean(), PAIR_ALPHA)
                shifted = [{**feats[i], 'pair': pm['intercept'] + float(pairs[i] @ np.array(pm['coef']))}
                           for i in range(len(sub))]
                held[test_idx] = vqa_scores({**m, 'features': [*m['features'], 'pair'], 'mean': [*m['mean'], 0.0],
                                             'scale': [*m['scale'], 1.0], 'coef': [*m['coef'], 1.0]},
                                            shifted, exact, test_idx)
            rows.append((task, 'ridge on rules + MiniLM word similarity + MiniLM pair metric (answer vs output, '
                         'product and difference) -> 5 votes, 2-fold held-out', *agreement(held, gpt), len(sel)))
            for fit_idx, test_idx in ((even, odd), (odd, even)):
                held[test_idx] = vqa_scores(vqa_fit(feats, exact, gpt, fit_idx), feats, exact, test_idx)
            model = vqa_fit(feats, exact, gpt, every)
            s = vqa_scores(model, feats, exact, every)
            fitted['vqa_model'] = model
            how = 'ridge on rules + MiniLM word similarity -> 5 votes'
        else:
            judge._tokens_of([t for it in sub for t in (str(it.pred_dis), _sentences(str(it.pred_dis))[0],
                                                         *it.captions()) if t])
            judge._vectors([t for it in sub for t in (str(it.pred_dis), *it.captions())])
            feats = [judge.cap_features(str(it.pred_dis), it.captions(), tokens=True) for it in sub]
            vec = judge._cache
            pairs = [[pair_vector(vec[str(it.pred_dis)], vec[c]) for c in it.captions()] for it in sub]
            names = CAP_FEATURES + CAP_TOKEN_FEATURES
            for fit_idx, test_idx in ((even, odd), (odd, even)):
                m = cap_fit(feats, gpt, fit_idx, names)
                held[test_idx] = cap_scores(m, feats, test_idx, m['thresholds'], m['spread'])
            rows.append((task, 'per-caption ridge + token alignment (BERTScore P/R/F, first-sentence R, best F) and '
                         'number / plural agreement -> 0/1/2 (staggered thresholds), 2-fold held-out',
                         *agreement(held, gpt), len(sel)))
            first, second = np.arange(len(sub) // 2), np.arange(len(sub) // 2, len(sub))
            for label, folds in (('2-fold held-out', ((even, odd), (odd, even))),
                                 ('2-fold held-out, first / second half', ((first, second), (second, first)))):
                for fit_idx, test_idx in folds:
                    m = cap_fit(feats, gpt, fit_idx)
                    held[test_idx] = cap_scores(m, feats, test_idx, m['thresholds'], m['spread'])
                rows.append((task, f'per-caption ridge score -> 0/1/2 (staggered thresholds), {label}',
                             *agreement(held, gpt), len(sel)))
            for fit_idx, test_idx in ((even, odd), (odd, even)):
                held[test_idx] = cap_pair_thresholds(feats, pairs, gpt, fit_idx)(test_idx)
            rows.append((task, 'per-caption ridge + MiniLM pair metric -> 0/1/2 (staggered thresholds), 2-fold '
                         'held-out', *agreement(held, gpt), len(sel)))
            splits = (('2-fold held-out', ((even, odd), (odd, even))),
                      ('2-fold held-out, first / second half', ((first, second), (second, first))))
            for mapping, calibrate in (('continuous', False), ('sum', False), ('sum', True)):
                for label, folds in splits:
                    if calibrate and label == '2-fold held-out':
                        continue                             # the shipped model's row, below
                    for fit_idx, test_idx in folds:
                        held[test_idx] = cap_pair_scores(cap_pair_fit(feats, pairs, gpt, fit_idx,
                                                                      calibrate=calibrate),
                                                         feats, pairs, test_idx, mapping)
                    what = ('expected score, no verdicts' if mapping == 'continuous' else
                            'calibrated -> 0/1/2 (sum_verdicts)' if calibrate else
                            '0/1/2 (sum_verdicts), no calibration')
                    rows.append((task, f'per-caption ridge + MiniLM pair metric -> {what}, {label}',
                                 *agreement(held, gpt), len(sel)))
            for calibrate in (False, True):
                for label, folds in splits:
                    for fit_idx, test_idx in folds:
                        held[test_idx] = cap_pair_scores(cap_pair_nested(feats, pairs, gpt, fit_idx, calibrate),
                                                         feats, pairs, test_idx)
                    what = 'calibrated -> 0/1/2 (sum_verdicts)' if calibrate else '0/1/2 (sum_verdicts), no calibration'
                    rows.append((task, f'per-caption ridge + MiniLM pair metric -> {what}, pair penalty chosen inside '
                                 f'the fitting fold (nested), {label}', *agreement(held, gpt), len(sel)))
            for fit_idx, test_idx in ((even, odd), (odd, even)):
                held[test_idx] = cap_pair_scores(cap_pair_fit(feats, pairs, gpt, fit_idx), feats, pairs, test_idx)
            model = cap_pair_fit(feats, pairs, gpt, every)
            s = cap_pair_scores(model, feats, pairs, every)
            fitted['cap_model'] = model
            how = 'per-caption ridge + MiniLM pair metric -> calibrated -> 0/1/2 (sum_verdicts)'
        rows.append((task, f'{how}, 2-fold held-out', *agreement(held, gpt), len(sel)))
        rows.append((task, f'{how}, in-sample (all rows)', *agreement(s, gpt), len(sel)))
        # the parameters in the spec, as shipped (in-sample once they are the ones fitted here)
        if f'{task.lower()}_model' not in judge.params:
            continue
        shipped = np.array(judge.score_many(sub, 'dis'), dtype=float)
        rows.append((task, 'as shipped in dataset_specs/rbench.yaml (score_many)', *agreement(shipped, gpt),
                     len(sel)))
    lines += ['| task | protocol | Spearman | mean diff | items |', '|---|---|---|---|---|']
    lines += [f'| {t} | {how} | {rho:.3f} | {d:+.4f} | {n} |' for t, how, rho, d, n in rows]
    lines += ['', 'Fitted on all rows (dataset_specs/rbench.yaml judge.offline):', '', '```json',
              json.dumps(fitted), '```', '',
              f'Model load {t_load:.1f} s; features + fitting + scoring {time.time() - t0:.1f} s (CPU).', '',
              'Command: `.venv/bin/python benchmarks/rbench_offline_judge.py`']
    Path(args.out).write_text('\n'.join(lines) + '\n', encoding='utf-8')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
