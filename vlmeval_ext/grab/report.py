"""GRAB aggregation and report files (pure apart from file writing; no kit imports).

Rows are dicts with task, category, complexity and one column per scoring holding 1/0 (correct/wrong) or None
(not scored: the kit's inference failure, a failed judge call, a scoring not run). None is excluded from every
mean and counted. `<stem>_score.json` holds one summary per scoring run, plus the run's `counts` (items, scored,
empty, inference failures, judge failures), the `judge` used (or null) and `notes` (e.g. a scoring skipped).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from vlmeval_ext.core.aggregate import count_missing, grouped_mean, is_missing, mean
from vlmeval_ext.core.spec import load_spec

SCORINGS = ('official', 'normalized', 'llm_extracted')
DIMENSIONS = ('task', 'category', 'complexity')


def _percent(value):
    return None if value is None else round(100.0 * value, 4)


def _percent_groups(groups: Mapping) -> dict:
    return {str(k): _percent(v) for k, v in groups.items()}


def _ordered(rows: Sequence[Mapping], key: str) -> list[Mapping]:
    """Rows in report order for a dimension: tasks and categories as the spec lists them, complexity numeric."""
    if key == 'complexity':
        return sorted(rows, key=lambda r: int(r['complexity']))
    order = {name: i for i, name in enumerate(load_spec('grab')[{'task': 'tasks', 'category': 'categories'}[key]])}
    return sorted(rows, key=lambda r: order.get(r[key], len(order)))


def summarize(rows: Sequence[Mapping], scoring: str) -> dict:
    """Percent accuracy for one scoring: Overall (item-weighted), per task, category, complexity, task x complexity."""
    if scoring not in SCORINGS:
        raise ValueError(f'unknown GRAB scoring {scoring!r} (known: {", ".join(SCORINGS)})')
    summary = {'Overall': _percent(mean(r[scoring] for r in rows))}
    for dim in DIMENSIONS:
        summary[dim] = _percent_groups(grouped_mean(_ordered(rows, dim), scoring, dim))
    by_task: dict = {}
    for row in sorted(_ordered(rows, 'task'), key=lambda r: int(r['complexity'])):
        by_task.setdefault(row['task'], []).append(row)
    summary['task x complexity'] = {
        task: _percent_groups(grouped_mean(task_rows, scoring, 'complexity')) for task, task_rows in by_task.items()}
    summary['counts'] = {'items': len(rows), 'scored': len(rows) - count_missing(rows, scoring),
                         'not_scored': count_missing(rows, scoring)}
    return summary


def item_weighted_overall(per_task_percent: Mapping[str, float], task_sizes: Mapping[str, int]) -> float:
    """Overall accuracy from per-task accuracies, weighting each task by its number of items (the paper's way)."""
    missing = set(per_task_percent) ^ set(task_sizes)
    if missing:
        raise ValueError(f'per-task accuracies and task sizes name different tasks: {sorted(missing)}')
    total = sum(task_sizes.values())
    return sum(per_task_percent[t] * task_sizes[t] for t in task_sizes) / total


def score_json(rows: Sequence[Mapping], extra_counts: Mapping[str, Mapping] | None = None,
               run: Mapping | None = None) -> dict:
    """{scoring: summary} for every scoring present in the rows (llm_extracted absent without a judge).

    `extra_counts` adds per-scoring failure accounting (e.g. unparsed responses, judge failures); `run` adds the
    run-level blocks (`counts`, `judge`, `notes`) beside the scorings.
    """
    present = [s for s in SCORINGS if rows and s in rows[0]]
    result = {s: summarize(rows, s) for s in present}
    for scoring, counts in (extra_counts or {}).items():
        if scoring in result:
            result[scoring]['counts'].update(counts)
    result.update(run or {})
    return result


def scorings_in(scores: Mapping) -> list[str]:
    """The scorings a score dict holds, in report order (the run-level blocks aside)."""
    return [s for s in SCORINGS if isinstance(scores.get(s), Mapping)]


def acc_table(rows: Sequence[Mapping]) -> list[dict]:
    """Long table in the kit's _acc style: one line per scoring x dimension x group with tot, hit, acc (%)."""
    present = [s for s in SCORINGS if rows and s in rows[0]]
    lines = []
    for scoring in present:
        groups: list[tuple[str, str, list]] = [('Overall', 'Overall', list(rows))]
        for dim in DIMENSIONS:
            buckets: dict = {}
            for row in _ordered(rows, dim):
                buckets.setdefault(str(row[dim]), []).append(row)
            groups += [(dim, g, members) for g, members in buckets.items()]
        buckets = {}
        for row in _ordered(_ordered(rows, 'complexity'), 'task'):
            buckets.setdefault(f'{row["task"]} / {row["complexity"]}', []).append(row)
        groups += [('task x complexity', g, members) for g, members in buckets.items()]
        for dim, group, members in groups:
            scored = [m[scoring] for m in members if not is_missing(m[scoring])]
            lines.append({'scoring': scoring, 'dimension': dim, 'group': group, 'tot': len(members),
                          'not_scored': len(members) - len(scored), 'hit': int(sum(scored)),
                          'acc': _percent(sum(scored) / len(scored)) if scored else None})
    return lines


def write_reports(rows: Sequence[Mapping], stem: str | Path, extra_counts: Mapping | None = None) -> dict:
    """Write <stem>_score.json, <stem>_acc.csv and <stem>_complexity.png; return the score dict."""
    import pandas as pd  # local: only report writing needs pandas

    stem = str(stem)
    scores = score_json(rows, extra_counts)
    with open(f'{stem}_score.json', 'w', encoding='utf-8') as f:
        json.dump(scores, f, indent=2)
    pd.DataFrame(acc_table(rows)).to_csv(f'{stem}_acc.csv', index=False)
    plot_complexity(scores, f'{stem}_complexity.png', title=f'GRAB | {scores["official"]["counts"]["items"]} items')
    return scores


def complexity_series(by_complexity: Mapping, complexities: Sequence[int] = tuple(range(10))) -> tuple[list, list]:
    """(x, y) over every complexity, y NaN where the task has no scored item: the line breaks at a gap instead of
    joining two distant points."""
    values = {int(c): v for c, v in by_complexity.items()}
    return list(complexities), [float('nan') if values.get(c) is None else float(values[c]) for c in complexities]


def plot_complexity(scores: Mapping, path: str | Path, title: str = '') -> bool:
    """Accuracy against complexity, one line per task (markers on every point; no line across a complexity without
    items), one panel per scoring. A run with no scored item writes no plot; returns whether it wrote one."""
    scorings = [s for s in scorings_in(scores) if scores[s].get('Overall') is not None]
    if not scorings:
        return False
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(scorings), figsize=(5 * len(scorings), 4.3), squeeze=False, sharey=True)
    markers = ('o', 's', '^', 'D')
    for ax, scoring in zip(axes[0], scorings):
        for k, (task, by_complexity) in enumerate(scores[scoring]['task x complexity'].items()):
            xs, ys = complexity_series(by_complexity)
            ax.plot(xs, ys, marker=markers[k % len(markers)], markersize=6 - k, label=task)
        ax.set_title(f'{scoring} (Overall {scores[scoring]["Overall"]:.1f} %)', fontsize=10)
        ax.set_xlabel('complexity')
        ax.set_xticks(range(10))
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel('accuracy (%)')
    axes[0][-1].legend(title='task')
    if title:
        from vlmeval_ext.core.plots import wrapped
        fig.suptitle(wrapped(title, fig.get_figwidth(), 10), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# The task names as GRAB's data writes them (the `task` column, _acc.csv, _score.json): one set of labels everywhere.
TASKS = ('properties', 'function', 'series', 'transform')


def task_table(scores: Mapping) -> 'pd.DataFrame':
    """What evaluate returns (and the kit prints): one row per scoring, accuracy (%) per task and Overall, and the
    items scored; labelled for the kit's printout (core.kit_table)."""
    from vlmeval_ext.core.kit_table import result_table

    rows = {}
    for scoring in scorings_in(scores):
        summary = scores[scoring]
        row = {'Overall (%)': summary['Overall']}
        row.update({f'{task} (%)': summary['task'].get(task) for task in TASKS})
        row['scored (items)'] = summary['counts']['scored']
        rows[scoring] = row
    return result_table('GRAB scoring', rows, digits=1)


def summary_row(score: Mapping) -> dict:
    """The end-of-run summary's row for one GRAB _score.json: accuracy in percent (official = the paper's rule),
    per task for the official scoring, Overall for each scoring present."""
    row = {f'official {task} (%)': score['official']['task'].get(task) for task in TASKS}
    for scoring in SCORINGS:
        if scoring in score:
            row[f'{scoring} Overall (%)'] = score[scoring]['Overall']
    row['items'] = score['official']['counts']['items']
    return row
