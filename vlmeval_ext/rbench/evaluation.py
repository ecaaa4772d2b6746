"""From a kit predictions file to R-Bench per-item scores (pure: no kit import; dataset.py binds the judge).

The predictions file has one row per (item, variant): the TSV columns without the image, plus `prediction`.
Rows are paired by pair_id. An inference failure (the kit's 'Failed to obtain answer ...' text, or an empty
prediction) or a missing partner row leaves the scores that need that output failed (None, excluded from means,
counted), never 0: dis needs the distorted output, ref the reference output, com both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from vlmeval_ext.core.io import DataError
from vlmeval_ext.rbench.report import TASKS
from vlmeval_ext.rbench.score import SCORE_KINDS, Item, make_tasks, plan_tasks

PREDICTION_COLUMNS = ('index', 'pair_id', 'variant', 'type', 'distortion', 'strength', 'answer', 'prediction')
# The kit's API wrappers answer 'Failed to obtain answer via API.' when every retry failed.
INFER_FAIL_MARKERS = ('Failed to obtain answer',)
NEEDS = {'dis': ('pred_dis',), 'ref': ('pred_ref',), 'com': ('pred_ref', 'pred_dis')}


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _text(value) -> str:
    """A cell as text; numbers read back from a spreadsheet ('2' -> 2.0) get their plain form again."""
    if _missing(value):
        return ''
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _int(value, path, row: int, column: str, lo: int, hi: int) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(f'{path}: row {row}, column {column!r}: {value!r} is not an integer') from None
    if math.isnan(number) or not number.is_integer() or not lo <= number <= hi:
        raise DataError(f'{path}: row {row}, column {column!r}: {value!r} is not an integer in {lo}-{hi}')
    return int(number)


@dataclass
class Pairing:
    items: list[Item]
    infer_failed: int = 0            # rows whose prediction is the kit's failure text or empty
    missing_partner: int = 0         # items with only one of their two rows in the file
    failed_rows: list = field(default_factory=list)   # (index, reason) for the report


def pair_predictions(records: Sequence[Mapping], path='predictions',
                     fail_markers: Sequence[str] = INFER_FAIL_MARKERS) -> Pairing:
    """Predictions rows -> one Item per pair_id with pred_ref / pred_dis (None where failed or missing)."""
    by_pair: dict[int, dict] = {}
    pairing = Pairing(items=[])
    for i, rec in enumerate(records):
        row = i + 2                           # spreadsheet line (header is line 1)
        variant = _text(rec.get('variant')).strip()
        if variant not in ('ref', 'dis'):
            raise DataError(f'{path}: row {row}, column \'variant\': {rec.get("variant")!r} is not ref or dis')
        task = _text(rec.get('type')).strip()
        if task not in TASKS:
            raise DataError(f'{path}: row {row}, column \'type\': {rec.get("type")!r} is not one of {TASKS}')
        pair_id = _int(rec.get('pair_id'), path, row, 'pair_id', 0, 10 ** 9)
        entry = by_pair.setdefault(pair_id, {'rows': {}, 'first_row': row})
        if variant in entry['rows']:
            raise DataError(f'{path}: row {row}: pair_id {pair_id} has a second {variant!r} row '
                            f'(first at row {entry["rows"][variant][1]})')
        entry['rows'][variant] = (rec, row)
        prediction = rec.get('prediction')
        if _missing(prediction) or not str(prediction).strip():
            pairing.infer_failed += 1
            pairing.failed_rows.append((rec.get('index'), 'empty prediction'))
        elif any(m in str(prediction) for m in fail_markers):
            pairing.infer_failed += 1
            pairing.failed_rows.append((rec.get('index'), 'inference failed'))
    for pair_id in sorted(by_pair):
        rows = by_pair[pair_id]['rows']
        if len(rows) < 2:
            pairing.missing_partner += 1
            missing = 'dis' if 'ref' in rows else 'ref'
            pairing.failed_rows.append((pair_id, f'pair_id {pair_id}: no {missing} row'))
        rec, row = rows.get('ref') or rows['dis']
        for variant, (other, other_row) in rows.items():
            for column in ('type', 'distortion', 'strength', 'answer'):
                if _text(other.get(column)) != _text(rec.get(column)):
                    raise DataError(f'{path}: row {other_row}, column {column!r}: {other.get(column)!r} differs '
                                    f'from its partner row {row} ({rec.get(column)!r}) of pair_id {pair_id}')

        def output(variant):
            if variant not in rows:
                return None
            value = rows[variant][0].get('prediction')
            if _missing(value) or not str(value).strip() or any(m in str(value) for m in fail_markers):
                return None
            return str(value)
        pairing.items.append(Item(
            pair_id=pair_id, type=_text(rec.get('type')).strip(), question=_text(rec.get('question')),
            choice=_text(rec.get('choice')), answer=_text(rec.get('answer')),
            distortion=_int(rec.get('distortion'), path, row, 'distortion', 1, 33),
            strength=_int(rec.get('strength'), path, row, 'strength', 1, 3),
            pred_ref=output('ref'), pred_dis=output('dis'), name=_text(rec.get('name'))))
    return pairing


def scorable_kinds(item: Item) -> list[str]:
    """The scores whose model outputs exist (the others are inference failures)."""
    return [k for k in SCORE_KINDS if all(getattr(item, attr) is not None for attr in NEEDS[k])]


def judge_tasks(items: Sequence[Item], dataset: str, mode: str):
    """(tasks to run, {aliased key: source key}) for every scorable score of every item."""
    tasks = []
    for item in items:
        kinds = scorable_kinds(item)
        if kinds:
            tasks.extend(make_tasks(item, dataset=dataset, mode=mode, kinds=kinds))
    return plan_tasks(tasks)


def score_rows(items: Sequence[Item], score_of: Callable[[Item, str], float | None]) -> list[dict]:
    """Per-item rows (report.SCORE_COLUMNS + pair_id); score_of(item, kind) -> score or None (failed)."""
    rows = []
    for item in items:
        kinds = set(scorable_kinds(item))
        row = {'pair_id': item.pair_id, 'name': item.name, 'type': item.type, 'distortion': item.distortion,
               'strength': item.strength}
        for kind in SCORE_KINDS:
            row[f'score_{kind}'] = score_of(item, kind) if kind in kinds else None
        rows.append(row)
    return rows


def judge_summary(n_items: int, mode: str, name: str, *, calls_made: int = 0, calls_cached: int = 0,
                  decided_without_judge: int = 0, reused_verdicts: int = 0, judge_failed: int = 0,
                  infer_failed: int = 0, missing_partner: int = 0, label: str | None = None,
                  failed_scores: Mapping | None = None) -> dict:
    """The `judge` block of <stem>_score.json."""
    calls = calls_made + calls_cached
    return {'model': name, 'mode': mode, 'label': label or name,
            'calls': calls, 'calls_made': calls_made, 'calls_cached': calls_cached,
            'calls_per_item': round(calls / n_items, 4) if n_items else None,
            'decided_without_judge': decided_without_judge, 'reused_verdicts': reused_verdicts,
            'failures': {'judge_failed_scores': judge_failed, 'inference_failed_rows': infer_failed,
                         'missing_partner_items': missing_partner,
                         'excluded_scores': dict(failed_scores or {})},
            'items': n_items}
