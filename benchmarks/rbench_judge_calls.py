"""R-Bench judge calls, official vs efficient mode, on the real LLaVA-1.5 outputs (1,485 items x 3 scores), under a
deterministic judge and under a seeded noisy judge that disagrees with itself.

The deterministic judge is a function of the prompt text only (what a loopback judge server sees): it reads the
respondent's answer and the correct answer out of the official prompt and grades them (MCQ: same option; VQA/CAP:
word-overlap F1 -> 0/1/2). The noisy judge gives that verdict with probability q and another valid value
otherwise, each call drawn afresh (seeded), as GPT-3.5 or a local judge disagree with themselves across the five
repeats. Every score goes through the kit dialect's own protocol steps (plan_score, prompt_demands, ask, assign,
combine in vlmeval_ext/dataset/utils/rbench_full.py) in one thread (tests/helpers/rbench_protocol.py), no cache.
    python benchmarks/rbench_judge_calls.py [--seeds 20] [--out benchmarks/rbench_judge_calls.md]
"""
from __future__ import annotations

import argparse
import math
import random
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))

from helpers.fixtures import llava15_items, unpacked_fixtures  # noqa: E402
from helpers.rbench_protocol import FunctionJudge, run_plans, table_rows  # noqa: E402
from vlmeval_ext.dataset.rbench_full import NEEDS  # noqa: E402
from vlmeval_ext.dataset.utils import rbench_full as B  # noqa: E402

_MCQ = re.compile(r'a set of options \[(?P<opts>.*)\] with option \[(?P<correct>.*)\] being the correct answer\.\n'
                  r'.*there will be an answer \[(?P<answer>.*)\] provided by a respondent\.', re.S)
_VQA = re.compile(r'the response \[(?P<answer>.*)\] completely matches the correct answer \[(?P<correct>.*)\]\. \n', re.S)
_CAP = re.compile(r'the sentence \[(?P<answer>.*)\] completely matches the correct answer \[(?P<correct>.*)\]\. \n', re.S)
_WORD = re.compile(r'[a-z0-9]+')
TYPES = ('MCQ', 'VQA', 'CAP')
# The efficient-mode shortcuts, in the order the first table switches them on (dataset_specs/rbench.yaml
# judge.efficient documents each with the share of calls it saves).
SHORTCUTS = ('stop_when_settled', 'caption_sample')


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


def clean_verdict(prompt: str) -> tuple[int, tuple]:
    """(the deterministic verdict, the scale) of one official judge prompt."""
    m = _MCQ.search(prompt)
    if m:
        options = B.parse_choices(m['opts'])
        got, want = _letter(m['answer'], options), _letter(m['correct'], options)
        return int(got is not None and got == want), (0, 1)
    m = _VQA.search(prompt) or _CAP.search(prompt)
    if not m:
        raise ValueError(f'not an R-Bench judge prompt: {prompt[:80]!r}')
    f1 = _f1(m['answer'], m['correct'])
    return (2 if f1 >= 0.6 else 1 if f1 >= 0.2 else 0), (0, 1, 2)


def deterministic_judge(prompt: str) -> str:
    return f'Score: {clean_verdict(prompt)[0]}'


def noisy_judge(q: float, seed: int):
    """Each call: the clean verdict with probability q, else one of the other valid values (seeded)."""
    rng = random.Random(seed)

    def reply(prompt):
        verdict, scale = clean_verdict(prompt)
        if rng.random() >= q:
            verdict = rng.choice([v for v in scale if v != verdict])
        return f'Score: {verdict}'
    return reply


# -------------------------------------------------------------------------------------------------- plans
def _cap_prompts(item, kind, order):
    judged = item['pred_dis'] if kind == 'dis' else item['pred_ref']
    return [B.fill(B.JUDGE_PROMPTS['CAP'], answer=judged, correct=ref) for ref in order]


def _norm(text):
    return ' '.join(str(text).lower().split())


def earlier_certain(item, kind):
    """The earlier efficient mode's "certain answer" rule (removed: see the noisy-judge table): an MCQ output that
    is exactly one option, a VQA output equal to the answer, a com output equal to the reference output -> decided
    without the judge."""
    judged = item['pred_dis'] if kind in ('dis', 'com') else item['pred_ref']
    truth = item['pred_ref'] if kind == 'com' else item['answer']
    if item['type'] == 'MCQ':
        options = B.parse_choices(item['choice'])
        got = B.certain_letter(judged, options)
        want = B.certain_letter(truth, options) if kind == 'com' else truth.strip()
        return float(got == want) if got is not None and want in options else None
    if item['type'] == 'VQA' or kind == 'com':
        return 1.0 if _norm(judged) and _norm(judged) == _norm(truth) else None
    return None


def plans(items, mode='efficient', captions='sample', mcq_first_verdict=False, certain=False):
    """(plans to judge, {key: score decided without the judge}) for a variant. captions: 'sample' (the dataset's
    efficient mode: one caption in SHA-256 order), 'all', 'sample2', 'release' (the first in release order)."""
    todo, decided = [], {}
    for item in items:
        for kind in B.KINDS:
            if any(item[c] is None for c in NEEDS[kind]):
                continue
            plan = B.plan_score(item, kind, mode)
            if certain and earlier_certain(item, kind) is not None:
                decided[plan.key] = earlier_certain(item, kind)
                continue
            if item['type'] == 'CAP' and kind != 'com' and mode == 'efficient' and captions != 'sample':
                refs = B.parse_captions(item['answer'])
                order = {'all': refs, 'sample2': B.caption_order(refs)[:2], 'release': refs[:1]}[captions]
                plan = plan._replace(prompts=_cap_prompts(item, kind, order))
            if mcq_first_verdict and plan.rule == 'majority':
                plan = plan._replace(repeats=1)       # the earlier rule: the first verdict decides
            todo.append(plan)
    return todo, decided


def evaluate(items, variant, reply):
    """(table, calls) for one variant: (mode, plan builder kwargs)."""
    mode, kw = variant
    todo, decided = plans(items, mode, **kw)
    scores, calls = run_plans(todo, FunctionJudge(reply), mode)
    return B.rbench_table(table_rows(items, {**scores, **decided})), calls


def calls_by_type(items, variant):
    out = {}
    for t in TYPES:
        subset = [it for it in items if it['type'] == t]
        out[t] = evaluate(subset, variant, deterministic_judge)[1] / len(subset)
    return out


CUMULATIVE = [
    ('official', ('official', {})),
    ('+ stop_when_settled (repeats asked one at a time)', ('efficient', {'captions': 'all'})),
    ("+ caption_sample = 1 (the dataset's efficient mode)", ('efficient', {})),
]
EARLIER = ('efficient', {'certain': True, 'mcq_first_verdict': True})
VARIANTS = [
    ('efficient, caption_sample = 2', ('efficient', {'captions': 'sample2'})),
    ('efficient, caption_sample = 1 in release order (biased, not used)', ('efficient', {'captions': 'release'})),
    ('earlier efficient mode: + certain answers without the judge, MCQ by its first verdict (removed)', EARLIER),
]
EFFICIENT = ('efficient', {})


# --------------------------------------------------------------------------------------------- noisy runs
_ITEMS = None


def _init(fixtures):
    global _ITEMS
    _ITEMS = llava15_items(fixtures)


def _noisy_run(job):
    q, seed, label = job
    variant = {'official': ('official', {}), 'efficient': EFFICIENT, 'earlier': EARLIER}[label]
    table, calls = evaluate(_ITEMS, variant, noisy_judge(q, seed * 1000 + int(q * 100)))
    return q, seed, label, table['absolute']['Overall'], table['relative']['Overall'], calls


def _mean_ci(values):
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, float('nan')
    half = 2.093 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) == 20 else \
        1.96 * statistics.stdev(values) / math.sqrt(len(values))
    return m, half


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--fixtures', default=str(unpacked_fixtures() / 'rbench'))
    ap.add_argument('--seeds', type=int, default=20)
    ap.add_argument('--workers', type=int, default=2)
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    items = llava15_items(Path(args.fixtures))
    n = len(items)
    t0 = time.time()
    off, off_calls = evaluate(items, CUMULATIVE[0][1], deterministic_judge)

    def row(label, variant, saved_from=None):
        table, calls = evaluate(items, variant, deterministic_judge)
        by = calls_by_type(items, variant)
        diff = max(abs(table[m][d] - off[m][d]) for m in table for d in table[m] if off[m][d] is not None)
        saved = '' if saved_from is None else f'{(saved_from - calls) / off_calls:.3f}'
        line = (f'| {label} | {calls} | {calls / n:.2f} | ' + ' | '.join(f'{by[t]:.2f}' for t in TYPES) +
                f' | {calls / off_calls:.3f} | {saved} | {table["absolute"]["Overall"]:.4f} | '
                f'{table["relative"]["Overall"]:.4f} | {table["absolute"]["Overall"] - off["absolute"]["Overall"]:+.4f}'
                f' | {table["relative"]["Overall"] - off["relative"]["Overall"]:+.4f} | {diff:.4f} |')
        return line, calls, table

    lines = ['# R-Bench judge calls per item: official vs efficient', '',
             f'{n} items (LLaVA-1.5 outputs, ref + dis), 3 judged scores each; every score through the kit '
             "dialect's protocol steps (tests/helpers/rbench_protocol.py), no verdict cache.", '',
             '## Calls, deterministic judge', '',
             '| mode | calls | calls/item | MCQ/item | VQA/item | CAP/item | ratio to official | saves (share of '
             'official) | Overall abs | Overall rel | abs diff | rel diff | max abs diff (all dims, abs+rel) |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    previous = None
    for label, variant in CUMULATIVE:
        line, calls, table = row(label, variant, previous)
        lines.append(line)
        previous = calls
    eff_calls, eff_table = calls, table
    for label, variant in VARIANTS:
        lines.append(row(label, variant)[0])
    ratio = eff_calls / off_calls
    d_abs = abs(eff_table['absolute']['Overall'] - off['absolute']['Overall'])
    d_rel = abs(eff_table['relative']['Overall'] - off['relative']['Overall'])
    lines += ['', f'Efficient mode asks {ratio:.3f} of the official calls; Overall differs by {d_abs:.4f} absolute '
              f'and {d_rel:.4f} relative under this judge.', '',
              'Rows 2-4 switch the shortcuts on one after another; "saves" is the drop in calls from the row above '
              'as a share of the official calls. Under a deterministic judge only the caption sample can move a '
              'score: it estimates each CAP dis/ref score from one reference caption taken in a fixed '
              'pseudo-random order (SHA-256 of the caption); the release order would be biased (its first caption '
              'gets higher verdicts). "max abs diff" is over every dimension of both tables; small cells (one '
              'group x one task) move more than Overall.', '']

    jobs = [(q, s, label) for q in (0.6, 0.8, 0.95) for s in range(args.seeds)
            for label in ('official', 'efficient', 'earlier')]
    with ProcessPoolExecutor(args.workers, initializer=_init, initargs=(Path(args.fixtures),)) as pool:
        results = list(pool.map(_noisy_run, jobs, chunksize=2))
    lines += [f'## Noisy judge: {args.seeds} seeds per q', '',
              'Each verdict is the deterministic one with probability q, else another valid value (uniform), drawn '
              'per call. "efficient - official" is the mean over seeds of the difference in Overall, with its 95 % '
              'interval (t over seeds: each seed runs both modes with its own draws); "sd" is the spread of a '
              'mode\'s Overall across seeds (what one run of that mode can land on).', '',
              '| q | mode | calls (mean) | Overall abs (mean) | sd abs | Overall rel (mean) | sd rel | '
              'minus official, abs (95 % CI) | minus official, rel (95 % CI) |',
              '|---|---|---|---|---|---|---|---|---|']
    worst = 0.0
    for q in (0.6, 0.8, 0.95):
        by = {label: [r for r in results if r[0] == q and r[2] == label]
              for label in ('official', 'efficient', 'earlier')}
        base = {r[1]: r for r in by['official']}
        for label, name in (('official', 'official'), ('efficient', 'efficient (the dataset\'s)'),
                            ('earlier', 'earlier efficient mode (removed)')):
            rs = by[label]
            absv, relv = [r[3] for r in rs], [r[4] for r in rs]
            cells = [f'{statistics.fmean(r[5] for r in rs):.0f}', f'{statistics.fmean(absv):.4f}',
                     f'{statistics.stdev(absv):.4f}', f'{statistics.fmean(relv):.4f}', f'{statistics.stdev(relv):.4f}']
            if label == 'official':
                cells += ['', '']
            else:
                for i in (3, 4):
                    m, h = _mean_ci([r[i] - base[r[1]][i] for r in rs])
                    cells.append(f'{m:+.4f} ({m - h:+.4f}, {m + h:+.4f})')
                    if label == 'efficient':
                        worst = max(worst, abs(m) + h)
            lines.append(f'| {q} | {name} | ' + ' | '.join(cells) + ' |')
    lines += ['', f'Largest |bias| + half-interval of the dataset\'s efficient mode over q: {worst:.4f} '
              f'({"within" if worst <= 0.01 else "BEYOND"} 0.01).', '',
              'Efficient mode asks each 0/1/2 score once instead of five times (one verdict has the same expected '
              'value as the mean of five: unbiased, noisier), asks an MCQ score until its majority is decided '
              '(three equal verdicts: the majority the five calls would give, so the same distribution), and '
              'every score asks its own prompts (two scores of one item sending the same prompt text, e.g. ref and '
              'com of a model right on both images, get independent verdicts: sharing them would bias the product '
              'com x ref in relative robustness). The earlier efficient mode also decided "certain" answers '
              '(an exact option letter, an output equal to the answer) without the judge and an MCQ score by its '
              'first verdict: under a judge that errs, official mode scores those items with the judge\'s errors, '
              'so the earlier mode drifted from official mode (last rows); it was removed.', '',
              f'Wall time {time.time() - t0:.0f} s on {args.workers} processes. Command: '
              '`python benchmarks/rbench_judge_calls.py`']
    Path(args.out).write_text('\n'.join(lines) + '\n', encoding='utf-8')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
