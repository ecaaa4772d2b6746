"""Published results (dataset_specs/published/<bench>.yaml) next to ours: load, map, compare (pure; no kit import).

A published spec holds tables in the paper's layout. Each table names its source, the decimals it prints and its
columns;
each column says where our value sits in a benchmark's `<stem>_score.json` (`ours: [key, key, ...]`, or null
when the paper's number has no counterpart we can compute). `model_map` maps kit model names to table rows.

    side_by_side_for_run('GRAB', 'GPT4o', 'work/GPT4o/GPT4o_GRAB_score.json')
writes `<stem>_vs_paper.csv` / `.md` and returns the table (None when the model maps to no published row).

Every comparison says what it compares (`comparison` in the spec): the items scored against the paper's item
count, the judge used against the paper's judge, the input mode against the paper's. A run on a subset (`--limit`,
failures left out), with another judge (offline, or another model) or another input mode is marked "not
comparable: <why>" and gets no verdicts (no `!` flags).

On the paper's own items the question is "same protocol, same number?", not item sampling: each cell's verdict
compares |ours - paper| with what the two numbers can differ by without any difference in protocol: the rounding of
the published figure (half its last printed digit) plus, where the run measured it, twice the judge's own noise
(R-Bench's five repeated calls per score give the variance of a rerun; `judge_noise` in the score file). Within it:
"reproduced within X"; beyond: "differs by D", and by what (the judge or the protocol; for rule-scored benchmarks the
model's outputs or the protocol).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from vlmeval_ext.spec import load_spec, spec_dir
from vlmeval_ext.errors import ExtError

PUBLISHED_FOLDER = 'published'
SIDE_BY_SIDE_COLUMNS = ['table', 'column', 'ours', 'paper', 'diff', 'rounding', 'judge_noise_sd', 'allowed',
                        'verdict', 'flag', 'paper_row',
                        'verified_by_us', 'source', 'items_scored', 'paper_items', 'judge', 'paper_judge',
                        'input_mode', 'paper_input_mode', 'comparable', 'not_comparable_why']


class PublishedSpecError(ExtError, ValueError):
    """A published spec is malformed; the message names the file, table, row and column."""


@dataclass
class Column:
    name: str
    ours: tuple | None            # key path into <stem>_score.json; None = not comparable
    datasets: tuple | None = None  # compare only on these datasets (None = every dataset of the spec)
    note: str = ''

    def applies_to(self, dataset_name: str) -> bool:
        return self.ours is not None and (self.datasets is None or dataset_name in self.datasets)


@dataclass
class Row:
    model: str
    values: dict                  # column name -> float
    source: str
    verified_by_us: bool
    note: str = ''


@dataclass
class Table:
    id: str
    title: str
    layout: str
    source: str
    digits: int                   # decimals the source prints
    columns: list
    rows: list

    @property
    def rounding(self) -> float:
        """Half the last printed digit: how far the exact value behind a published figure can lie from it."""
        return 0.5 * 10 ** -self.digits

    def row(self, model: str) -> Row | None:
        return next((r for r in self.rows if r.model == model), None)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


@dataclass
class Requirement:
    """What a run must match to be compared with the paper (one `comparison` entry of a published spec)."""
    ours: tuple                   # key path into <stem>_score.json
    paper: object                 # the paper's value (per dataset for items: {dataset: count})
    accepted: tuple = ()          # our values that count as the paper's (judge names); default: paper itself
    ours_scored: tuple | None = None   # items only: key path of the items actually scored
    mode: tuple | None = None     # judge only: key path of the judge mode (named, not required)
    paper_mode: str | None = None
    note: str = ''


@dataclass
class Published:
    benchmark: str
    key: str                      # file stem: published/<key>.yaml
    unit: str
    datasets: tuple
    layout_only_datasets: tuple
    sources: dict
    tables: list
    model_map: dict               # kit model name -> {'row', 'correspondence', 'note'[, 'comparable', 'why']}
    unverified: list = field(default_factory=list)
    comparison: dict = field(default_factory=dict)   # 'items' / 'judge' / 'input_mode' -> Requirement

    def source_text(self, name: str) -> str:
        """A short citation: the source's label, else its URL, else its key."""
        src = self.sources.get(name) or {}
        return str(src.get('label') or src.get('url') or name)

    def rows_named(self, row: str) -> list[tuple[Table, Row]]:
        return [(t, r) for t in self.tables for r in t.rows if r.model == row]

    def applies_to(self, dataset_name: str) -> bool:
        return dataset_name in self.datasets or dataset_name in self.layout_only_datasets


# ------------------------------------------------------------------------------------------------ loading
def published_keys() -> list[str]:
    """Stems of dataset_specs/published/*.yaml."""
    return sorted(p.stem for p in (spec_dir() / PUBLISHED_FOLDER).glob('*.yaml'))


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(float(value)):
        raise PublishedSpecError(f'{where}: {value!r} is not a number')
    return float(value)


def _digits(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 8:
        raise PublishedSpecError(f'{where}: {value!r} is not the number of decimals the source prints (0-8)')
    return value


def parse_published(spec: Mapping, key: str) -> Published:
    """Validate and convert one parsed published spec; errors name file, table, row and column."""
    where = f'dataset_specs/{PUBLISHED_FOLDER}/{key}.yaml'
    for required in ('benchmark', 'unit', 'datasets', 'sources', 'tables'):
        if required not in spec:
            raise PublishedSpecError(f'{where}: missing top-level key {required!r}')
    sources = dict(spec['sources'])
    tables = []
    for table_id, t in spec['tables'].items():
        tw = f'{where} table {table_id}'
        if t.get('source') not in sources:
            raise PublishedSpecError(f'{tw}: source {t.get("source")!r} is not one of {sorted(sources)}')
        columns = []
        for i, c in enumerate(t.get('columns') or []):
            if not isinstance(c, dict) or 'name' not in c or 'ours' not in c:
                raise PublishedSpecError(f'{tw} column {i}: needs name and ours (a key path or null)')
            ours = c['ours']
            if ours is not None and (not isinstance(ours, list) or not ours or not all(isinstance(k, str) for k in ours)):
                raise PublishedSpecError(f'{tw} column {c["name"]}: ours must be a list of keys or null, got {ours!r}')
            columns.append(Column(str(c['name']), tuple(ours) if ours else None,
                                  tuple(c['datasets']) if c.get('datasets') else None, str(c.get('note', ''))))
        if not columns:
            raise PublishedSpecError(f'{tw}: no columns')
        names = [c.name for c in columns]
        if len(set(names)) != len(names):
            raise PublishedSpecError(f'{tw}: duplicate column names {names}')
        rows = []
        for r in t.get('rows') or []:
            model = r.get('model')
            values = r.get('values')
            if not model or not isinstance(values, list):
                raise PublishedSpecError(f'{tw}: each row needs model and a values list, got {r!r}')
            if len(values) != len(columns):
                raise PublishedSpecError(f'{tw} row {model}: {len(values)} values for {len(columns)} columns {names}')
            src = r.get('source', t['source'])
            if src not in sources:
                raise PublishedSpecError(f'{tw} row {model}: source {src!r} is not one of {sorted(sources)}')
            rows.append(Row(str(model), {n: _number(v, f'{tw} row {model} column {n}') for n, v in zip(names, values)},
                            src, bool(r.get('verified_by_us', t.get('verified_by_us', False))), str(r.get('note', ''))))
        if len({r.model for r in rows}) != len(rows):
            raise PublishedSpecError(f'{tw}: duplicate row names')
        tables.append(Table(table_id, str(t.get('title', table_id)), str(t.get('layout', table_id)), t['source'],
                            _digits(t.get('digits'), f'{tw} digits'), columns, rows))
    comparison = _parse_comparison(spec.get('comparison') or {}, where, tuple(spec['datasets']))
    model_map = {}
    known_rows = {r.model for t in tables for r in t.rows}
    for kit_name, entry in (spec.get('model_map') or {}).items():
        entry = {'row': entry} if isinstance(entry, str) else dict(entry)
        if entry.get('row') not in known_rows:
            raise PublishedSpecError(f'{where} model_map {kit_name}: row {entry.get("row")!r} is in no table '
                                     f'(rows: {sorted(known_rows)})')
        entry.setdefault('correspondence', 'assumed')
        entry.setdefault('note', '')
        entry.setdefault('comparable', True)
        if entry['comparable'] is not True and not entry.get('why'):
            raise PublishedSpecError(f'{where} model_map {kit_name}: comparable: false needs a `why`')
        model_map[str(kit_name)] = entry
    return Published(str(spec['benchmark']), key, str(spec['unit']), tuple(spec['datasets']),
                     tuple(spec.get('layout_only_datasets') or ()), sources, tables, model_map,
                     list(spec.get('unverified') or []), comparison)


def _key_path(value, where: str) -> tuple:
    if not isinstance(value, list) or not value or not all(isinstance(k, str) for k in value):
        raise PublishedSpecError(f'{where}: expected a key path (a list of keys), got {value!r}')
    return tuple(value)


def _parse_comparison(block: Mapping, where: str, datasets: tuple) -> dict:
    """The `comparison` block: items (required), judge and input_mode (when the paper's numbers depend on them)."""
    unknown = set(block) - {'items', 'judge', 'input_mode'}
    if unknown:
        raise PublishedSpecError(f'{where} comparison: unknown key(s) {sorted(unknown)}')
    out = {}
    if 'items' in block:
        b = block['items']
        paper = b.get('paper')
        if not isinstance(paper, Mapping) or set(paper) != set(datasets) or \
                not all(isinstance(v, int) and v > 0 for v in paper.values()):
            raise PublishedSpecError(f'{where} comparison.items.paper: a positive item count for each of {datasets}, '
                                     f'got {paper!r}')
        out['items'] = Requirement(_key_path(b.get('ours'), f'{where} comparison.items.ours'), dict(paper),
                                   ours_scored=_key_path(b.get('ours_scored', b.get('ours')),
                                                         f'{where} comparison.items.ours_scored'),
                                   note=str(b.get('note', '')))
    for name in ('judge', 'input_mode'):
        if name in block:
            b = block[name]
            if not isinstance(b.get('paper'), str):
                raise PublishedSpecError(f'{where} comparison.{name}.paper: the paper\'s {name} as text')
            out[name] = Requirement(_key_path(b.get('ours'), f'{where} comparison.{name}.ours'), b['paper'],
                                    accepted=tuple(str(a) for a in b.get('accepted') or (b['paper'],)),
                                    mode=_key_path(b['mode'], f'{where} comparison.{name}.mode') if b.get('mode')
                                    else None,
                                    paper_mode=b.get('paper_mode'), note=str(b.get('note', '')))
    return out


def load_published(key: str) -> Published:
    """dataset_specs/published/<key>.yaml, validated (key: rbench, grab, remi, rococo)."""
    return parse_published(load_spec(f'{PUBLISHED_FOLDER}/{key}'), key)


def published_for_dataset(dataset_name: str) -> Published | None:
    """The published spec whose datasets (or layout-only datasets) include `dataset_name`."""
    for key in published_keys():
        pub = load_published(key)
        if pub.applies_to(dataset_name):
            return pub
    return None


def map_model(pub: Published, model_name: str) -> dict | None:
    """{'row', 'correspondence', 'note'} for a kit model name, or None when it maps to no published row."""
    return pub.model_map.get(model_name)


# ------------------------------------------------------------------------------------------ our numbers
def value_at(score: Mapping, path: Sequence[str]):
    """The number at a key path of a score dict; None when any key is absent or the value is null."""
    node = score
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    if node is None:
        return None
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise ValueError(f'score path {".".join(path)} holds {node!r}, not a number')
    return float(node)


def our_row(table: Table, score: Mapping, dataset_name: str) -> dict:
    """Our value for every column of a published table (None where not comparable or not computed)."""
    return {c.name: value_at(score, c.ours) if c.applies_to(dataset_name) else None for c in table.columns}


def read_score_json(path: str | Path) -> dict:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding='utf-8'))
    except ValueError as err:
        raise ValueError(f'{path}: not valid JSON ({err})') from None
    if not isinstance(data, dict):
        raise ValueError(f'{path}: expected a JSON object, got {type(data).__name__}')
    return data


# ------------------------------------------------------------------------------------------ comparability
def text_at(score: Mapping, path: Sequence[str]) -> str | None:
    """The text at a key path of a score dict (None when absent or null)."""
    node = score
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return None if node is None else str(node)


@dataclass
class Comparison:
    """What a run measured against what the paper measured, and whether the two can be compared."""
    items_scored: int | None = None
    paper_items: int | None = None
    judge: str | None = None
    paper_judge: str | None = None
    input_mode: str | None = None
    paper_input_mode: str | None = None
    facts: list = field(default_factory=list)      # one line each: items, judge, input mode
    reasons: list = field(default_factory=list)    # why not comparable (empty: comparable)

    @property
    def comparable(self) -> bool:
        return not self.reasons

    @property
    def why(self) -> str:
        return '; '.join(self.reasons)


def _count_at(score: Mapping, path: Sequence[str]) -> int | None:
    value = value_at(score, path)
    return None if value is None else int(value)


def compare_run(pub: Published, score: Mapping, dataset_name: str, mapping: Mapping | None = None) -> Comparison:
    """Items scored vs the paper's, judge vs the paper's, input mode vs the paper's; reasons when not comparable."""
    cmp = Comparison()
    if dataset_name not in pub.datasets:
        cmp.reasons.append(f'{dataset_name} is not a published split')
    if mapping is not None and mapping.get('comparable', True) is not True:
        cmp.reasons.append(str(mapping['why']))
    items = pub.comparison.get('items')
    if items is not None and dataset_name in items.paper:
        cmp.paper_items = items.paper[dataset_name]
        in_file, scored = _count_at(score, items.ours), _count_at(score, items.ours_scored)
        cmp.items_scored = scored
        if scored is None or in_file is None:
            cmp.facts.append(f'Items scored: not recorded in the score file (the paper: {cmp.paper_items}).')
            cmp.reasons.append('the score file does not record how many items were scored')
        else:
            cmp.facts.append(f'Items scored: {scored} of {in_file} in the predictions file; the paper: '
                             f'{cmp.paper_items}.')
            if in_file < cmp.paper_items:
                cmp.reasons.append(f'a subset: {in_file} of the paper\'s {cmp.paper_items} items (e.g. --limit)')
            elif in_file > cmp.paper_items:
                cmp.reasons.append(f'{in_file} items, more than the paper\'s {cmp.paper_items}')
            if scored < in_file:
                cmp.reasons.append(f'{in_file - scored} item(s) not scored (inference or judge failures, left out '
                                   'of the means; a rerun in the same work dir re-asks them)')
    judge = pub.comparison.get('judge')
    ours_judge = (text_at(score, judge.ours) if judge else None) or text_at(score, ('judge', 'name')) \
        or text_at(score, ('judge', 'model'))
    cmp.judge = ours_judge
    if judge is not None:
        cmp.paper_judge = judge.paper
        mode = text_at(score, judge.mode) if judge.mode else None
        mode_text = f', {mode} mode' if mode else ''
        paper_mode = f', {judge.paper_mode} mode' if judge.paper_mode else ''
        cmp.facts.append(f'Judge: {ours_judge or "not recorded"}{mode_text}; the paper: {judge.paper}{paper_mode}.')
        if ours_judge is None:
            cmp.reasons.append('the score file does not name its judge')
        elif ours_judge not in judge.accepted:
            offline = ' (an offline approximation)' if ours_judge.startswith('offline') else ''
            cmp.reasons.append(f'judged by {ours_judge}{offline}, not the paper\'s {judge.paper}')
    else:
        used = f'this run\'s judge: {ours_judge}' if ours_judge else 'this run used none'
        cmp.facts.append(f'Judge: none needed by the compared scores (rule-based, as in the paper); {used}.')
    mode = pub.comparison.get('input_mode')
    if mode is not None:
        cmp.paper_input_mode = mode.paper
        cmp.input_mode = text_at(score, mode.ours)
        cmp.facts.append(f'Input mode: {cmp.input_mode or "not recorded"}; the paper: {mode.paper}.')
        if cmp.input_mode is None:
            cmp.reasons.append('the score file does not record its input mode')
        elif cmp.input_mode not in mode.accepted:
            cmp.reasons.append(f'input mode {cmp.input_mode}, not the paper\'s {mode.paper}')
    return cmp


# ------------------------------------------------------------------------------------------ side by side
def judge_noise_at(col: Column, score: Mapping, dataset_name: str) -> float | None:
    """The standard deviation of our cell from the judge's own noise (the score file's judge_noise at the column's
    key path), or None where the run did not measure it."""
    node = score.get('judge_noise') or {}
    if not col.applies_to(dataset_name):
        return None
    for key in col.ours:
        if not isinstance(node, Mapping) or str(key) not in node:
            return None
        node = node[str(key)]
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def verdict(diff, rounding: float, noise: float | None, judged: bool) -> tuple[bool, float | None, str]:
    """(differs, allowed, the verdict in words): |diff| against the published rounding plus twice the judge's noise
    where it was measured."""
    if diff is None:
        return False, None, 'not computed'
    allowed = rounding + (2 * noise if noise is not None else 0.0)
    if abs(diff) <= allowed + 1e-12:
        return False, allowed, f'reproduced within {allowed:.4g}'
    cause = 'judge or protocol' if judged else 'model outputs or protocol'
    return True, allowed, f'differs by {diff:+.4g}: {cause}'


def side_by_side_rows(pub: Published, score: Mapping, dataset_name: str, paper_row: str,
                      comparison: Comparison | None = None) -> list[dict]:
    """One record per (table, column) of every table holding `paper_row`: ours, paper, diff = ours - paper, the
    rounding of the published figure, our judge noise (where measured), what a difference may be without any
    difference in protocol (`allowed`), the verdict in words, a flag where it differs, and what was compared.
    Paper-only columns (ours null) are kept with an empty diff. A run that is not comparable gets no verdict."""
    cmp = comparison or compare_run(pub, score, dataset_name)
    judged = pub.comparison.get('judge') is not None
    records = []
    for table, row in pub.rows_named(paper_row):
        ours = our_row(table, score, dataset_name) if dataset_name in pub.datasets \
            else {c: None for c in table.column_names}
        for col in table.columns:
            paper, mine = row.values[col.name], ours[col.name]
            diff = None if mine is None else mine - paper
            noise = judge_noise_at(col, score, dataset_name) if dataset_name in pub.datasets else None
            differs, allowed, words = verdict(diff, table.rounding, noise, judged)
            records.append({'table': table.id, 'column': col.name, 'ours': mine, 'paper': paper, 'diff': diff,
                            'rounding': table.rounding, 'judge_noise_sd': noise, 'allowed': allowed,
                            'verdict': words if cmp.comparable else 'not comparable',
                            'flag': cmp.comparable and differs,
                            'paper_row': paper_row, 'verified_by_us': row.verified_by_us,
                            'source': pub.source_text(row.source), 'items_scored': cmp.items_scored,
                            'paper_items': cmp.paper_items, 'judge': cmp.judge, 'paper_judge': cmp.paper_judge,
                            'input_mode': cmp.input_mode, 'paper_input_mode': cmp.paper_input_mode,
                            'comparable': cmp.comparable, 'not_comparable_why': cmp.why or None})
    return records


def format_value(v, unit: str) -> str:
    if v is None:
        return '-'
    if unit == 'fraction':
        return f'{v:.4f}'
    return f'{v:.1f}' if abs(v - round(v, 1)) < 1e-9 else f'{v:.2f}'   # keep published 2-decimal values


def _fmt_diff(v, unit: str, flagged: bool) -> str:
    if v is None:
        return '-'
    text = f'{v:+.4f}' if unit == 'fraction' else f'{v:+.1f}'
    return f'**{text} !**' if flagged else text


def side_by_side_markdown(pub: Published, records: Sequence[Mapping], model_name: str, mapping: Mapping,
                          comparison: Comparison | None = None, notes: Sequence[str] = ()) -> str:
    """Per table, the paper's layout with three lines: ours, paper, difference (flagged cells in bold, '!'); above
    them what was compared (items, judge, input mode) and, when the run is not comparable, why."""
    lines = [f'# {pub.benchmark}: {model_name} vs the published row "{mapping["row"]}"', '']
    if comparison is not None:
        lines += comparison.facts
        lines += [f'Run notes: {"; ".join(notes)}.'] if notes else []
        lines += ['', f'**Not comparable: {comparison.why}.** The differences below are shown for information; no '
                      'cell is judged against the paper.' if not comparison.comparable else
                  'Comparable: the paper\'s items, judge and input mode. Each cell asks "same protocol, same '
                  'number?": the difference against the published rounding plus twice the judge noise this run '
                  'measured (none measured: the rounding alone).', '']
    if mapping.get('correspondence') != 'exact':
        lines += [f'Model correspondence is {mapping.get("correspondence")}: {mapping.get("note") or "see model_map"}.', '']
    by_table: dict[str, list] = {}
    for rec in records:
        by_table.setdefault(rec['table'], []).append(rec)
    tables = {t.id: t for t in pub.tables}
    n_flagged = sum(1 for r in records if r['flag'])
    for table_id, recs in by_table.items():
        table = tables[table_id]
        cols = [r['column'] for r in recs]
        lines.append(f'## {table.title}')
        lines.append('')
        lines.append(f'Source: {recs[0]["source"]}, printed to {table.digits} decimals (rounding '
                     f'+/-{table.rounding:g}, {pub.unit}).')
        unverified = sorted({r['source'] for r in recs if not r['verified_by_us']})
        if unverified:
            lines.append(f'Not verified by us (quoted from {", ".join(unverified)}).')
        lines.append('')
        lines.append('| | ' + ' | '.join(cols) + ' |')
        lines.append('|---|' + '---|' * len(cols))
        lines.append(f'| ours ({model_name}) | ' + ' | '.join(format_value(r['ours'], pub.unit) for r in recs) + ' |')
        lines.append(f'| paper ({mapping["row"]}) | ' + ' | '.join(format_value(r['paper'], pub.unit) for r in recs) + ' |')
        lines.append('| difference | ' + ' | '.join(_fmt_diff(r['diff'], pub.unit, r['flag']) for r in recs) + ' |')
        lines.append('| judge noise (sd) | ' + ' | '.join(
            '-' if r['judge_noise_sd'] is None else f'{r["judge_noise_sd"]:.4f}' for r in recs) + ' |')
        lines.append('| verdict | ' + ' | '.join(r['verdict'] for r in recs) + ' |')
        notes = [f'{c.name}: {c.note}' for c in table.columns if c.note]
        if notes:
            lines += [''] + [f'- {n}' for n in notes]
        lines.append('')
    if comparison is not None and not comparison.comparable:
        lines.append(f'Not comparable ({comparison.why}): no verdicts.')
    else:
        compared = [r for r in records if r['diff'] is not None]
        lines.append(f'Reproduced in {len(compared) - n_flagged} of {len(compared)} compared cells; '
                     f'{n_flagged} differ beyond the rounding and the measured judge noise (largest difference '
                     f'{max((abs(r["diff"]) for r in compared), default=0):.4g}).' if compared else
                     'No cell could be compared.')
    return '\n'.join(lines) + '\n'


def stem_of_score_json(score_json_path: str | Path) -> str:
    text = str(score_json_path)
    suffix = '_score.json'
    if not text.endswith(suffix):
        raise ValueError(f'{score_json_path}: expected a <stem>_score.json file')
    return text[:-len(suffix)]


def side_by_side_for_run(dataset_name: str, model_name: str, score_json_path: str | Path, verbose: bool = True):
    """After an evaluation: when `model_name` maps to a published row of `dataset_name`'s benchmark, write
    `<stem>_vs_paper.csv` and `<stem>_vs_paper.md` beside the score file, print the Markdown, and return the
    side-by-side DataFrame (columns SIDE_BY_SIDE_COLUMNS). Otherwise return None and write nothing."""
    import pandas as pd

    pub = published_for_dataset(dataset_name)
    if pub is None or dataset_name not in pub.datasets:
        return None
    mapping = map_model(pub, model_name)
    if mapping is None:
        return None
    score = read_score_json(score_json_path)
    comparison = compare_run(pub, score, dataset_name, mapping)
    records = side_by_side_rows(pub, score, dataset_name, mapping['row'], comparison)
    if not any(r['ours'] is not None for r in records):
        return None
    df = pd.DataFrame(records, columns=SIDE_BY_SIDE_COLUMNS)
    df.insert(0, 'model', model_name)
    df.insert(0, 'dataset', dataset_name)
    stem = stem_of_score_json(score_json_path)
    df.to_csv(f'{stem}_vs_paper.csv', index=False)
    notes = score.get('notes') if isinstance(score.get('notes'), list) else []
    text = side_by_side_markdown(pub, records, model_name, mapping, comparison, [str(n) for n in notes])
    Path(f'{stem}_vs_paper.md').write_text(text, encoding='utf-8')
    if verbose:
        print(text)
    return df
