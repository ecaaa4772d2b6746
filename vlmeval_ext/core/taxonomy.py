"""R-Bench's 33 real-world distortions, their 7 steps, 7 groups and 3 strengths (pure, no kit import).

The one source is the `distortions` table of dataset_specs/rbench.yaml (its `steps` and `groups` lists must agree
with it; `taxonomy` checks). R-Bench's report, the corruption engine and every `<Dataset>-RC` report read it here.

`robustness_table` averages any per-item rows carrying `distortion`, `strength` and, optionally, a task column
over every dimension: Overall, each task, low/mid/high, the steps, the groups and the task x strength cells.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from vlmeval_ext.core.aggregate import grouped_mean
from vlmeval_ext.core.spec import load_spec

DISTORTION_IDS = tuple(range(1, 34))
STRENGTHS = (1, 2, 3)


def distortion_table(spec: Mapping | None = None) -> dict[int, dict]:
    """{id: {'name', 'step', 'group'}} for ids 1..33, from the spec's `distortions` table."""
    spec = spec or load_spec('rbench')
    raw = spec.get('distortions')
    if not isinstance(raw, list):
        raise ValueError('dataset_specs/rbench.yaml: `distortions` must be a list of {id, name, step, group}')
    table = {}
    for row in raw:
        if not isinstance(row, dict) or not {'id', 'name', 'step', 'group'} <= set(row):
            raise ValueError(f'dataset_specs/rbench.yaml distortions: {row!r} needs id, name, step and group')
        table[int(row['id'])] = {'name': row['name'], 'step': row['step'], 'group': row['group']}
    if sorted(table) != list(DISTORTION_IDS):
        raise ValueError('dataset_specs/rbench.yaml: distortions must be ids 1..33 exactly')
    return table


def taxonomy(spec: Mapping | None = None) -> dict:
    """{'strengths': {1: 'low', ...}, 'steps': [...], 'groups': [...], 'step_of': {id: step}, 'group_of': {...},
    'distortions': {id: name}}; checks that the steps and groups lists agree with the distortion table."""
    spec = spec or load_spec('rbench')
    table = distortion_table(spec)
    step_of = {i: d['step'] for i, d in table.items()}
    group_of = {i: d['group'] for i, d in table.items()}
    for kind, listing, of in (('steps', spec['steps'], step_of), ('groups', spec['groups'], group_of)):
        for entry in listing:
            for i in entry['ids']:
                if of[int(i)] != entry['name']:
                    raise ValueError(f'rbench spec: {kind} lists distortion {i} under {entry["name"]} but the '
                                     f'distortion table says {of[int(i)]}')
        covered = sorted(int(i) for e in listing for i in e['ids'])
        if covered != list(DISTORTION_IDS):
            raise ValueError(f'rbench spec: {kind} must cover distortions 1..33 once each')
    return {'strengths': {int(k): v for k, v in spec['strengths'].items()},
            'steps': [e['name'] for e in spec['steps']], 'groups': [e['name'] for e in spec['groups']],
            'step_of': step_of, 'group_of': group_of, 'distortions': {i: d['name'] for i, d in table.items()}}


def dimension_order(tasks: Sequence[str] = (), spec: Mapping | None = None) -> list[str]:
    """Overall, the tasks, low/mid/high, the 7 steps, the 7 groups, then task x strength cells."""
    tax = taxonomy(spec)
    strengths = [tax['strengths'][k] for k in sorted(tax['strengths'])]
    cells = [f'{t}-{s}' for t in tasks for s in strengths]
    return ['Overall', *tasks, *strengths, *tax['steps'], *tax['groups'], *cells]


def dimensions_of(row: Mapping, tax: Mapping, task_field: str | None = 'type') -> list[str]:
    """Every dimension an item counts in."""
    distortion, strength = int(row['distortion']), int(row['strength'])
    level = tax['strengths'][strength]
    dims = ['Overall', level, tax['step_of'][distortion], tax['group_of'][distortion]]
    if task_field:
        task = row[task_field]
        dims += [task, f'{task}-{level}']
    return dims


def robustness_table(rows: Sequence[Mapping], metrics: Mapping[str, Callable[[Mapping], object]],
                     tasks: Sequence[str] = (), task_field: str | None = 'type',
                     spec: Mapping | None = None) -> dict[str, dict[str, float | None]]:
    """{metric: {dimension: mean}} over all dimensions (None where no scored item falls). Missing values
    (failed items) are excluded from each mean."""
    tax = taxonomy(spec)
    order = dimension_order(tasks if task_field else (), spec)
    out = {}
    for metric, fn in metrics.items():
        means = grouped_mean(rows, fn, lambda r: dimensions_of(r, tax, task_field))
        out[metric] = {d: means.get(d) for d in order}
    return out
