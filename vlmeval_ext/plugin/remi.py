"""ReMI's plugin half: what vlmeval-ext adds to the kit-dialect dataset (vlmeval_ext/dataset/remi.py).

Its `Report`: the summary row, the run record (input mode, prompts), the per-task table and bar plot, the 95 %
intervals (Wilson per task; Korn-Graubard over tasks for Overall; t for the ERP Overall), the items `compare` reads
and the report page's section; and `naive_answer`, what `Naive-Baseline` answers. Kit-free.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from vlmeval_ext.io import stem_path
from vlmeval_ext.plugin.base import Report, read_table
from vlmeval_ext.records.compare import Headline, item_table, num
from vlmeval_ext.records.intervals import (LEVEL, Intervals, design_detectable, korn_graubard, rounded, task_mean,
                                           wilson)
from vlmeval_ext.records.plots import model_of_file, new_figure, no_plot_line, run_title, wrapped
from vlmeval_ext.records.report_html import Section, col, read_file, verdict
from vlmeval_ext.registry import benchmark_of


class ReMIReport(Report):
    HEADLINE = (('official Overall', ('accuracy', 'Overall'), '%'),)
    TABLE_ROWS = (('official', ['accuracy', 'Overall']), ('lenient', ['lenient', 'accuracy', 'Overall']),
                 ('naive baseline', None), ('ERP', ['erp', 'Overall']))

    def intervals(self, eval_file, score, tag=''):
        return item_intervals(read_table(stem_path(eval_file, '_items.tsv')), score)

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

    def rule_files(self, dataset, data, eval_file, judge_kwargs):
        from vlmeval_ext.dataset.utils import remi as rules
        files = rules.evaluation_files(data, rules.split_and_mode(dataset)[1])
        return files, rules.result_table(files['_score.json'])

    def run_record(self, dataset):
        from vlmeval_ext.dataset.utils.remi import split_and_mode
        from vlmeval_ext.dataset.utils.remi import APPENDIX, COMMON
        return {'input_mode': split_and_mode(dataset)[1], 'judge': {'model': None, 'mode': 'rule-based (no judge)'},
                'prompts': {'appendix_common': COMMON, **APPENDIX}}

    def write_extras(self, dataset, eval_file, score, tag='', model=''):
        model = model or model_of_file(eval_file, dataset)
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
    tasks = list(summary['accuracy']['task'])
    model = [summary['accuracy']['task'][t] or 0.0 for t in tasks]
    base = [summary['naive_baseline']['task'][t] or 0.0 for t in tasks]
    xs = range(len(tasks))
    fig = new_figure(figsize=(max(6.0, 0.8 * len(tasks) + 2), 4.2))
    ax = fig.subplots()
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
    fig.savefig(out_path, dpi=110, metadata={'Title': title} if title else None)
    return Path(out_path)


_TRUTH = {'true': 1.0, 'false': 0.0, '1': 1.0, '0': 0.0, '1.0': 1.0, '0.0': 0.0}


def item_intervals(items: pd.DataFrame, score: Mapping) -> dict:
    """ReMI: Wilson per task; Overall (the mean of task accuracies) by Korn-Graubard on the tasks' variances; the
    ERP Overall (a linear function of the task accuracies, each task's naive baseline held at its value) by a t
    interval on the same variances, each task's taken at (hits + 1) / (n + 2) so that it is never 0."""
    iv = Intervals(len(items), {'method': 'wilson per task; korn-graubard over tasks for Overall; t over tasks '
                                          'for the ERP Overall', 'unit': 'items'})
    scored = items[items['kind'].astype(str) != 'failed'].reset_index(drop=True)
    tasks = list(score['accuracy']['task'])
    strata = scored['task'].astype(str).to_numpy()
    detect = None
    for scoring, block in (('official', score), ('lenient', score['lenient'])):
        hits = scored[scoring].astype(str).str.lower().map(_TRUTH).to_numpy(float)
        prefix = [] if scoring == 'official' else ['lenient']
        for t in tasks:
            sel = strata == t
            iv.put([*prefix, 'accuracy', 'task', t], wilson(np.nansum(hits[sel]), int(sel.sum())), int(sel.sum()))
        overall = task_mean(hits, strata, tasks)
        iv.put([*prefix, 'accuracy', 'Overall'], korn_graubard(*overall[:2], overall[3], overall[2], 100.0),
               overall[3])
        if scoring == 'official':
            detect = design_detectable(overall, 100.0)
        iv.put([*prefix, 'erp', 'Overall'], _erp_interval(hits, strata, tasks, block), overall[3])
    return iv.block(detect)


def _erp_interval(hits: np.ndarray, strata: np.ndarray, tasks: Sequence[str], block: Mapping) -> list | None:
    from vlmeval_ext.records.intervals import t_quantile
    given = block['naive_baseline']['task']
    base = {t: given[t] / 100.0 for t in tasks if given.get(t) is not None}
    ok = ~np.isnan(hits)
    used = [t for t in tasks if t in base and base[t] < 1 and (ok & (strata == t)).any()]
    if not used or int(ok.sum()) < 2 or block.get('erp', {}).get('Overall') is None:
        return None
    k = len(used)
    parts, dfs = [], []
    for t in used:
        x = hits[ok & (strata == t)]
        p = (x.sum() + 1) / (len(x) + 2)
        parts.append((100.0 / (k * (1 - base[t]))) ** 2 * p * (1 - p) / len(x))
        dfs.append(max(1, len(x) - 1))
    parts = np.array(parts)
    var = float(parts.sum())
    df = var * var / float((parts ** 2 / np.array(dfs)).sum())
    half = t_quantile(1 - (1 - LEVEL) / 2, df) * math.sqrt(var)
    centre = float(block['erp']['Overall'])
    return [rounded(centre - half), rounded(centre + half)]


def read_headlines(eval_file: Path, tag: str = '') -> list[Headline]:
    items = item_table(Path(stem_path(eval_file, '_items.tsv')))
    tasks = items['task'].to_numpy()
    return [Headline(label, '%', items['index'].tolist(), num(items[scoring]), tasks, np.arange(len(items)),
                     binary=True, groups=tasks)
            for scoring, label in (('official', 'official Overall'), ('lenient', 'lenient Overall'))]


def page_section(title, dataset, eval_file, tag, thumbs) -> Section | None:
    from vlmeval_ext.dataset.utils.remi import split_and_mode
    from vlmeval_ext.dataset.utils.remi import split_at_tags
    items, preds = read_file(stem_path(eval_file, '_items.tsv')), read_file(eval_file)
    if items is None or preds is None:
        return None
    question = dict(zip(preds['index'], preds.get('question', pd.Series([''] * len(preds)))))
    split = split_and_mode(dataset)[0]
    rows = []
    for r in items.to_dict('records'):
        images = thumbs.of(split if benchmark_of(split) else dataset, r['index'])
        text = question.get(r['index'], '')
        try:
            parts = [{'text': v} if kind == 'text' else {'image': v} for kind, v in split_at_tags(text, len(images))]
        except ValueError:
            parts = [{'text': text}]
        rows.append({'index': r['index'], 'task': r['task'], 'question': parts, 'images': images,
                     'answer': r['answer'], 'prediction': dict(zip(preds['index'], preds['prediction'])).get(
                         r['index'], ''), 'official': verdict(r['official']), 'lenient': verdict(r['lenient']),
                     'reading': r.get('status', ''), 'differ': 'official and lenient differ'
                     if verdict(r['official']) != verdict(r['lenient']) else 'agree'})
    columns = [col('index', 'index'), col('task', 'task'), col('question', 'question with its images', 'parts'),
               col('answer', 'label'), col('prediction', 'output'), col('official', 'official'),
               col('lenient', 'lenient'), col('reading', 'why a reading failed')]
    filters = [{'key': k, 'label': k} for k in ('task', 'official', 'lenient', 'differ')]
    return Section(title, 'ReMI', columns, rows, filters)


def naive_answer(prompt_text: str, dataset: str) -> str:
    # The prompt does not name its task unambiguously: one constant, "0" (the EmojiAlgebra / RefCoco baseline).
    # The per-task naive baselines ReMI reports are computed by its evaluate on the same items.
    return json.dumps({'explanation': 'naive baseline', 'answer': '0'})


REPORT = ReMIReport(read_headlines, page_section)
