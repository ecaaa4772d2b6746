"""RoCOCO-MCQ's plugin half: what vlmeval-ext adds to the kit-dialect dataset (vlmeval_ext/dataset/rococo_mcq.py).

Its `Report`: the summary row, the run record (seed, prompt), the 95 % intervals (Wilson for accuracy and the twin
rate), the items `compare` reads and the report page's section; and `naive_answer`, what `Naive-Baseline`
answers. Kit-free.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from vlmeval_ext.io import stem_path
from vlmeval_ext.plugin.base import Report, read_table
from vlmeval_ext.records.compare import Headline, item_table, plain
from vlmeval_ext.records.intervals import Intervals, binary_detectable, wilson
from vlmeval_ext.records.report_html import Section, col, read_file


class RoCOCOMCQReport(Report):
    HEADLINE = (('accuracy', ('accuracy',), '%'),)

    def intervals(self, eval_file, score, tag=''):
        return item_intervals(read_table(stem_path(eval_file, '_items.tsv')))

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        return [leaf(score.get('ci95'), ['accuracy'])]

    def summary_row(self, score):
        return {'attack': score.get('attack'), 'accuracy (%)': score['accuracy'],
                'adversarial twin chosen (%)': score['twin_rate'], 'chance (%)': score.get('chance'),
                'answered': score['n'], 'items': score.get('n_items', score['n'])}

    def rule_files(self, dataset, data, eval_file, judge_kwargs):
        from vlmeval_ext.dataset.utils import rococo_mcq as rules
        files = rules.evaluation_files(data, eval_file, dataset)
        return files, rules.result_table(dataset, files['_score.json'])

    def run_record(self, dataset):
        from vlmeval_ext.dataset.utils import rococo_mcq as Q
        from vlmeval_ext.prepare.rococo import MCQ_SEED
        return {'judge': {'model': 'none (rule-based: a stated capital letter, else the text of exactly one '
                                   'option)', 'mode': 'rule', 'retries': 0, 'endpoint_host': None},
                'seeds': {'mcq_options': MCQ_SEED},
                'prompts': {'mcq': Q.prompt_text({'question': Q.QUESTION, 'A': '{A}', 'B': '{B}', 'C': '{C}',
                                                  'D': '{D}'})}}


def item_intervals(items: pd.DataFrame) -> dict:
    """RoCOCO-MCQ: Wilson for accuracy and the twin rate over the answered items (inference failures left out)."""
    answered = items[items['how'].astype(str) != 'inference_failed']
    n = len(answered)
    iv = Intervals(n, {'method': 'wilson', 'unit': 'items'})
    right = (answered['choice'].astype(str) == answered['answer'].astype(str)).astype(float)
    twin = (answered['choice'].astype(str) == answered['twin'].astype(str)).astype(float)
    iv.put(['accuracy'], wilson(right.sum(), n), n)
    iv.put(['twin_rate'], wilson(twin.sum(), n), n)
    return iv.block(binary_detectable(right.to_numpy()))


def read_headlines(eval_file: Path, tag: str = '') -> list[Headline]:
    items = item_table(Path(stem_path(eval_file, '_items.tsv')))
    keys = items['index'].tolist()
    failed = (items['how'] == 'inference_failed').to_numpy()
    right = np.where(failed, np.nan, (items['choice'] == items['answer']).to_numpy(float))
    twin = np.where(failed, np.nan, (items['choice'] == items['twin']).to_numpy(float))
    return [plain('accuracy', '%', keys, right), plain('twin rate', '%', keys, twin)]


def page_section(title, dataset, eval_file, tag, thumbs) -> Section | None:
    items, preds = read_file(stem_path(eval_file, '_items.tsv')), read_file(eval_file)
    if items is None or preds is None:
        return None
    options = {r['index']: r for r in preds.to_dict('records')}
    rows = []
    for r in items.to_dict('records'):
        p = options.get(r['index'], {})
        marked = [f"{c}. {p.get(c, '')}" + (' [correct]' if c == r['answer'] else ' [adversarial twin]'
                                            if c == r['twin'] else '') for c in 'ABCDE' if p.get(c)]
        outcome = ('right' if r['choice'] == r['answer'] else 'adversarial twin' if r['choice'] == r['twin']
                   else 'not read' if not r['choice'] else 'another caption')
        rows.append({'index': r['index'], 'images': thumbs.of(dataset, r['index']), 'links': [
            thumbs.full_image(dataset, r['index'])], 'options': marked, 'prediction': r.get('prediction', ''),
            'choice': r['choice'], 'how': r['how'], 'outcome': outcome})
    columns = [col('index', 'index'), col('images', 'image', 'images'), col('options', 'options', 'list'),
               col('prediction', 'reply'), col('choice', 'choice read'), col('how', 'read how'),
               col('outcome', 'outcome')]
    return Section(title, 'RoCOCO-MCQ', columns, rows, [{'key': 'outcome', 'label': 'outcome'},
                                                        {'key': 'how', 'label': 'read how'}])


def naive_answer(prompt_text: str, dataset: str) -> str:
    return 'A'


REPORT = RoCOCOMCQReport(read_headlines, page_section)
