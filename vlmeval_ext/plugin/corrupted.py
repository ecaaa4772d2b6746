"""`<Dataset>-RC`'s plugin half (the corruption engine, vlmeval_ext.corrupt, builds the datasets).

Its `Report`: the summary row, the 95 % intervals (Korn-Graubard within strength) of reference, absolute and
relative, the pairs `compare` reads and the report page's section. Kit-free.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from vlmeval_ext.io import stem_path
from vlmeval_ext.plugin.base import Report, read_table
from vlmeval_ext.records.compare import Headline, item_table, num, plain
from vlmeval_ext.records.intervals import design_detectable, robustness
from vlmeval_ext.records.report_html import Section, col, number, read_file


class CorruptedReport(Report):
    HEADLINE = (('reference Overall', ('reference', 'Overall'), '0-1'),
                ('relative Overall', ('relative', 'Overall'), '0-1'))

    def intervals(self, eval_file, score, tag=''):
        return item_intervals(read_table(stem_path(eval_file, '_rc_scores.csv')))

    def summary_row(self, score):
        return {'base dataset': score['base_dataset'], 'task': score['task'],
                'reference Overall (0-1)': score['reference']['Overall'],
                'absolute Overall (0-1)': score['absolute']['Overall'],
                'relative Overall (0-1)': score['relative']['Overall'],
                'pairs': score['pairs'], 'judge': f"{score['judge']['name']}"}


def item_intervals(scores: pd.DataFrame) -> dict:
    """`<Dataset>-RC` from `_rc_scores.csv`: reference, absolute, relative, stratified by strength."""
    from vlmeval_ext.dataset.utils.rbench_full import dimension_order, dimensions_of
    task = str(scores['type'].iloc[0]) if len(scores) else ''
    num = {c: pd.to_numeric(scores[c], errors='coerce') for c in ('score_ref', 'score_dis', 'score_com')}
    metrics = {'reference': lambda f: num['score_ref'].to_numpy(float),
               'absolute': lambda f: num['score_dis'].to_numpy(float),
               'relative': lambda f: (num['score_com'] * num['score_ref']).to_numpy(float)}
    iv, overall = robustness(scores, metrics, dimension_order((task,)), dimensions_of,
                             scores['strength'].astype(str).to_numpy(), 'strength')
    return iv.block(design_detectable(overall['absolute']))


def read_headlines(eval_file: Path, tag: str = '') -> list[Headline]:
    rows = item_table(Path(stem_path(eval_file, '_rc_scores.csv')))
    keys = (rows['pair_id'] + '|' + rows['distortion'] + '|' + rows['strength']).tolist()
    ref, dis, com = (num(rows[f'score_{k}']) for k in ('ref', 'dis', 'com'))
    strata = rows['strength'].to_numpy()
    # judged: the base dataset's scoring, a judge's where it has one
    return [plain(n, '0-1', keys, v, strata, binary=False, judged=True) for n, v in
            (('reference Overall', ref), ('absolute Overall', dis), ('relative Overall', com * ref))]


def page_section(title, dataset, eval_file, tag, thumbs) -> Section | None:
    from vlmeval_ext.dataset.utils.rbench_full import DISTORTIONS, STRENGTHS
    scores, preds = read_file(stem_path(eval_file, '_rc_scores.csv')), read_file(eval_file)
    if scores is None or preds is None:
        return None
    ref_rows = {r['pair_id']: r for r in preds.to_dict('records') if r.get('variant') == 'ref'}
    dis_rows = {(r['pair_id'], r['distortion'], r['strength']): r for r in preds.to_dict('records')
                if r.get('variant') != 'ref'}
    rows = []
    for s in scores.to_dict('records'):
        ref = ref_rows.get(s['pair_id'], {})
        dis = dis_rows.get((s['pair_id'], s['distortion'], s['strength']), {})
        name, step, group = DISTORTIONS.get(int(float(s['distortion'])), ('?', '?', '?'))
        rows.append({'item': s['pair_id'], 'distortion': f'{name} ({step}, {group})',
                     'strength': STRENGTHS.get(int(float(s['strength'])), '?'),
                     'images': [*thumbs.of(dataset, ref.get('index')), *thumbs.of(dataset, dis.get('index'))],
                     'question': ref.get('question', ''), 'pred_ref': ref.get('prediction', ''),
                     'pred_dis': dis.get('prediction', ''), 'score_ref': number(s['score_ref']),
                     'score_dis': number(s['score_dis'])})
    columns = [col('item', 'item'), col('distortion', 'distortion'), col('strength', 'strength'),
               col('images', 'reference | corrupted', 'images'), col('question', 'question'),
               col('pred_ref', 'answer on the reference'), col('pred_dis', 'answer on the corrupted'),
               col('score_ref', 'score ref', 'number'), col('score_dis', 'score corrupted', 'number')]
    return Section(title, '<Dataset>-RC', columns, rows, [{'key': 'distortion', 'label': 'distortion'},
                                                          {'key': 'strength', 'label': 'strength'}])


REPORT = CorruptedReport(read_headlines, page_section)
