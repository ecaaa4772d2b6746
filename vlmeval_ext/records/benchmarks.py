"""What the plugin adds to each benchmark's results: its summary row, its run record and its plots (kit-free).

One `Report` per benchmark, named by its registry record (`report`):
- `summary_row(score)`: its row in `vlmeval-ext summary` and the leaderboard: {column with its unit: value};
- `run_record(dataset)`: what its scores depend on beyond the files (prompt templates, seeds, input mode), which
  the manifest stores (templates as sha1);
- `write_extras(dataset, eval_file, score)`: the plots and reports beside the score file;
- `intervals(eval_file, score, tag)`: the score file's `ci95` block (vlmeval_ext.records.intervals), from the
  per-item file the evaluation wrote; `with_intervals(table, score)`: the table evaluate returns (what the kit
  prints) with each headline row's interval.
Prompts are read from the kit-dialect utils modules (vlmeval_ext.dataset.utils), their one copy.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Mapping

from vlmeval_ext.io import stem_path
from vlmeval_ext.records.plots import model_of_file, no_plot_line, run_title, wrapped

SMOKE_TEST_NOTE = ('RoCOCO-Smoke-Hash is a weight-free smoke test of the pipeline, not a model: its recalls are '
                   'about chance level and are never compared with the paper')


class Report:
    # (label, score path, unit) of each headline: its interval goes beside it in the summary and leaderboard
    HEADLINE: tuple = ()

    def summary_row(self, score: Mapping) -> dict:
        raise NotImplementedError

    def interval_columns(self, score: Mapping) -> dict:
        """The headlines' 95 % intervals and the smallest difference this run's item count can detect."""
        from vlmeval_ext.records.intervals import detectable_text, leaf, text
        if 'ci95' not in score:
            return {}
        out = {f'{label} 95 % CI ({unit})': text(leaf(score['ci95'], path), 2 if unit == '%' else 4)
               for label, path, unit in self.HEADLINE}
        detect = score.get('detectable_difference')
        if isinstance(detect, Mapping):
            value = detect.get('value')
            out[f'detectable difference ({detect.get("unit", "")})'] = value if value is not None \
                else detectable_text(detect)
        return out

    def run_record(self, dataset: str) -> dict:
        return {}

    def write_extras(self, dataset: str, eval_file: str, score: Mapping, tag: str = '') -> None:
        return None

    def intervals(self, eval_file: str, score: Mapping, tag: str = '') -> dict:
        return {}

    def with_intervals(self, table, score: Mapping):
        """The returned table with the 95 % interval of each row's first value (its headline) right after it, as
        two columns (`... 95 % CI low` / `high`): numbers, so the kit's run summary still takes the headline as the
        row's first value; `n<2` where a cell has too few items, `-` where the row has no interval (a fixed rule,
        such as a naive baseline, has no sampling interval)."""
        import pandas as pd

        from vlmeval_ext.records.intervals import text
        rows = self.interval_rows(score)
        if table is None or not rows or len(table) != len(rows):
            return table
        column = table.columns[1]
        unit = column[column.rfind('('):] if column.endswith(')') else ''
        digits = 4 if unit == '(0-1)' else 2
        name = column.split(' (')[0]
        table = table.copy()
        for k, side in enumerate(('low', 'high')):
            values = [round(float(r[k]), digits) if isinstance(r, (list, tuple)) else text(r) for r in rows]
            table.insert(2 + k, f'{name} 95 % CI {side} {unit}'.strip(), pd.Series(values, index=table.index, dtype=object))
        return table

    def interval_rows(self, score: Mapping) -> list:
        """The interval of each row's headline in the returned table, in row order ([] for none)."""
        return []


def _read_table(path: str):
    import pandas as pd
    return pd.read_csv(path, sep='\t' if path.endswith('.tsv') else ',', dtype=str, keep_default_na=False)


def _plt():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


# -------------------------------------------------------------------------------------------------------- GRAB
class GRABReport(Report):
    SCORINGS = ('official', 'normalized', 'llm_extracted')
    HEADLINE = (('official Overall', ('official', 'Overall'), '%'),)

    def summary_row(self, score):
        from vlmeval_ext.dataset.utils.grab import TASKS
        row = {f'official {task} (%)': score['official']['task'].get(task) for task in TASKS}
        for scoring in self.SCORINGS:
            if scoring in score:
                row[f'{scoring} Overall (%)'] = score[scoring]['Overall']
        row['items'] = score['official']['counts']['items']
        return row

    def run_record(self, dataset):
        from vlmeval_ext.dataset.utils import grab as G
        return {'prompts': {'question': G.QUESTION_PROMPT, 'llm_extraction': G.EXTRACTION_PROMPT}}

    def intervals(self, eval_file, score, tag=''):
        from vlmeval_ext.records import intervals
        return intervals.grab(_read_table(stem_path(eval_file, '_items.tsv')))

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        return [leaf(score.get('ci95'), [s, 'Overall']) for s in self.SCORINGS if isinstance(score.get(s), dict)]

    def write_extras(self, dataset, eval_file, score, tag=''):
        plot_path = stem_path(eval_file, '_complexity.png')
        counts, judge = score['counts'], score.get('judge')
        judge_text = f'{judge["name"]} (llm_extracted)' if judge else 'none (official and normalized are rule-based)'
        title = run_title(dataset, model_of_file(eval_file, dataset), judge_text, counts['items'], counts['scored'])
        if not plot_complexity(score, plot_path, title=title):
            print(no_plot_line('GRAB', plot_path, f'no item was scored ({counts["inference_failures"]} of '
                                                  f'{counts["items"]} are inference failures)'))


def complexity_series(by_complexity: Mapping, complexities=tuple(range(10))) -> tuple[list, list]:
    """(x, y) over every complexity, y NaN where the task has no scored item: the line breaks at a gap."""
    values = {int(c): v for c, v in by_complexity.items()}
    return list(complexities), [float('nan') if values.get(c) is None else float(values[c]) for c in complexities]


def plot_complexity(scores: Mapping, path, title: str = '') -> bool:
    """Accuracy against complexity, one line per task, one panel per scoring; False (no plot) when nothing was
    scored."""
    scorings = [s for s in GRABReport.SCORINGS if isinstance(scores.get(s), Mapping)
                and scores[s].get('Overall') is not None]
    if not scorings:
        return False
    from vlmeval_ext.dataset.utils.grab import TASKS
    plt = _plt()
    fig, axes = plt.subplots(1, len(scorings), figsize=(5 * len(scorings), 4.3), squeeze=False, sharey=True)
    markers = ('o', 's', '^', 'D')
    for ax, scoring in zip(axes[0], scorings):
        for task, by_complexity in scores[scoring]['task x complexity'].items():
            k = TASKS.index(task) if task in TASKS else len(TASKS)     # one colour per task, in every run
            xs, ys = complexity_series(by_complexity)
            ax.plot(xs, ys, marker=markers[k % len(markers)], markersize=6 - k % 4, label=task, color=f'C{k}')
        ax.set_title(f'{scoring} (Overall {scores[scoring]["Overall"]:.1f} %)', fontsize=10)
        ax.set_xlabel('complexity')
        ax.set_xticks(range(10))
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel('accuracy (%)')
    axes[0][-1].legend(title='task')
    if title:
        fig.suptitle(wrapped(title, fig.get_figwidth(), 10), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------------------- R-Bench
METRIC_STYLES = {'absolute': dict(marker='o', markersize=7, linestyle='-', color='C0'),
                 'relative': dict(marker='x', markersize=9, linestyle='--', color='C1'),
                 'reference': dict(marker='s', markersize=5, linestyle=':', color='C2')}
MIN_RADAR_AXES = 5


def scored_dims(table: Mapping, dims) -> list[str]:
    return [d for d in dims if any(values.get(d) is not None for values in table.values())]


def plot_radar(table: Mapping, path, title: str = '') -> bool:
    """Two panels (the 7 steps, the 7 groups) with every metric of `table`, over the dimensions that hold a
    value; fewer than MIN_RADAR_AXES of them make a bar chart, so a missing dimension never looks like a zero.
    Nothing scored: no plot (False)."""
    from vlmeval_ext.dataset.utils.rbench_full import GROUPS, STEPS
    panels = [(label, scored_dims(table, dims)) for label, dims in (('steps', STEPS), ('groups', GROUPS))]
    if not any(dims for _, dims in panels):
        return False
    import numpy as np
    plt = _plt()
    fig = plt.figure(figsize=(11, 5.4))
    for k, (label, dims) in enumerate(panels):
        polar = len(dims) >= MIN_RADAR_AXES
        ax = fig.add_subplot(1, 2, k + 1, projection='polar' if polar else None)
        if polar:
            angles = np.linspace(0, 2 * np.pi, len(dims), endpoint=False).tolist()
            for metric, values in table.items():
                vals = [np.nan if values.get(d) is None else values[d] for d in dims]
                style = METRIC_STYLES.get(metric, {})
                ax.plot(angles + angles[:1], vals + vals[:1], label=metric, **style)
                ax.fill(angles + angles[:1], vals + vals[:1], alpha=0.08, color=style.get('color'))
            ax.set_xticks(angles)
            ax.set_xticklabels(dims, fontsize=8)
        else:
            width = 0.8 / max(1, len(table))
            for j, (metric, values) in enumerate(table.items()):
                vals = [np.nan if values.get(d) is None else values[d] for d in dims]
                ax.bar([i + j * width for i in range(len(dims))], vals, width, label=metric,
                       color=METRIC_STYLES.get(metric, {}).get('color'))
            ax.set_xticks([i + width * (len(table) - 1) / 2 for i in range(len(dims))], dims, fontsize=8)
            ax.set_ylabel('score (0-1)')
        ax.set_ylim(0, 1)
        missing = (len(STEPS) if label == 'steps' else len(GROUPS)) - len(dims)
        ax.set_title(f'by {label} (0-1)' + (f'; {missing} without items not shown' if missing else ''), fontsize=9)
        ax.legend(loc='upper right', bbox_to_anchor=(1.3, 1.12) if polar else None, fontsize=8)
    if title:
        fig.suptitle(wrapped(title, fig.get_figwidth(), 10), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_task_strength(table: Mapping, path, title: str = '', tasks=('MCQ', 'VQA', 'CAP')) -> None:
    """Heatmap per metric: rows tasks, columns low/mid/high."""
    import numpy as np
    plt = _plt()
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


class RBenchReport(Report):
    HEADLINE = (('absolute Overall', ('absolute', 'Overall'), '0-1'),
                ('relative Overall', ('relative', 'Overall'), '0-1'))

    def intervals(self, eval_file, score, tag=''):
        from vlmeval_ext.records import intervals
        scores = _read_table(stem_path(eval_file, f'{tag}_scores.csv'))
        block = intervals.rbench(scores)
        if not tag and (score.get('judge') or {}).get('mode', 'official') == 'official':
            block['judge_noise'] = intervals.rbench_judge_noise(scores)   # five repeats per score measure it
        return block

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        return [leaf(score.get('ci95'), [m, 'Overall']) for m in ('absolute', 'relative')]

    def summary_row(self, score):
        judge = score.get('judge') or {}
        row = {'items': score.get('items')}
        for metric in ('absolute', 'relative'):
            for dim in ('Overall', 'MCQ', 'VQA', 'CAP'):
                row[f'{metric} {dim} (0-1)'] = score[metric].get(dim)
        row['judge'] = judge.get('label') or f"judge {judge.get('model', '?')} ({judge.get('mode', '?')})"
        return row

    def run_record(self, dataset):
        from vlmeval_ext.dataset.utils.rbench_full import JUDGE_PROMPTS, MODEL_PROMPTS
        return {'prompts': {**{f'model_{t}': p for t, p in MODEL_PROMPTS.items()},
                            **{f'judge_{t}': p for t, p in JUDGE_PROMPTS.items()}}}

    def write_extras(self, dataset, eval_file, score, tag=''):
        from vlmeval_ext.records.intervals import leaf
        judge = score.get('judge') or {}
        offline = judge.get('mode') == 'offline'
        path = stem_path(eval_file, f'{tag}_robustness.csv')
        with open(path, encoding='utf-8', newline='') as f:
            rows = list(csv.reader(f))
        head = rows[0] + [f'{m} 95 % CI {end} (0-1)' for m in ('absolute', 'relative') for end in ('low', 'high')]
        body = []
        for r in rows[1:]:
            cells = [leaf(score.get('ci95'), [m, r[0]]) for m in ('absolute', 'relative')]
            body.append(r + [f'{c[i]:.4f}' if c else '' for c in cells for i in (0, 1)])
        if offline:      # the table can never pass for the paper's judge once it travels alone
            head, body = head + ['judge'], [r + ['offline approximation'] for r in body]
        with open(path, 'w', encoding='utf-8', newline='') as f:
            csv.writer(f, lineterminator='\n').writerows([head] + body)
        table = {m: score[m] for m in ('absolute', 'relative')}
        judge_text = judge.get('label', '') if offline else f'{judge.get("name")} ({judge.get("mode")} mode)'
        counts = score.get('counts', {})
        title = run_title(dataset, model_of_file(eval_file, dataset), judge_text, counts.get('items', 0),
                          counts.get('scored'))
        if plot_radar(table, stem_path(eval_file, f'{tag}_radar.png'), title=title):
            plot_task_strength(table, stem_path(eval_file, f'{tag}_task_strength.png'), title=title)
        else:
            print(no_plot_line('R-Bench', stem_path(eval_file, f'{tag}_radar.png'), 'no item was scored'))


# -------------------------------------------------------------------------------------------------------- ReMI
class ReMIReport(Report):
    HEADLINE = (('official Overall', ('accuracy', 'Overall'), '%'),)
    TABLE_ROWS = (('official', ['accuracy', 'Overall']), ('lenient', ['lenient', 'accuracy', 'Overall']),
                 ('naive baseline', None), ('ERP', ['erp', 'Overall']))

    def intervals(self, eval_file, score, tag=''):
        from vlmeval_ext.records import intervals
        return intervals.remi(_read_table(stem_path(eval_file, '_items.tsv')), score)

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        return [leaf(score.get('ci95'), path) if path else '-' for _, path in self.TABLE_ROWS]

    def with_intervals(self, table, score):
        """ReMI's table is printed as labelled values when it is taller than wide: the intervals come as rows."""
        title = table.columns[0] if table is not None and len(table.columns) else None
        if title is None or list(table.columns) != [title, 'value']:
            return super().with_intervals(table, score)
        import pandas as pd

        from vlmeval_ext.records.intervals import text
        extra = [{title: f'{name}: Overall 95 % CI (%)', 'value': text(value)}
                 for (name, path), value in zip(self.TABLE_ROWS, self.interval_rows(score)) if path]
        return pd.concat([table, pd.DataFrame(extra)], ignore_index=True)

    def summary_row(self, score):
        return {'input mode': score['input_mode'], 'official Overall (%)': score['accuracy']['Overall'],
                'lenient Overall (%)': score['lenient']['accuracy']['Overall'],
                'naive baseline Overall (%)': score['naive_baseline']['Overall'],
                'ERP Overall (%)': score['erp']['Overall'], 'differ': score['official_vs_lenient']['differ'],
                'empty': score['counts']['empty'], 'scored': score['counts']['scored'],
                'items': score['counts']['items']}

    def run_record(self, dataset):
        from vlmeval_ext.dataset.utils.remi import split_and_mode
        from vlmeval_ext.dataset.utils.remi import APPENDIX, COMMON
        return {'input_mode': split_and_mode(dataset)[1], 'judge': {'model': None, 'mode': 'rule-based (no judge)'},
                'prompts': {'appendix_common': COMMON, **APPENDIX}}

    def write_extras(self, dataset, eval_file, score, tag=''):
        model = model_of_file(eval_file, dataset)
        Path(stem_path(eval_file, '_tasks.md')).write_text(remi_markdown(score, model), encoding='utf-8')
        counts = score['counts']
        if not counts['scored']:
            print(no_plot_line('ReMI', stem_path(eval_file, '_tasks.png'),
                               'no item was scored (all are inference failures)'))
            return
        title = run_title(dataset, model, "none (rule-based, the authors' evaluation code)", counts['items'],
                          counts['scored'])
        remi_bars(score, stem_path(eval_file, '_tasks.png'), model,
                  f'{title}\nofficial accuracy per task ({score["input_mode"]} input)')


def _fmt(x, digits=1):
    return '-' if x is None else f'{x:.{digits}f}'


def remi_accounting(summary: Mapping) -> list[str]:
    counts, differ = summary['counts'], summary['official_vs_lenient']
    return ["Official = the ReMI authors' evaluation code (the headline, compared with the paper); lenient = "
            f'a robust reading of the same answers. They differ on {differ["differ"]} item(s) (lenient only right: '
            f'{differ["lenient_only"]}; official only right: {differ["official_only"]}).',
            f'Items {counts["items"]}, scored {counts["scored"]}; empty answers (scored wrong): {counts["empty"]}; '
            f"inference failures (the kit's failure text, excluded): {counts['inference_failures']}; "
            f'unreadable for official (BAD_JSON, wrong): {counts["official_bad_json"]}; '
            f'unreadable for lenient (wrong): {counts["parse_failures"] or "none"}']


def remi_markdown(summary: Mapping, model_name: str = '') -> str:
    from vlmeval_ext.dataset.utils.remi import TABLE_HEADER, task_rows
    title = (f'ReMI{" - " + model_name if model_name else ""} (input mode: {summary["input_mode"]}; '
             f'micro accuracy {_fmt(summary["accuracy"]["micro"])} %)')
    lines = [title, '', '| ' + ' | '.join(TABLE_HEADER) + ' |', '|' + '---|' * len(TABLE_HEADER)]
    for task, n, a, b, e, lenient in task_rows(summary):
        lines.append(f'| {task} | {n} | {_fmt(a)} | {_fmt(b)} | {_fmt(e)} | {_fmt(lenient)} |')
    return '\n'.join(lines + [''] + remi_accounting(summary)) + '\n'


def remi_bars(summary: Mapping, out_path, model_name: str = 'model', title: str = '') -> Path:
    plt = _plt()
    tasks = list(summary['accuracy']['task'])
    model = [summary['accuracy']['task'][t] or 0.0 for t in tasks]
    base = [summary['naive_baseline']['task'][t] or 0.0 for t in tasks]
    xs = range(len(tasks))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(tasks) + 2), 4.2))
    width = 0.4
    bars = ax.bar([x - width / 2 for x in xs], model, width, label=f'{model_name} (official)', color='#3b75af')
    ax.bar_label(bars, fmt='%.0f', fontsize=7)          # a 0 % bar shows "0", not a missing bar
    ax.bar([x + width / 2 for x in xs], base, width, label='naive baseline', color='#bbbbbb')
    ax.set_xticks(list(xs))
    ax.set_xticklabels(tasks, rotation=40, ha='right')
    ax.set_ylabel('accuracy (%)')
    ax.set_ylim(0, 118)
    ax.set_yticks(range(0, 101, 20))
    ax.set_title(wrapped(title or f'ReMI per task ({summary["input_mode"]} input)', fig.get_figwidth(), 9),
                 fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return Path(out_path)


# ------------------------------------------------------------------------------------------------------ RoCOCO
class RoCOCOMCQReport(Report):
    HEADLINE = (('accuracy', ('accuracy',), '%'),)

    def intervals(self, eval_file, score, tag=''):
        from vlmeval_ext.records import intervals
        return intervals.rococo_mcq(_read_table(stem_path(eval_file, '_items.tsv')))

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        return [leaf(score.get('ci95'), ['accuracy'])]

    def summary_row(self, score):
        return {'attack': score.get('attack'), 'accuracy (%)': score['accuracy'],
                'adversarial twin chosen (%)': score['twin_rate'], 'chance (%)': score.get('chance'),
                'answered': score['n'], 'items': score.get('n_items', score['n'])}

    def run_record(self, dataset):
        from vlmeval_ext.dataset.utils import rococo_mcq as Q
        from vlmeval_ext.prepare.rococo import MCQ_SEED
        return {'judge': {'model': 'none (rule-based: a stated capital letter, else the text of exactly one '
                                   'option)', 'mode': 'rule', 'retries': 0, 'endpoint_host': None},
                'seeds': {'mcq_options': MCQ_SEED},
                'prompts': {'mcq': Q.prompt_text({'question': Q.QUESTION, 'A': '{A}', 'B': '{B}', 'C': '{C}',
                                                  'D': '{D}'})}}


class RoCOCORetrievalReport(Report):
    HEADLINE = (('R@1', ('metrics', 'R@1'), '%'), ('false rate', ('metrics', 'false_rate'), '%'))

    def intervals(self, eval_file, score, tag=''):
        from vlmeval_ext.records import intervals
        return intervals.rococo_retrieval(_read_table(stem_path(eval_file, '_ranks.tsv')))

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        seeds = list((score.get('per_seed') or {}))
        return [leaf(score.get('ci95'), ['metrics', 'R@1'])] + [leaf(score.get('ci95'), ['per_seed', s, 'R@1'])
                                                               for s in seeds]

    def summary_row(self, score):
        row = {}
        for name, value in (score.get('metrics') or {}).items():
            if isinstance(value, (int, float)) or value is None:
                row[f'{name.replace("false_rate", "false rate")} (%)'] = value
        row.update({'direction': score.get('direction'), 'images': score.get('n_images'),
                    'texts': score.get('n_texts')})
        return row

    def run_record(self, dataset):
        return {'judge': {'model': None, 'mode': 'embedding ranking', 'retries': 0, 'endpoint_host': None}}


class CorruptedReport(Report):
    HEADLINE = (('reference Overall', ('reference', 'Overall'), '0-1'),
                ('relative Overall', ('relative', 'Overall'), '0-1'))

    def intervals(self, eval_file, score, tag=''):
        from vlmeval_ext.records import intervals
        return intervals.rc(_read_table(stem_path(eval_file, '_rc_scores.csv')))

    def summary_row(self, score):
        return {'base dataset': score['base_dataset'], 'task': score['task'],
                'reference Overall (0-1)': score['reference']['Overall'],
                'absolute Overall (0-1)': score['absolute']['Overall'],
                'relative Overall (0-1)': score['relative']['Overall'],
                'pairs': score['pairs'], 'judge': f"{score['judge']['name']}"}



GRAB = GRABReport()
RBENCH = RBenchReport()
REMI = ReMIReport()
ROCOCO_MCQ = RoCOCOMCQReport()
ROCOCO_RETRIEVAL = RoCOCORetrievalReport()
CORRUPTED = CorruptedReport()
