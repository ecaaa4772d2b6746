"""GRAB's plugin half: what vlmeval-ext adds to the kit-dialect dataset (vlmeval_ext/dataset/grab.py).

Its `Report` (the registry record's `report`): the summary row, the run record, the complexity plot, the 95 %
intervals (Wilson per scoring x task, category and complexity), the items `compare` reads and the report page's
section; `GRABSteps`, what the plugin's dataset class adds to the kit dialect's steps; and `naive_answer`, what
`Naive-Baseline` answers. Kit-free.
"""
from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Mapping

import pandas as pd

from vlmeval_ext.io import stem_path
from vlmeval_ext.plugin.base import Report, read_table, save_figure
from vlmeval_ext.records.compare import Headline, item_table, num, plain
from vlmeval_ext.records.intervals import Intervals, binary, binary_detectable, wilson
from vlmeval_ext.records.plots import model_of_file, new_figure, no_plot_line, run_title
from vlmeval_ext.records.report_html import Section, col, read_file, verdict


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

    LLM_JUDGE = True           # llm_extracted, with --judge

    def judge_arguments(self, judge_kwargs, notes):
        from vlmeval_ext.judging import OFFLINE_JUDGES, JudgeOptionError
        name = judge_kwargs.get('model')
        if 'caption_seed' in judge_kwargs:
            raise JudgeOptionError('--judge-args "caption_seed" is R-Bench\'s (the captions its efficient mode '
                                   'judges); GRAB has no captions to draw')
        if name in OFFLINE_JUDGES:
            judge_kwargs.pop('model')
            notes.append(f"llm_extracted: skipped (--judge {name}: GRAB's answer extraction needs an LLM judge and has "
                         'no offline approximation); official and normalized need no judge')
        return judge_kwargs

    def rule_files(self, dataset, data, eval_file, judge_kwargs):
        from vlmeval_ext.dataset.utils import grab as rules
        files = rules.evaluation_files(rules.item_rows(data, eval_file), {}, None, [rules.NOT_JUDGED_NOTE])
        return files, rules.result_table(files['_score.json'])

    def run_record(self, dataset):
        from vlmeval_ext.dataset.utils import grab as G
        return {'prompts': {'question': G.QUESTION_PROMPT, 'llm_extraction': G.EXTRACTION_PROMPT}}

    def intervals(self, eval_file, score, tag=''):
        return item_intervals(read_table(stem_path(eval_file, '_items.tsv')))

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        return [leaf(score.get('ci95'), [s, 'Overall']) for s in self.SCORINGS if isinstance(score.get(s), dict)]

    def write_extras(self, dataset, eval_file, score, tag='', model=''):
        model = model or model_of_file(eval_file, dataset)
        plot_path = stem_path(eval_file, '_complexity.png')
        counts, judge = score['counts'], score.get('judge')
        judge_text = f'{judge["name"]} (llm_extracted)' if judge else 'none (official and normalized are rule-based)'
        title = run_title(dataset, model, judge_text, counts['items'], counts['scored'])
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
    fig = new_figure(figsize=(5 * len(scorings), 4.3))
    axes = fig.subplots(1, len(scorings), squeeze=False, sharey=True)
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
    save_figure(fig, path, title, dpi=100)
    return True


def item_intervals(items: pd.DataFrame) -> dict:
    """GRAB: Wilson per scoring x (Overall, task, category, complexity) from `_items.tsv`."""
    scorings = [s for s in ('official', 'normalized', 'llm_extracted') if s in items]
    iv = Intervals(len(items), {'method': 'wilson', 'unit': 'items'})
    for scoring in scorings:
        hits = binary(items, scoring)
        scored = hits.notna()
        iv.put([scoring, 'Overall'], wilson(hits[scored].sum(), int(scored.sum())), int(scored.sum()))
        for dim in ('task', 'category', 'complexity'):
            for group, part in hits[scored].groupby(items.loc[scored, dim].astype(str), sort=False):
                iv.put([scoring, dim, group], wilson(part.sum(), len(part)), len(part))
    return iv.block(binary_detectable(binary(items, 'official')) if 'official' in items else None)


def read_headlines(eval_file: Path, tag: str = '') -> list[Headline]:
    items = item_table(Path(stem_path(eval_file, '_items.tsv')))
    keys = items['index'].tolist()
    return [plain(f'{s} Overall', '%', keys, num(items[s]), judged=s == 'llm_extracted')
            for s in ('official', 'normalized', 'llm_extracted') if s in items and items[s].ne('').any()]


def page_section(title, dataset, eval_file, tag, thumbs) -> Section | None:
    items = read_file(stem_path(eval_file, '_items.tsv'))
    if items is None:
        return None
    rows = [{'index': r['index'], 'images': thumbs.of(dataset, r['index']), 'links': [thumbs.full_image(
        dataset, r['index'])], 'task': r['task'], 'category': r['category'], 'complexity': r['complexity'],
        'question': r['question'], 'answer': r['answer'], 'prediction': r['prediction'],
        'read': r.get('parsed', ''), 'extracted': r.get('extracted', ''), 'official': verdict(r.get('official')),
        'normalized': verdict(r.get('normalized')), 'llm_extracted': verdict(r.get('llm_extracted', ''))}
        for r in items.to_dict('records')]
    columns = [col('index', 'index'), col('images', 'plot', 'images'), col('task', 'task'),
               col('category', 'category'), col('complexity', 'complexity'), col('question', 'question'),
               col('answer', 'answer'), col('prediction', "the model's text"),
               col('read', 'normalized read'), col('extracted', 'llm extracted'), col('official', 'official'),
               col('normalized', 'normalized'), col('llm_extracted', 'llm_extracted')]
    filters = [{'key': k, 'label': k} for k in ('task', 'category', 'complexity', 'official', 'normalized')]
    return Section(title, 'GRAB', columns, rows, filters)


class GRABSteps:
    """GRAB's steps in front of the plugin's common ones: `datasets.plugin_class_of` puts this class before
    `PluginDataset` and the kit-dialect `GRAB`. The llm_extracted judge is a CachedJudge, and the calls it is about to
    make are counted before judging. Kit-free to import; the methods run where the kit runs the dataset."""

    def score(self, eval_file, handed):
        from vlmeval_ext.dataset.utils.exact_io import NO_JUDGE
        self._handed = handed
        kwargs = dict(handed)
        name, protocol = self.judge_protocol(kwargs)
        judge = None if name in NO_JUDGE else self.cached_judge(name, kwargs)
        return self.evaluate_with(eval_file, judge, name, **protocol)

    def judge_requests(self, eval_file, judge, name):
        from vlmeval.smp import get_intermediate_file_path

        from vlmeval_ext.dataset.utils import grab as rules
        from vlmeval_ext.dataset.utils.exact_io import is_infer_fail, judge_id, read_text_table
        from vlmeval_ext.io import read_progress
        done = read_progress(get_intermediate_file_path(eval_file, '_grab_extraction', 'pkl'))
        if done is None:
            return None
        rows = [{'index': item['index'], 'question': item['question'], 'prediction': item['prediction'],
                 'answer': rules.answer_text(item['answer'], item['question']),
                 'failed': True if is_infer_fail(item['prediction']) else None}
                for item in read_text_table(eval_file).to_dict('records')]
        mode = self._handed.get('judge_mode', 'official')
        _, todo = rules.extraction_requests(rows, done, judge_id(name, judge), mode)
        return [(rules.extraction_prompt(q, p), 1) for q, p in todo.values()], len(rows), False


def naive_answer(prompt_text: str, dataset: str) -> str:
    """Zero in the form and precision the question asks for ("0", "0.0", "[0, 0]", "y = 0x + 0")."""
    from vlmeval_ext.dataset.utils.grab import parse_precision
    template = re.search(r'in the form (.+?)(?:, where|\. )', prompt_text)
    if template and '<' in template.group(1):
        return re.sub(r'<[^>]+>', '0', template.group(1)).rstrip('.')
    if template and template.group(1).startswith('['):
        return '[0, 0]'
    precision = parse_precision(prompt_text)
    return f'{Decimal(0):.{precision.decimals}f}' if precision.decimals else '0'


REPORT = GRABReport(read_headlines, page_section)
