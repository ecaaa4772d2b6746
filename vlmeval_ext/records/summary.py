"""`vlmeval-ext summary WORK_DIR [--out PREFIX]`: every `<stem>_score.json` under a work dir (all models, or one
model's folder), one Markdown table per benchmark, printed and written to PREFIX.md, and every value in one long
CSV, PREFIX.csv (model, benchmark, dataset, metric, unit, value, judge). Default PREFIX: WORK_DIR/summary.

Each benchmark hands over its own row (`summary_row(score) -> {column with its unit: value}`,
vlmeval_ext/plugin/<bench>.py); the registry says which dataset names belong to which benchmark. Every
column names its unit: `(%)`, `(0-1)` (R-Bench and -RC, as in their papers), `(count)` for counts; text columns
(input mode, attack, ...) have none. A judge shared by every row of a table is said once, under it. Under each
table: every file's failure accounting. A score file of any other dataset is printed as it is.
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path
from typing import Callable, Mapping

from vlmeval_ext.records.manifest import manifest_beside, typed_model_name
from vlmeval_ext.registry import benchmark_of as record_of
from vlmeval_ext.registry import load_object


def benchmark_of(dataset: str) -> tuple[str, Callable[[Mapping], dict]] | None:
    """(the benchmark's title, its summary_row) for a dataset name, or None for a dataset of no benchmark here."""
    record = record_of(dataset)
    if record is None or record.report is None:
        return None
    report = load_object(record.report)
    return record.title, lambda score: headline_first(report, score)


def headline_first(report, score: Mapping) -> dict:
    """A benchmark's summary row with its headlines first, each followed by its 95 % interval, then the rest of
    the row, then the smallest detectable difference."""
    row, intervals = report.summary_row(score), report.interval_columns(score)
    out = {}
    for label, _, unit in report.HEADLINE:
        key = f'{label} ({unit})'
        if key in row:
            out[key] = row[key]
        ci = f'{label} 95 % CI ({unit})'
        if ci in intervals:
            out[ci] = intervals[ci]
    out.update({k: v for k, v in row.items() if k not in out})
    out.update({k: v for k, v in intervals.items() if k not in out})
    return out


def tag_of(path: Path) -> str:
    """The result tag of a score file ('_efficient' for R-Bench's efficient mode), '' for none."""
    from vlmeval_ext.registry import RESULT_TAGS
    stem = path.name[:-len('_score.json')] if path.name.endswith('_score.json') else path.stem
    return next((t for t in RESULT_TAGS if stem.endswith(t)), '')


def dataset_of(path: Path) -> str:
    """The dataset name in `<work dir>/<model>/[<run id>/]<model>_<dataset>[<tag>]_score.json`; for a file
    elsewhere, the longest tail of its name (after an '_') that names a known benchmark's dataset, else the whole
    stem."""
    stem = path.name[:-len('_score.json')] if path.name.endswith('_score.json') else path.stem
    tag = tag_of(path)
    stem = stem[:-len(tag)] if tag else stem
    for folder in (path.parent.name, path.parent.parent.name):
        if folder and stem.startswith(folder + '_'):
            return stem[len(folder) + 1:]
    tails = [stem[i + 1:] for i, ch in enumerate(stem) if ch == '_']
    return next((t for t in tails if benchmark_of(t)), stem)


def _flatten(obj, prefix=''):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, f'{prefix}.{k}' if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        yield prefix, ', '.join(map(str, obj[:8])) + (' ...' if len(obj) > 8 else '')
    else:
        yield prefix, obj


def format_cell(v, column: str = ''):
    """A value as the table shows it: percent with 2 decimals, 0-1 scores with 4 (the unit is in the column)."""
    if isinstance(v, float):
        if column.endswith('(%)'):
            return f'{v:.2f}'
        if column.endswith('(0-1)'):
            return f'{v:.4f}'
        return f'{v:.4f}' if abs(v) <= 1 else f'{v:.2f}'
    return 'n/a' if v is None else str(v)


_ACCOUNTING = re.compile(r'fail|unparsed|empty|missing|excluded|calls_per_item|mode$')


def _nonzero(value) -> bool:
    return not (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0)


def failure_lines(data: dict) -> list[str]:
    """A score file's failure accounting and judge use: `[section] key=n; ...` per section, top-level counts
    under `[totals]`; a counter at 0 is left out, and a section with nothing left is not printed."""
    lines = []
    top = [(k, v) for k, v in data.items()
           if isinstance(v, (int, float)) and not isinstance(v, bool) and _ACCOUNTING.search(k) and v != 0]
    if top:
        lines.append('[totals] ' + '; '.join(f'{k}={format_cell(v)}' for k, v in top))
    for section, value in data.items():
        if not isinstance(value, dict):
            continue
        leaves = [(k, v) for k, v in _flatten(value)
                  if _ACCOUNTING.search(k) and (isinstance(v, (int, float, str)) or v is None) and v != ''
                  and _nonzero(v)]
        if leaves:
            lines.append(f'[{section}] ' + '; '.join(f'{k}={format_cell(v)}' for k, v in leaves))
    return lines


COUNT_UNIT = '(count)'
# Text columns said once under a table when every row shares the value.
SHARED_ONCE = ('judge',)


def unit_of(column: str) -> str:
    """The unit a column names at its end, '(%)' -> '%'; '' for none."""
    found = re.search(r'\(([^()]*)\)$', column)
    return found.group(1) if found else ''


def with_units(rows: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Counts (integers in every row, no unit named) get `(count)` in their column name."""
    columns = list(dict.fromkeys(c for _, row in rows for c in row))
    counts = {c for c in columns if not unit_of(c) and all(
        isinstance(row.get(c), int) and not isinstance(row.get(c), bool) for _, row in rows if c in row)}
    return [(d, {(f'{c} {COUNT_UNIT}' if c in counts else c): v for c, v in row.items()}) for d, row in rows]


def table(rows: list[tuple[str, dict]]) -> str:
    """A Markdown table: one row per dataset, the union of the rows' columns in first-seen order; a judge shared
    by every row is said once, under the table."""
    rows = with_units(rows)
    columns = list(dict.fromkeys(c for _, row in rows for c in row))
    shared = {c: rows[0][1].get(c) for c in columns if c in SHARED_ONCE
              and len({str(row.get(c)) for _, row in rows}) == 1}
    columns = [c for c in columns if c not in shared]
    first = 'model / dataset' if any(' / ' in d for d, _ in rows) else 'dataset'
    out = [f'| {first} | ' + ' | '.join(columns) + ' |', '|' + '---|' * (len(columns) + 1)]
    for dataset, row in rows:           # a column this row does not have stays empty
        out.append(f'| {dataset} | ' + ' | '.join(format_cell(row[c], c) if c in row else '' for c in columns)
                   + ' |')
    out += [f'{c} (every row): {v}' for c, v in shared.items()]
    return '\n'.join(out)


def _generic(path: Path, data: dict) -> str:
    """A score file of a dataset no benchmark here claims: its numeric sections side by side, then the rest."""
    lines = [f'## {path.name}']
    sections = {k: dict(_flatten(v)) for k, v in data.items() if isinstance(v, dict)}
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    numeric = {k: s for k, s in sections.items() if s and all(isinstance(x, (int, float)) or x is None
                                                             for x in s.values())}
    groups: dict[tuple, list[str]] = {}
    for name, sec in numeric.items():
        groups.setdefault(tuple(sec), []).append(name)
    for keys, names in groups.items():
        width = max(len(k) for k in keys) + 2
        lines.append(''.ljust(width) + ''.join(n[:14].rjust(15) for n in names))
        for key in keys:
            lines.append(key.ljust(width) + ''.join(format_cell(sections[n][key]).rjust(15) for n in names))
    for name, sec in sections.items():
        if name not in numeric:
            lines.append(f'[{name}] ' + '; '.join(f'{k}={format_cell(v)}' for k, v in sec.items()))
    for k, v in scalars.items():
        lines.append(f'{k}: {format_cell(v)}')
    return '\n'.join(lines)


def format_score_file(path: Path) -> str:
    """One score file: its benchmark's row as a one-row table plus its failure accounting."""
    path = Path(path)
    data = json.loads(path.read_text())
    dataset = dataset_of(path)
    found = benchmark_of(dataset)
    if found is None:
        return _generic(path, data)
    benchmark, row = found
    return '\n'.join([f'## {benchmark}: {path.name}', table([(dataset, row(data))]), *failure_lines(data)])


def model_of(path: Path) -> str:
    """The model of `<work dir>/<model>/[<run id>/]<model>_<dataset>_score.json` ('' elsewhere)."""
    stem = path.name[:-len('_score.json')] if path.name.endswith('_score.json') else path.stem
    for folder in (path.parent.name, path.parent.parent.name):
        if folder and stem.startswith(folder + '_'):
            return folder
    return ''


def _entries(files: list[Path]) -> tuple[dict, list[str]]:
    """{benchmark: [(row label, model, dataset, row, failure lines)]} and the generic blocks of other files."""
    models = {model_of(Path(p)) for p in files}
    blocks: dict[str, list] = {}
    others = []
    for path in files:
        path = Path(path)
        data = json.loads(path.read_text())
        dataset = dataset_of(path)
        found = benchmark_of(dataset)
        if found is None:
            others.append(_generic(path, data))
            continue
        benchmark, row = found
        model = typed_model_name(manifest_beside(path), model_of(path))
        label = (f'{model} / {dataset}' if len(models) > 1 else dataset) + (
            f' ({tag_of(path).lstrip("_")} mode)' if tag_of(path) else '')
        note = [f'[note] {data["note"]}'] if isinstance(data.get('note'), str) else []
        note += [f'[note] {n}' for n in data.get('notes') or [] if isinstance(n, str) and 'subset' in n]
        if any('subset' in n for n in note):
            label += ' (subset)'
        blocks.setdefault(benchmark, []).append((label, model, dataset, row(data), failure_lines(data) + note))
    return blocks, others


def format_work_dir(files: list[Path]) -> str:
    """Every score file: one table per benchmark (rows in file order), each file's failure lines beneath; a work dir
    of one model says which."""
    blocks, others = _entries(files)
    models = {typed_model_name(manifest_beside(Path(p)), model_of(Path(p))) for p in files} - {''}
    out = [f'# {next(iter(models))}', ''] if len(models) == 1 else []
    for benchmark, entries in blocks.items():
        out += [f'## {benchmark}', table([(label, r) for label, _, _, r, _ in entries])]
        shared = [line for line in entries[0][4] if line.startswith('[note] ')
                  and len(entries) > 1 and all(line in e[4] for e in entries)]
        out += [f'[note] (every row) {line[len("[note] "):]}' for line in shared]
        out += [f'{label} {line}' for label, _, _, _, lines in entries for line in lines if line not in shared]
        out.append('')
    return '\n'.join(out + [o + '\n' for o in others]).rstrip() + '\n'


CSV_COLUMNS = ('model', 'benchmark', 'dataset', 'metric', 'unit', 'value', 'judge')


def csv_rows(files: list[Path]) -> list[dict]:
    """Every value of every benchmark row, one per line: the metric without its unit, the unit apart."""
    blocks, _ = _entries(files)
    out = []
    for benchmark, entries in blocks.items():
        for (_, model, dataset, row, _), (_, unit_row) in zip(entries, with_units([(e[0], e[3]) for e in entries])):
            judge = str(row.get('judge') or '').split(':')[0]      # its name; the full label is in the tables
            for column, value in unit_row.items():
                if column == 'judge':
                    continue
                unit = unit_of(column)
                metric = column[:-len(unit) - 2].rstrip() if unit else column
                out.append({'model': model, 'benchmark': benchmark, 'dataset': dataset, 'metric': metric,
                            'unit': unit, 'value': '' if value is None else value, 'judge': judge})
    return out


def write_summary(files: list[Path], prefix: str | Path) -> tuple[Path, Path]:
    """PREFIX.md (the tables) and PREFIX.csv (the long table)."""
    md, csv_path = Path(f'{prefix}.md'), Path(f'{prefix}.csv')
    md.write_text(format_work_dir(files), encoding='utf-8')
    with open(csv_path, 'w', newline='', encoding='utf-8') as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows(files))
    return md, csv_path


def summary_main(argv=None) -> int:
    p = argparse.ArgumentParser(prog='vlmeval-ext summary',
                                description='One table per benchmark of every *_score.json under WORK_DIR (all '
                                            'models, or one model\'s folder): printed as Markdown and written to '
                                            'PREFIX.md and PREFIX.csv (one value per line: model, benchmark, '
                                            'dataset, metric, unit, value, judge). Units: % or 0-1 as each '
                                            'paper reports, (count) for counts.')
    p.add_argument('work_dir', metavar='WORK_DIR')
    p.add_argument('--out', default=None, metavar='PREFIX', help='default: WORK_DIR/summary')
    args = p.parse_args(argv)
    root = Path(args.work_dir)
    if not root.is_dir():
        print(f'[vlmeval-ext] ERROR: {root} is not a folder', file=sys.stderr)
        return 2
    files = sorted(root.rglob('*_score.json'))
    if not files:
        print(f'[vlmeval-ext] ERROR: no *_score.json under {root} (evaluate a run first)', file=sys.stderr)
        return 1
    print(format_work_dir(files))
    md, csv_path = write_summary(files, args.out or root / 'summary')
    print(f'written: {md}, {csv_path}')
    return 0


def main(argv=None) -> int:
    return summary_main(sys.argv[1:] if argv is None else argv)


if __name__ == '__main__':
    sys.exit(main())
