"""Offline R-Bench judge vs the official GPT-3.5 verdicts (LLaVA-1.5, distorted side).

Calibrates the similarity thresholds with 2-fold cross-validation (fit on even rows, measure on odd rows and
vice versa) and reports, per task: Spearman and mean-score difference (offline - GPT-3.5), held-out and
in-sample with the thresholds fitted on all rows. Run:
    python benchmarks/rbench_offline_judge.py [--fixtures ../shared/fixtures/rbench] [--out benchmarks/rbench_offline_judge.md]
"""
from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from vlmeval_ext.rbench.fixtures import load_items, read_official_results
from vlmeval_ext.rbench.offline_judge import OFFLINE_LABEL, OfflineJudge, offline_params

GRID = np.round(np.arange(0.20, 0.96, 0.05), 3)


def fit(scores_fn, idx, gpt):
    """Thresholds maximising Spearman - |mean difference| on rows idx (rank agreement and level both count)."""
    best = None
    for t1, t2 in itertools.combinations(GRID, 2):
        s = scores_fn((t1, t2), idx)
        if np.std(s) == 0:
            continue
        rho = spearmanr(s, gpt[idx]).statistic
        diff = abs(np.mean(s) - np.mean(gpt[idx]))
        key = rho - diff
        if best is None or key > best[0]:
            best = (key, (float(t1), float(t2)))
    return best[1]


def main():
    ap = argparse.ArgumentParser()
    root = Path(__file__).resolve().parents[2] / 'shared' / 'fixtures' / 'rbench'
    ap.add_argument('--fixtures', default=str(root))
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    fx = Path(args.fixtures)
    items = load_items(fx / 'Ref_Release.csv', fx / 'llava15_ref.csv', fx / 'llava15_dis.csv')
    gpt_all = np.array(read_official_results(fx / 'Result_dis_llava15.csv'))
    t0 = time.time()
    judge = OfflineJudge()
    t_load = time.time() - t0
    t0 = time.time()
    params = dict(offline_params())
    lines = [f'# R-Bench offline judge: {OFFLINE_LABEL}', '',
             'Agreement with the official GPT-3.5 verdicts (Result_dis_llava15.csv, LLaVA-1.5 on distorted '
             'images, score_dis). Spearman over items; diff = mean(offline) - mean(GPT-3.5).', '']
    rows, fitted = [], {}
    for task in ('MCQ', 'VQA', 'CAP'):
        sel = [i for i, it in enumerate(items) if it.type == task]
        sub = [items[i] for i in sel]
        gpt = gpt_all[sel]
        if task == 'MCQ':
            s = np.array(judge.score_many(sub, 'dis'), dtype=float)
            rows.append((task, 'rules + nearest option (no thresholds)', spearmanr(s, gpt).statistic,
                         s.mean() - gpt.mean(), len(sel)))
            continue
        key = 'vqa_thresholds' if task == 'VQA' else 'cap_thresholds'

        def scores_fn(th, idx, key=key, sub=sub):
            judge.params = {**params, key: th}
            return np.array(judge.score_many([sub[i] for i in idx], 'dis'), dtype=float)
        even, odd = np.arange(0, len(sub), 2), np.arange(1, len(sub), 2)
        held = np.empty(len(sub))
        for fit_idx, test_idx in ((even, odd), (odd, even)):
            th = fit(scores_fn, fit_idx, gpt)
            held[test_idx] = scores_fn(th, test_idx)
        rows.append((task, '2-fold held-out', spearmanr(held, gpt).statistic, held.mean() - gpt.mean(), len(sel)))
        th = fit(scores_fn, np.arange(len(sub)), gpt)
        fitted[key] = th
        s = scores_fn(th, np.arange(len(sub)))
        rows.append((task, f'in-sample, thresholds {th}', spearmanr(s, gpt).statistic, s.mean() - gpt.mean(),
                     len(sel)))
    lines += [f'| task | {OFFLINE_LABEL} — protocol | Spearman | mean diff | items |', '|---|---|---|---|---|']
    lines += [f'| {t} | {how} | {rho:.3f} | {d:+.4f} | {n} |' for t, how, rho, d, n in rows]
    lines += ['', f'Fitted thresholds (put into dataset_specs/rbench.yaml judge.offline): {fitted}',
              f'Model load {t_load:.1f} s; scoring + calibration {time.time() - t0:.1f} s (CPU).', '',
              'Command: `python benchmarks/rbench_offline_judge.py`']
    Path(args.out).write_text('\n'.join(lines) + '\n', encoding='utf-8')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
