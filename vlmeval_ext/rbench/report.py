"""R-Bench robustness report: absolute = mean(score_dis), relative = mean(score_com x score_ref) by dimension.

Dimensions (dataset_specs/rbench.yaml, read by vlmeval_ext.core.taxonomy): Overall, MCQ, VQA, CAP, low, mid, high,
the 7 steps, the 7 groups and the nine task x strength cells MCQ-low ... CAP-high. The plots (`plot_radar`,
`plot_task_strength`) take any such table, so the corruption engine's -RC variants reuse them.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Callable, Mapping, Sequence

from vlmeval_ext.core.aggregate import is_missing
from vlmeval_ext.core.plots import no_plot_line, wrapped
from vlmeval_ext.core.taxonomy import dimension_order as taxonomy_dimension_order
from vlmeval_ext.core.taxonomy import robustness_table as taxonomy_robustness_table
from vlmeval_ext.core.taxonomy import taxonomy

TASKS = ('MCQ', 'VQA', 'CAP')
SCORE_COLUMNS = ['name', 'type', 'distortion', 'strength', 'score_ref', 'score_dis', 'score_com']


# ---------------------------------------------------------------------------------------------- taxonomy
# The 33 distortions, steps, groups and strengths live in vlmeval_ext.core.taxonomy (shared with the corruption
# engine); R-Bench's dimensions add its three tasks.
def dimension_order(tasks: Sequence[str] = TASKS, spec: Mapping | None = None) -> list[str]:
    return taxonomy_dimension_order(tasks, spec)


def robustness_table(rows: Sequence[Mapping], metrics: Mapping[str, Callable[[Mapping], object]],
                     tasks: Sequence[str] = TASKS, task_field: str | None = 'type',
                     spec: Mapping | None = None) -> dict[str, dict[str, float | None]]:
    return taxonomy_robustness_table(rows, metrics, tasks, task_field, spec)


def _value(row: Mapping, col: str) -> float | None:
    v = row.get(col)
    if v is None or v == '':
        return None
    v = float(v)
    return None if math.isnan(v) else v


def absolute(row: Mapping) -> float | None:
    return _value(row, 'score_dis')


def relative(row: Mapping) -> float | None:
    com, ref = _value(row, 'score_com'), _value(row, 'score_ref')
    return None if com is None or ref is None else com * ref


RBENCH_METRICS = {'absolute': absolute, 'relative': relative}


def rbench_table(rows: Sequence[Mapping]) -> dict[str, dict[str, float | None]]:
    present = [t for t in TASKS if any(r['type'] == t for r in rows)]
    return robustness_table(rows, RBENCH_METRICS, tasks=present or TASKS)


def failure_counts(rows: Sequence[Mapping]) -> dict[str, int]:
    return {col: sum(1 for r in rows if _value(r, col) is None) for col in ('score_ref', 'score_dis', 'score_com')}


# ------------------------------------------------------------------------------------------------- files
def read_scores_csv(path: str | Path) -> list[dict]:
    """A per-item scores file (columns SCORE_COLUMNS; empty score = failed) with clear errors."""
    path = Path(path)
    with open(path, encoding='utf-8', newline='') as f:
        reader = csv.DictReader(f)
        missing = [c for c in SCORE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f'{path}: missing columns {missing} (need {SCORE_COLUMNS})')
        rows = []
        for i, rec in enumerate(reader, 2):
            for col in ('distortion', 'strength'):
                try:
                    rec[col] = int(float(rec[col]))
                except ValueError:
                    raise ValueError(f'{path} line {i} column {col}: {rec[col]!r} is not an integer') from None
            if rec['type'] not in TASKS:
                raise ValueError(f'{path} line {i} column type: {rec["type"]!r} is not one of {TASKS}')
            if not 1 <= rec['distortion'] <= 33 or not 1 <= rec['strength'] <= 3:
                raise ValueError(f'{path} line {i}: distortion {rec["distortion"]} / strength {rec["strength"]} '
                                 'out of range (1-33 / 1-3)')
            for col in ('score_ref', 'score_dis', 'score_com'):
                try:
                    value = _value(rec, col)
                except ValueError:
                    raise ValueError(f'{path} line {i} column {col}: {rec[col]!r} is not a number') from None
                if value is not None and not 0.0 <= value <= 1.0:
                    raise ValueError(f'{path} line {i} column {col}: {value} outside [0, 1]')
                rec[col] = value
            rows.append(rec)
    return rows


def write_scores_csv(rows: Sequence[Mapping], path: str | Path) -> None:
    with open(path, 'w', encoding='utf-8', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=SCORE_COLUMNS, extrasaction='ignore')
        writer.writeheader()
        for r in rows:
            writer.writerow({c: ('' if is_missing(r.get(c)) else r.get(c)) for c in SCORE_COLUMNS})


def robustness_csv_text(table: Mapping[str, Mapping[str, float | None]], judge_label: str | None = None) -> str:
    """dimension,absolute (0-1),relative (0-1) CSV; with `judge_label` (an offline approximation), a fourth
    column says `offline approximation` on every row (short: the full label is in _score.json), so the file can
    never pass for the paper's judge once it travels alone."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator='\n')
    writer.writerow(['dimension', 'absolute (0-1)', 'relative (0-1)'] + (['judge'] if judge_label else []))
    mark = 'offline approximation' if judge_label else None
    for dim in table['absolute']:
        cells = ['' if v is None else f'{v:.4f}' for v in (table[m][dim] for m in ('absolute', 'relative'))]
        writer.writerow([dim, *cells] + ([mark] if mark else []))
    return buf.getvalue()


def paper_tables(table: Mapping[str, Mapping[str, float | None]], label: str = '') -> str:
    """The two tables of the paper's Table 3: MCQ/VQA/CAP x low/mid/high, then Overall."""
    cols = [f'{t}-{s}' for t in TASKS for s in ('low', 'mid', 'high')] + ['Overall']
    head = ['MCQ low', 'MCQ mid', 'MCQ high', 'VQA low', 'VQA mid', 'VQA high', 'CAP low', 'CAP mid', 'CAP high',
            'Overall']
    out = []
    for metric in ('absolute', 'relative'):
        out.append(f'| {metric.capitalize()} | ' + ' | '.join(head) + ' |')
        out.append('|' + '---|' * (len(head) + 1))
        vals = [table[metric].get(c) for c in cols]
        out.append(f'| {label or "this run"} | ' + ' | '.join('-' if v is None else f'{v:.4f}' for v in vals) + ' |')
        out.append('')
    return '\n'.join(out)


def result_table(table: Mapping[str, Mapping[str, float | None]]) -> 'pd.DataFrame':
    """What evaluate returns (and the kit prints): the paper's Table 3 layout, rows absolute and relative, columns
    MCQ/VQA/CAP x low/mid/high and Overall, on the paper's 0-1 scale (core.kit_table)."""
    from vlmeval_ext.core.kit_table import result_table as build

    cols = ['Overall'] + [f'{t}-{s}' for t in TASKS for s in ('low', 'mid', 'high')]
    return build('R-Bench', {metric: {f'{c.replace("-", " ")} (0-1)': table[metric].get(c) for c in cols}
                             for metric in ('absolute', 'relative')}, digits=4)


def write_report(rows: Sequence[Mapping], stem: str | Path, judge: Mapping | None = None,
                 plots: bool = True, label: str = '', judge_label: str | None = None,
                 counts: Mapping | None = None, title: str = '', coverage: Mapping | None = None) -> dict:
    """<stem>_scores.csv, <stem>_robustness.csv, <stem>_score.json and PNG plots; returns the score dict.

    `coverage` (core.coverage.check_against_dataset: missing items of the dataset) is stored as `coverage`.

    `counts` (items, rows, scored, empty, inference_failures, missing_partner, judge_failures) goes into the score
    file as it is; without it only the item count and the excluded scores are known.
    """
    stem = str(stem)
    table = rbench_table(rows)
    write_scores_csv(rows, f'{stem}_scores.csv')
    Path(f'{stem}_robustness.csv').write_text(robustness_csv_text(table, judge_label), encoding='utf-8')
    result = {'absolute': table['absolute'], 'relative': table['relative'],
              'judge': dict(judge or {}), 'failed': failure_counts(rows), 'items': len(rows),
              'counts': dict(counts or {'items': len(rows)})}
    if coverage is not None:
        result['coverage'] = dict(coverage)
    Path(f'{stem}_score.json').write_text(json.dumps(result, indent=2), encoding='utf-8')
    if plots:
        title = title or label
        if plot_radar(table, f'{stem}_radar.png', title=title):
            plot_task_strength(table, f'{stem}_task_strength.png', title=title)
        else:
            print(no_plot_line('R-Bench', f'{stem}_radar.png', 'no item was scored'))
    return result


# ------------------------------------------------------------------------------------------------- plots
# One style per metric: equal absolute and relative values stay visible (different markers and line styles).
METRIC_STYLES = {'absolute': dict(marker='o', markersize=7, linestyle='-'),
                 'relative': dict(marker='x', markersize=9, linestyle='--'),
                 'reference': dict(marker='s', markersize=5, linestyle=':')}
MIN_RADAR_AXES = 5


def scored_dims(table: Mapping[str, Mapping[str, float | None]], dims: Sequence[str]) -> list[str]:
    """The dimensions that hold a value in some metric of `table` (an -RC run samples only some distortions)."""
    return [d for d in dims if any(values.get(d) is not None for values in table.values())]


def plot_radar(table: Mapping[str, Mapping[str, float | None]], path: str | Path, title: str = '',
               spec: Mapping | None = None) -> bool:
    """Two panels (7 steps, 7 groups), each with every metric of `table` (absolute and relative for R-Bench), over
    the dimensions that hold a value. A radar needs at least MIN_RADAR_AXES of them; with fewer (an -RC run of 4
    distortions) a panel is a bar chart, so missing dimensions never look like zeros. Nothing scored: no plot
    (returns False)."""
    tax = taxonomy(spec)
    panels = [(label, scored_dims(table, tax[label])) for label in ('steps', 'groups')]
    if not any(dims for _, dims in panels):
        return False
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    fig = plt.figure(figsize=(11, 5.4))
    for k, (label, dims) in enumerate(panels):
        polar = len(dims) >= MIN_RADAR_AXES
        ax = fig.add_subplot(1, 2, k + 1, projection='polar' if polar else None)
        if polar:
            angles = np.linspace(0, 2 * np.pi, len(dims), endpoint=False).tolist()
            for metric, values in table.items():
                vals = [np.nan if values.get(d) is None else values[d] for d in dims]
                ax.plot(angles + angles[:1], vals + vals[:1], label=metric, **METRIC_STYLES.get(metric, {}))
                ax.fill(angles + angles[:1], vals + vals[:1], alpha=0.08)
            ax.set_xticks(angles)
            ax.set_xticklabels(dims, fontsize=8)
            ax.set_ylim(0, 1)
        else:
            width = 0.8 / max(1, len(table))
            for j, (metric, values) in enumerate(table.items()):
                vals = [np.nan if values.get(d) is None else values[d] for d in dims]
                ax.bar([i + j * width for i in range(len(dims))], vals, width, label=metric)
            ax.set_xticks([i + width * (len(table) - 1) / 2 for i in range(len(dims))], dims, fontsize=8)
            ax.set_ylim(0, 1)
            ax.set_ylabel('score (0-1)')
        missing = len(tax[label]) - len(dims)
        ax.set_title(f'by {label} (0-1)' + (f'; {missing} without items not shown' if missing else ''), fontsize=9)
        ax.legend(loc='upper right', bbox_to_anchor=(1.3, 1.12) if polar else None, fontsize=8)
    if title:
        fig.suptitle(wrapped(title, fig.get_figwidth(), 10), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_task_strength(table: Mapping[str, Mapping[str, float | None]], path: str | Path, title: str = '',
                       tasks: Sequence[str] = TASKS) -> None:
    """Heatmap per metric: rows tasks, columns low/mid/high."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import numpy as np

    levels = ('low', 'mid', 'high')
    fig, axes = plt.subplots(1, len(table), figsize=(4.5 * len(table), 3.2), squeeze=False)
    for ax, (metric, values) in zip(axes[0], table.items()):
        grid = np.array([[np.nan if values.get(f'{t}-{s}') is None else values[f'{t}-{s}'] for s in levels]
                         for t in tasks], dtype=float)
        im = ax.imshow(grid, vmin=0, vmax=1, cmap='viridis')
        ax.set_xticks(range(len(levels)), levels)
        ax.set_yticks(range(len(tasks)), tasks)
        for i in range(len(tasks)):
            for j in range(len(levels)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f'{grid[i, j]:.3f}', ha='center', va='center',
                            color='white' if grid[i, j] < 0.5 else 'black', fontsize=9)
        ax.set_title(f'{metric} (0-1)')
        fig.colorbar(im, ax=ax, fraction=0.046)
    if title:
        fig.suptitle(wrapped(title, fig.get_figwidth(), 10), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ summary
def summary_row(score: Mapping) -> dict:
    """The end-of-run summary's row for one R-Bench _score.json (scores on the paper's 0-1 scale)."""
    judge = score.get('judge') or {}
    row = {'items': score.get('items')}
    for metric in ('absolute', 'relative'):
        for dim in ('Overall', *TASKS):
            row[f'{metric} {dim} (0-1)'] = score[metric].get(dim)
    row['judge'] = judge.get('label') or f"judge {judge.get('model', '?')} ({judge.get('mode', '?')})"
    return row
