"""From a kit predictions file to R-Bench per-item scores (pure: no kit import; dataset.py binds the judge).

The predictions file has one row per (item, variant): the TSV columns without the image, plus `prediction`, every
cell text (vlmeval_ext.core.io.read_table). Rows are paired by pair_id. What a prediction is, is decided by
vlmeval_ext.core.predictions: the kit's exact failure text, or a missing partner row, leaves the scores that need
that output failed (None, excluded from means, counted, re-asked by the kit's rerun), never 0: dis needs the
distorted output, ref the reference output, com both.

An empty output is an answer. The official protocol (R-Bench-Script.ipynb) sends every output, whatever the model
said, to the GPT judge, so an empty output is judged like any other (against a ground truth the judge gives it 0;
for com, two outputs are compared as they are). Scoring it 0 without a call would save a few calls but would
decide com for the judge; we keep the protocol and count empty outputs (`empty`) in every table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from vlmeval_ext.core.io import DataError, int_cell
from vlmeval_ext.core.predictions import EMPTY, FAILED, classify_prediction, prediction_text
from vlmeval_ext.rbench.report import TASKS
from vlmeval_ext.rbench.score import SCORE_KINDS, Item, make_tasks, plan_tasks

PREDICTION_COLUMNS = ('index', 'pair_id', 'variant', 'type', 'distortion', 'strength', 'answer', 'prediction')
NEEDS = {'dis': ('pred_dis',), 'ref': ('pred_ref',), 'com': ('pred_ref', 'pred_dis')}


def _text(value) -> str:
    """A text cell as it is ('' for a column the file does not have)."""
    if value is None:
        return ''
    if not isinstance(value, str):
        raise TypeError(f'expected a text cell, got {type(value).__name__}: {value!r}')
    return value


@dataclass
class Pairing:
    items: list[Item]
    rows: int = 0                    # predictions rows read
    infer_failed: int = 0            # rows whose prediction is the kit's failure text (not scored)
    empty: int = 0                   # rows whose prediction is empty (an answer: judged like any other)
    missing_partner: int = 0         # items with only one of their two rows in the file
    failed_rows: list = field(default_factory=list)   # (index, reason) for the report


def pair_predictions(records: Sequence[Mapping], path='predictions') -> Pairing:
    """Predictions rows -> one Item per pair_id with pred_ref / pred_dis (None where failed or missing)."""
    by_pair: dict[int, dict] = {}
    pairing = Pairing(items=[])
    for i, rec in enumerate(records):
        row = i + 2                           # spreadsheet line (header is line 1)
        pairing.rows += 1
        variant = _text(rec.get('variant')).strip()
        if variant not in ('ref', 'dis'):
            raise DataError(f'{path}: row {row}, column \'variant\': {rec.get("variant")!r} is not ref or dis')
        task = _text(rec.get('type')).strip()
        if task not in TASKS:
            raise DataError(f'{path}: row {row}, column \'type\': {rec.get("type")!r} is not one of {TASKS}')
        pair_id = int_cell(rec.get('pair_id'), path, row, 'pair_id', 0, 10 ** 9)
        entry = by_pair.setdefault(pair_id, {'rows': {}, 'first_row': row})
        if variant in entry['rows']:
            raise DataError(f'{path}: row {row}: pair_id {pair_id} has a second {variant!r} row '
                            f'(first at row {entry["rows"][variant][1]})')
        entry['rows'][variant] = (rec, row)
        kind = classify_prediction(rec.get('prediction'))
        if kind == FAILED:
            pairing.infer_failed += 1
            pairing.failed_rows.append((rec.get('index'), 'inference failed'))
        elif kind == EMPTY:
            pairing.empty += 1
    for pair_id in sorted(by_pair):
        rows = by_pair[pair_id]['rows']
        if len(rows) < 2:
            pairing.missing_partner += 1
            missing = 'dis' if 'ref' in rows else 'ref'
            pairing.failed_rows.append((pair_id, f'pair_id {pair_id}: no {missing} row'))
        rec, row = rows.get('ref') or rows['dis']
        for variant, (other, other_row) in rows.items():
            for column in ('type', 'distortion', 'strength', 'answer'):
                same = (int_cell(other.get(column), path, other_row, column) == int_cell(rec.get(column), path, row, column)
                        if column in ('distortion', 'strength') else _text(other.get(column)) == _text(rec.get(column)))
                if not same:
                    raise DataError(f'{path}: row {other_row}, column {column!r}: {other.get(column)!r} differs '
                                    f'from its partner row {row} ({rec.get(column)!r}) of pair_id {pair_id}')

        def output(variant):
            if variant not in rows:
                return None
            value = rows[variant][0].get('prediction')
            return None if classify_prediction(value) == FAILED else prediction_text(value)
        pairing.items.append(Item(
            pair_id=pair_id, type=_text(rec.get('type')).strip(), question=_text(rec.get('question')),
            choice=_text(rec.get('choice')), answer=_text(rec.get('answer')),
            distortion=int_cell(rec.get('distortion'), path, row, 'distortion', 1, 33),
            strength=int_cell(rec.get('strength'), path, row, 'strength', 1, 3),
            pred_ref=output('ref'), pred_dis=output('dis'), name=_text(rec.get('name'))))
    return pairing


def run_counts(pairing: Pairing, rows: Sequence[Mapping], judge_failed: int) -> dict:
    """The `counts` block of <stem>_score.json: items (pairs), rows, items with every score, empty outputs and
    inference failures (rows), items missing a partner row, judge-failed scores."""
    complete = sum(all(r[f'score_{k}'] is not None for k in SCORE_KINDS) for r in rows)
    return {'items': len(pairing.items), 'rows': pairing.rows,
            'scored': complete, 'empty': pairing.empty, 'inference_failures': pairing.infer_failed,
            'missing_partner': pairing.missing_partner, 'judge_failures': judge_failed}


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
                  failed_scores: Mapping | None = None, endpoint_host: str | None = None) -> dict:
    """The `judge` block of <stem>_score.json."""
    calls = calls_made + calls_cached
    return {'model': name, 'name': name, 'mode': mode, 'endpoint_host': endpoint_host, 'label': label or name,
            'calls': calls, 'calls_made': calls_made, 'calls_cached': calls_cached,
            'calls_per_item': round(calls / n_items, 4) if n_items else None,
            'decided_without_judge': decided_without_judge, 'reused_verdicts': reused_verdicts,
            'failures': {'judge_failed_scores': judge_failed, 'inference_failed_rows': infer_failed,
                         'missing_partner_items': missing_partner,
                         'excluded_scores': dict(failed_scores or {})},
            'items': n_items}
