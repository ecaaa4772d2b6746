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
