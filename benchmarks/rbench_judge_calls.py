"""Judge calls per item, official vs efficient mode, on the real LLaVA-1.5 outputs (1,485 items x 3 scores).

The judge is a deterministic function of the prompt text only (what a loopback judge server sees): it reads the
respondent's answer and the correct answer out of the official prompt and grades them (MCQ: same option;
VQA/CAP: word-overlap F1 -> 0/1/2). Deterministic, so official and efficient mode must agree on every score the
efficient mode asks the judge for; differences come only from efficient mode's no-judge shortcuts.
    python benchmarks/rbench_judge_calls.py [--out benchmarks/rbench_judge_calls.md]
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from vlmeval_ext.rbench.fixtures import llava15_items
from vlmeval_ext.testing.fixtures import unpacked_fixtures  # noqa: E402
from vlmeval_ext.rbench.report import rbench_table
from vlmeval_ext.rbench.score import make_tasks, official_calls, parse_choices, run_sync

_MCQ = re.compile(r'a set of options \[(?P<opts>.*)\] with option \[(?P<correct>.*)\] being the correct answer\.\n'
                  r'.*there will be an answer \[(?P<answer>.*)\] provided by a respondent\.', re.S)
_VQA = re.compile(r'the response \[(?P<answer>.*)\] completely matches the correct answer \[(?P<correct>.*)\]\. \n', re.S)
_CAP = re.compile(r'the sentence \[(?P<answer>.*)\] completely matches the correct answer \[(?P<correct>.*)\]\. \n', re.S)
_WORD = re.compile(r'[a-z0-9]+')


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


def evaluate(items, mode: str, agree: int, caption_agree: int | None = None):
    rows, calls, by_task = [], 0, {}
    for it in items:
        tasks = make_tasks(it, mode=mode)
        for t in tasks:
            t.agree = agree
            t.caption_agree = caption_agree
        results, n = run_sync(tasks, deterministic_judge, use_shortcuts=(mode == 'efficient'))
        calls += n
        by_task[it.type] = by_task.get(it.type, 0) + n
        row = {'name': it.name, 'type': it.type, 'distortion': it.distortion, 'strength': it.strength}
        for t in tasks:
            row[f'score_{t.meta["kind"]}'] = results[t.key].score
        rows.append(row)
    return rows, calls, by_task


def main():
    ap = argparse.ArgumentParser()
    root = unpacked_fixtures() / 'rbench'
    ap.add_argument('--fixtures', default=str(root))
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    fx = Path(args.fixtures)
    items = llava15_items(fx)
    n = len(items)
    n_type = {t: sum(it.type == t for it in items) for t in ('MCQ', 'VQA', 'CAP')}
    t0 = time.time()
    off_rows, off_calls, off_by = evaluate(items, 'official', 1)
    assert off_calls == sum(official_calls(t) for it in items for t in make_tasks(it))
    off = rbench_table(off_rows)
    lines = ['# R-Bench judge calls per item: official vs efficient', '',
             f'{n} items (LLaVA-1.5 outputs, ref + dis), 3 judged scores each; deterministic prompt-only judge.', '',
             '| mode | calls | calls/item | MCQ/item | VQA/item | CAP/item | ratio to official | '
             'max abs diff (all dims, abs+rel) | Overall abs | Overall rel |',
             '|---|---|---|---|---|---|---|---|---|---|',
             f'| official | {off_calls} | {off_calls / n:.2f} | ' +
             ' | '.join(f'{off_by[t] / n_type[t]:.2f}' for t in ('MCQ', 'VQA', 'CAP')) +
             f' | 1.000 | 0 | {off["absolute"]["Overall"]:.4f} | {off["relative"]["Overall"]:.4f} |']
    spec_caption_agree = make_tasks(items[-1], mode='efficient')[0].caption_agree
    variants = [(f'efficient (spec: agree=1, caption_agree={spec_caption_agree})', 1, spec_caption_agree),
                ('efficient, official verdicts only (agree=1, caption_agree off)', 1, None),
                ('efficient (agree=2, caption_agree=3)', 2, 3)]
    for label, agree, caption_agree in variants:
        rows, calls, by = evaluate(items, 'efficient', agree, caption_agree)
        eff = rbench_table(rows)
        diff = max(abs(eff[m][d] - off[m][d]) for m in eff for d in eff[m] if off[m][d] is not None)
        lines.append(f'| {label} | {calls} | {calls / n:.2f} | ' +
                     ' | '.join(f'{by[t] / n_type[t]:.2f}' for t in ('MCQ', 'VQA', 'CAP')) +
                     f' | {calls / off_calls:.3f} | {diff:.4f} | {eff["absolute"]["Overall"]:.4f} | '
                     f'{eff["relative"]["Overall"]:.4f} |')
    lines += ['', f'Wall time {time.time() - t0:.1f} s. Command: `python benchmarks/rbench_judge_calls.py`', '',
              'Goal (issue 3): efficient <= 1/5 of official, overall within 0.01. Efficient mode decides certain '
              'answers without the judge (MCQ bare letters, identical texts), asks a repeated prompt once (agree=1), '
              'reuses ref verdicts for dis when both outputs are identical - these reproduce the official '
              'verdicts of a deterministic judge exactly - and, the one deviation from the official protocol, '
              'judges CAP reference captions one at a time, stopping once the first `caption_agree` verdicts '
              'agree (dataset_specs/rbench.yaml judge.efficient). "max abs diff" is over every dimension of both '
              'tables; small cells (e.g. one group x one task) move more than Overall.']
    Path(args.out).write_text('\n'.join(lines) + '\n', encoding='utf-8')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
