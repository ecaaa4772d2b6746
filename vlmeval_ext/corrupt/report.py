"""`<Dataset>-RC` report: R-Bench's robustness tables over the paired rows, the Markdown report and the summary
row (pure: no kit import)."""
from __future__ import annotations

import json
from typing import Mapping, Sequence

from vlmeval_ext.distortions import approximations
from vlmeval_ext.dataset.utils.rbench_full import GROUPS, STEPS, absolute, relative, robustness_table
from vlmeval_ext.predictions import is_missing


def reference(row: Mapping) -> float | None:
    """The reference row's score of a pair (None: failed)."""
    value = row.get('score_ref')
    return None if is_missing(value) else float(value)


RC_METRICS = {'reference': reference, 'absolute': absolute, 'relative': relative}


def rc_table(rows: Sequence[Mapping], task: str) -> dict[str, dict[str, float | None]]:
    """{metric: {dimension: mean}} over Overall, low/mid/high, the 7 steps and 7 groups (R-Bench's taxonomy)
    and the task x strength cells (task = the base dataset's evaluator: MCQ, Y/N or VQA)."""
    return robustness_table(rows, RC_METRICS, tasks=(task,), task_field='type')


def _fmt(value) -> str:
    return '-' if value is None else f'{value:.4f}'


def markdown_report(name: str, task: str, table: Mapping, per_variant: Mapping, failures: Mapping,
                    relative_mode: str, judge: Mapping, note: str | None) -> str:
    """Per-variant counts, then R-Bench's table layout (metrics x low/mid/high/Overall), its step and group
    tables, and the failures."""
    def block(title, dims):
        lines = [f'| {title} | ' + ' | '.join(dims) + ' |', '|' + '---|' * (len(dims) + 1)]
        for metric, values in table.items():
            lines.append(f'| {metric} | ' + ' | '.join(_fmt(values.get(d)) for d in dims) + ' |')
        return lines + ['']

    out = [f'# {name}: paired robustness ({task})', '',
           f'Judge: {judge["name"]} ({judge["mode"]}).', '',
           f'Relative robustness = score_com x score_ref per pair, score_com = {relative_mode}.', '',
           'Empty answers are answers: scored by the base dataset\'s rule and counted under `empty`.', '',
           '| variant | base metric (kit) | mean score (scored rows) | scored | empty | failed |',
           '|---|---|---|---|---|---|']
    for tag, v in per_variant.items():
        kit = '-' if v['kit_metric'] is None else f'{v["kit_metric"]:.4f}'
        out.append(f'| {tag} | {kit} | {_fmt(v["mean"])} | {v["scored"]} | {v["empty"]} | {v["failed"]} |')
    out += ['', *block('strength', ['low', 'mid', 'high', 'Overall']), *block('step', STEPS),
            *block('group', GROUPS)]
    out.append('Failures (excluded from every mean): ' + json.dumps(failures, sort_keys=True))
    if note:
        out += ['', f'**Note:** {note}']
    return '\n'.join(out) + '\n'


def approximation_note(distortions: Sequence[int]) -> str | None:
    used = sorted(set(int(d) for d in distortions) & set(approximations()))
    if not used:
        return None
    return ('Distortions ' + ', '.join(map(str, used)) + ' are synthetic approximations of R-Bench\'s real '
            'captures / CNN denoiser (see dataset_specs/corrupt.yaml); their numbers are not R-Bench\'s.')
