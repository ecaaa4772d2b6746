"""RoCOCO rows for the end-of-run summary (pure)."""
from __future__ import annotations

from typing import Mapping


def mcq_summary_row(score: Mapping) -> dict:
    """One RoCOCO-MCQ _score.json: percent of answered items."""
    return {'attack': score.get('attack'), 'accuracy (%)': score['accuracy'],
            'adversarial twin chosen (%)': score['twin_rate'], 'chance (%)': score.get('chance'),
            'answered': score['n'], 'items': score.get('n_items', score['n'])}


def retrieval_summary_row(score: Mapping) -> dict:
    """One RoCOCO retrieval _score.json: recall at K in percent, as in the paper."""
    row = {'direction': score.get('direction'), 'images': score.get('n_images'), 'texts': score.get('n_texts')}
    for name, value in (score.get('metrics') or {}).items():
        if isinstance(value, (int, float)) or value is None:
            row[f'{name} (%)'] = value
    return row


def mcq_result_table(dataset: str, score: Mapping) -> 'pd.DataFrame':
    """What RoCOCO-MCQ's evaluate returns (and the kit prints): percent of scored items, and the item counts."""
    from vlmeval_ext.core.kit_table import result_table
    return result_table('RoCOCO-MCQ', {dataset: {
        'accuracy (%)': score['accuracy'], 'adversarial twin chosen (%)': score['twin_rate'],
        'chance (%)': score['chance'], 'scored (items)': score['n'], 'unparsed, wrong (items)': score['unparsed'],
        'empty, wrong (items)': score['empty'], 'inference failed, excluded (items)': score['inference_failed']}})


def retrieval_result_table(dataset: str, table: 'pd.DataFrame') -> 'pd.DataFrame':
    """What RoCOCO retrieval's evaluate returns (and the kit prints): recall at K and the false rate, in percent,
    per mixing seed (T2I) and their mean."""
    from vlmeval_ext.core.kit_table import result_table
    names = {'R@1': 'R@1 (%)', 'R@5': 'R@5 (%)', 'R@10': 'R@10 (%)', 'R_mean': 'R_mean (%)',
             'false_rate': 'false rate (%)'}
    records = table.to_dict('records')
    records = records[-1:] + records[:-1]          # the mean (or the only row) first: the headline
    rows = {('this run' if str(r['seed']) == '-' else str(r['seed'])): {label: r[key] for key, label in names.items()}
            for r in records}
    return result_table(dataset, rows)
