"""Judge calls per item, official vs efficient mode, on the real LLaVA-1.5 outputs (1,485 items x 3 scores).

The judge is a deterministic function of the prompt text only (what a loopback judge server sees): it reads the
respondent's answer and the correct answer out of the official prompt and grades them (MCQ: same option;
VQA/CAP: word-overlap F1 -> 0/1/2). Deterministic, so every efficient-mode shortcut but the caption sample must
reproduce the official scores exactly. Tasks go through the real runner (vlmeval_ext.core.judge.run_tasks), no
verdict cache. Each efficient shortcut of dataset_specs/rbench.yaml judge.efficient is switched on in turn, in the
spec's order, and the calls it saves are reported as a share of the official calls.
    python benchmarks/rbench_judge_calls.py [--out benchmarks/rbench_judge_calls.md]
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from vlmeval_ext.core.spec import load_spec
from vlmeval_ext.rbench.fixtures import llava15_items
from vlmeval_ext.rbench.report import rbench_table
from vlmeval_ext.rbench.score import make_tasks, official_calls, parse_choices, run_sync
from vlmeval_ext.testing.fixtures import unpacked_fixtures

_MCQ = re.compile(r'a set of options \[(?P<opts>.*)\] with option \[(?P<correct>.*)\] being the correct answer\.\n'
                  r'.*there will be an answer \[(?P<answer>.*)\] provided by a respondent\.', re.S)
_VQA = re.compile(r'the response \[(?P<answer>.*)\] completely matches the correct answer \[(?P<correct>.*)\]\. \n', re.S)
_CAP = re.compile(r'the sentence \[(?P<answer>.*)\] completely matches the correct answer \[(?P<correct>.*)\]\. \n', re.S)
_WORD = re.compile(r'[a-z0-9]+')
TYPES = ('MCQ', 'VQA', 'CAP')


def _letter(text: str, options: dict) -> str | None:
    text = text.strip()
    m = re.match(r'[(\[]?([A-Z])(?:$|[).:\]\s])', text)
    if m and m.group(1) in options:
        return m.group(1)
    low = text.lower()
    hits = [k for k, v in options.items() if v and v.lower() in low]
    return hits[0] if len(hits) == 1 else None


def _f1(a: str, b: str) -> float:
    x, y = _WORD.findall(a.lower()), _WORD.findall(b.lower())
    if not x or not y:
        return 0.0
    common = sum(min(x.count(w), y.count(w)) for w in set(x))
    if not common:
        return 0.0
    p, r = common / len(x), common / len(y)
    return 2 * p * r / (p + r)


def deterministic_judge(prompt: str) -> str:
    m = _MCQ.search(prompt)
    if m:
        options = parse_choices(m['opts'])
        got, want = _letter(m['answer'], options), _letter(m['correct'], options)
        return f'Score: {int(got is not None and got == want)}'
    m = _VQA.search(prompt) or _CAP.search(prompt)
    if not m:
        raise ValueError(f'not an R-Bench judge prompt: {prompt[:80]!r}')
    f1 = _f1(m['answer'], m['correct'])
    return f'Score: {2 if f1 >= 0.6 else 1 if f1 >= 0.2 else 0}'


# Efficient mode with the first n shortcuts of the spec on (in the spec's order), the others off.
SHORTCUTS = ('certain_shortcuts', 'agree', 'reuse_identical_outputs', 'share_identical_prompts', 'caption_sample')


def efficient_tasks(items, on: set[str], caption_sample: int | None = None, release_order: bool = False):
    tasks = [t for it in items for t in make_tasks(it, mode='efficient')]
    for t in tasks:
        if 'certain_shortcuts' not in on:
            t.certain = None
        if 'agree' not in on:
            t.agree = None
        if 'reuse_identical_outputs' not in on:
            t.alias_of = None
        if 'caption_sample' not in on:
            t.caption_sample = None
        elif caption_sample is not None:
            t.caption_sample = caption_sample
        if release_order:
            t.caption_order = tuple(t.prompts)
    return tasks


def evaluate(items, tasks, mode: str, share: bool):
    results, calls = run_sync(tasks, deterministic_judge, mode=mode, share=share)
    rows = []
    for it in items:
        row = {'name': it.name, 'type': it.type, 'distortion': it.distortion, 'strength': it.strength}
        for kind in ('dis', 'ref', 'com'):
            row[f'score_{kind}'] = results[f'R-Bench-Full|{it.pair_id}|{kind}'].score
        rows.append(row)
    return rows, calls


def calls_by_type(items, make, mode, share):
    """Calls per item of each task type (each type run on its own: sharing never crosses types)."""
    out = {}
    for t in TYPES:
        subset = [it for it in items if it.type == t]
        out[t] = evaluate(subset, make(subset), mode, share)[1] / len(subset)
    return out


def main():
    ap = argparse.ArgumentParser()
    root = unpacked_fixtures() / 'rbench'
    ap.add_argument('--fixtures', default=str(root))
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    items = llava15_items(Path(args.fixtures))
    n = len(items)
    spec = load_spec('rbench')['judge']['efficient']
    t0 = time.time()
    off_rows, off_calls = evaluate(items, [t for it in items for t in make_tasks(it)], 'official', True)
    assert off_calls == sum(official_calls(t) for it in items for t in make_tasks(it))
    off = rbench_table(off_rows)
    off_by = calls_by_type(items, lambda sub: [t for it in sub for t in make_tasks(it)], 'official', True)

    def row(label, calls, by, table, saved=None):
        diff = max(abs(table[m][d] - off[m][d]) for m in table for d in table[m] if off[m][d] is not None)
        return (f'| {label} | {calls} | {calls / n:.2f} | ' + ' | '.join(f'{by[t]:.2f}' for t in TYPES) +
                f' | {calls / off_calls:.3f} | {"" if saved is None else f"{saved:.3f}"} | '
                f'{table["absolute"]["Overall"]:.4f} | {table["relative"]["Overall"]:.4f} | '
                f'{table["absolute"]["Overall"] - off["absolute"]["Overall"]:+.4f} | '
                f'{table["relative"]["Overall"] - off["relative"]["Overall"]:+.4f} | {diff:.4f} |')

    lines = ['# R-Bench judge calls per item: official vs efficient', '',
             f'{n} items (LLaVA-1.5 outputs, ref + dis), 3 judged scores each; deterministic prompt-only judge; '
             'every task through the real runner (vlmeval_ext.core.judge.run_tasks), no verdict cache.', '',
             '| mode | calls | calls/item | MCQ/item | VQA/item | CAP/item | ratio to official | saves (share of '
             'official) | Overall abs | Overall rel | abs diff | rel diff | max abs diff (all dims, abs+rel) |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
             row('official', off_calls, off_by, off)]
    previous = off_calls
    for i, name in enumerate(SHORTCUTS, 1):
        on = set(SHORTCUTS[:i])
        share = 'share_identical_prompts' in on
        make = lambda sub, on=on: efficient_tasks(sub, on)   # noqa: E731
        rows, calls = evaluate(items, make(items), 'efficient', share)
        by = calls_by_type(items, make, 'efficient', share)
        label = f'efficient: + {name} = {spec[name]}' + (' (the spec\'s efficient mode)' if i == len(SHORTCUTS) else '')
        lines.append(row(label, calls, by, rbench_table(rows), (previous - calls) / off_calls))
        previous = calls
        if i == len(SHORTCUTS):
            eff_calls, eff_table = calls, rbench_table(rows)
    variants = [('efficient, caption_sample = 2', dict(caption_sample=2)),
                ('efficient, caption_sample = 1 in release order (biased, not used)', dict(release_order=True))]
    for label, kw in variants:
        make = lambda sub, kw=kw: efficient_tasks(sub, set(SHORTCUTS), **kw)   # noqa: E731
        rows, calls = evaluate(items, make(items), 'efficient', True)
        lines.append(row(label, calls, calls_by_type(items, make, 'efficient', True), rbench_table(rows)))
    ratio = eff_calls / off_calls
    d_abs = abs(eff_table['absolute']['Overall'] - off['absolute']['Overall'])
    d_rel = abs(eff_table['relative']['Overall'] - off['relative']['Overall'])
    verdict = 'met' if ratio <= 0.15 and d_abs <= 0.01 and d_rel <= 0.01 else 'MISSED'
    lines += ['', f'Goal: efficient mode at most 0.15 of official calls with Overall absolute and relative within '
              f'0.01 of official mode: {verdict} ({ratio:.3f} of official calls, Overall differs by {d_abs:.4f} '
              f'absolute and {d_rel:.4f} relative).', '',
              f'Wall time {time.time() - t0:.1f} s. Command: `python benchmarks/rbench_judge_calls.py`', '',
              'Rows 2-6 switch the shortcuts of dataset_specs/rbench.yaml judge.efficient on one after another, in '
              'the spec\'s order; "saves" is the drop in calls from the row above as a share of the official calls. '
              'Shortcuts 1-4 reproduce the verdicts of a deterministic judge exactly (diff 0). The caption sample '
              'estimates each CAP dis/ref score from one reference caption taken in a fixed pseudo-random order; '
              'the release order would be biased (its first caption gets higher verdicts, last row). The rule it '
              'replaces (captions in release order until the first 2 verdicts agree) asked 0.198 of the official '
              'calls with Overall +0.0035 absolute / +0.0002 relative. "max abs diff" '
              'is over every dimension of both tables; small cells (e.g. one group x one task) move more than '
              'Overall.']
    Path(args.out).write_text('\n'.join(lines) + '\n', encoding='utf-8')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
