"""`vlmeval-ext leaderboard --data NAME --work-dir DIR [--out PREFIX]`: every model evaluated in a kit work dir
plus the published rows, in the paper's layout (PREFIX.csv, PREFIX.md, PREFIX.png).

The kit writes DIR/<model>/<model>_<dataset>.<xlsx|tsv|csv>; our evaluate writes `<stem>_score.json` (and
`<stem>_manifest.json`) beside it. Each of our rows names the items it scored against the paper's item count and
the judge it used (and input mode where the paper fixes one); a run that cannot be compared with the paper's rows
(a subset, another judge, another input mode) says "not comparable: <why>". Pure apart from file I/O and
matplotlib; no kit import.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from vlmeval_ext.records.manifest import typed_model_name
from vlmeval_ext.records.published import (Published, compare_run, format_value, our_row, published_for_dataset,
                                           read_score_json, side_by_side_rows, text_at)

MAX_GENERIC_COLUMNS = 20


@dataclass
class Run:
    model: str              # as the user typed it (vlmeval_ext.records.manifest.typed_model_name)
    score_path: Path
    score: dict
    manifest: dict | None
    folder: str = ''        # the kit's folder name of the model (safe for file names)

    @property
    def mapping_key(self) -> str:
        return self.folder or self.model

    @property
    def judge(self) -> str:
        """The judge named in the score file (else in the manifest); '' when the run used none."""
        named = text_at(self.score, ('judge', 'name')) or text_at(self.score, ('judge', 'model'))
        judge = (self.manifest or {}).get('judge') or {}
        return str(named or judge.get('model') or '')


def collect_runs(work_dir: str | Path, dataset_name: str) -> list[Run]:
    """Every DIR/<model>/<model>_<dataset>_score.json (sorted by model), with its manifest when present."""
    work_dir = Path(work_dir)
    if not work_dir.is_dir():
        raise FileNotFoundError(f'work dir {work_dir} does not exist')
    runs = []
    for model_dir in sorted(p for p in work_dir.iterdir() if p.is_dir()):
        score_path = model_dir / f'{model_dir.name}_{dataset_name}_score.json'
        if not score_path.is_file():
            continue
        manifest_path = model_dir / f'{model_dir.name}_{dataset_name}_manifest.json'
        manifest = read_score_json(manifest_path) if manifest_path.is_file() else None
        runs.append(Run(typed_model_name(manifest, model_dir.name), score_path, read_score_json(score_path), manifest,
                        model_dir.name))
    return runs


# ----------------------------------------------------------------------------------------------- layout
@dataclass
class Layout:
    name: str
    title: str
    columns: list            # column names in the paper's order
    rows: list               # dicts: kind, model, paper_row, judge, source, verified_by_us, <column>: value
    sort_by: str | None


def _generic_columns(runs: Sequence[Run]) -> list[tuple[str, tuple]]:
    """Numeric leaves (depth <= 3, 'counts' subtrees aside) in first-seen order, for benchmarks with no spec."""
    seen: dict[str, tuple] = {}

    def walk(node, path):
        if len(seen) >= MAX_GENERIC_COLUMNS:
            return
        if isinstance(node, Mapping):
            if len(path) >= 3:
                return
            for k, v in node.items():
                if k not in ('counts', 'judge', 'failed'):
                    walk(v, path + (str(k),))
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and path:
            seen.setdefault('.'.join(path), path)

    for run in runs:
        walk(run.score, ())
    return list(seen.items())


def build_layouts(dataset_name: str, runs: Sequence[Run], pub: Published | None) -> list[Layout]:
    """One Layout per paper table group (tables sharing `layout` are merged by row, e.g. GRAB tasks + overall)."""
    if pub is None:
        from vlmeval_ext.records.summary import benchmark_of, with_units
        found = benchmark_of(dataset_name)
        if found is not None:          # one of our benchmarks: its own summary row, every column naming its unit
            named = with_units([(r.model, found[1](r.score)) for r in runs])
            columns = list(dict.fromkeys(c for _, row in named for c in row if c != 'judge'))
            rows = [{**{c: v for c, v in row.items() if c != 'judge'}, 'kind': 'ours', 'model': r.model,
                     'paper_row': '', 'judge': r.judge or row.get('judge'), 'source': str(r.score_path.name),
                     'verified_by_us': None} for r, (_, row) in zip(runs, named)]
            numeric = [c for c in columns if any(isinstance(row.get(c), (int, float)) for row in rows)]
            return [Layout('scores', f'{dataset_name} (no published results on file)', columns, rows,
                           numeric[0] if numeric else None)]
        from vlmeval_ext.records.published import value_at
        cols = _generic_columns(runs)
        rows = [{'kind': 'ours', 'model': r.model, 'paper_row': '', 'judge': r.judge, 'source': str(r.score_path.name),
                 'verified_by_us': None, **{name: value_at(r.score, path) for name, path in cols}} for r in runs]
        return [Layout('scores', f'{dataset_name} (no published results on file; units as in its score files)',
                       [n for n, _ in cols], rows, cols[0][0] if cols else None)]
    with_paper = dataset_name in pub.datasets
    groups: dict[str, list] = {}
    for table in pub.tables:
        groups.setdefault(table.layout, []).append(table)
    layouts = []
    for name, tables in groups.items():
        columns = [c for t in tables for c in t.column_names]
        rows = []
        for run in runs:
            mapped = (pub.model_map.get(run.model) or pub.model_map.get(run.mapping_key) or {}).get('row', '')
            values = {}
            for t in tables:
                values.update(our_row(t, run.score, dataset_name))
            if all(v is None for v in values.values()):
                continue          # this run has nothing in this layout (e.g. no per-dimension scores)
            mapping = pub.model_map.get(run.model) or pub.model_map.get(run.mapping_key)
            cmp = compare_run(pub, run.score, dataset_name, mapping)
            reproduced = None
            if with_paper and cmp.comparable and mapped:
                cells = [r for r in side_by_side_rows(pub, run.score, dataset_name, mapped, cmp)
                         if r['diff'] is not None and r['table'] in {t.id for t in tables}]
                reproduced = (sum(not r['flag'] for r in cells), len(cells)) if cells else None
            rows.append({'kind': 'ours', 'model': run.model, 'paper_row': mapped, 'judge': run.judge,
                         'reproduced': reproduced,
                         'items': cmp.items_scored, 'paper_items': cmp.paper_items,
                         'comparable': cmp.comparable if with_paper else None,
                         'not_comparable_why': (cmp.why or None) if with_paper else None,
                         'source': run.score_path.name, 'verified_by_us': None, **values})
        if with_paper:
            judge_req, items_req = pub.comparison.get('judge'), pub.comparison.get('items')
            paper_judge = judge_req.paper if judge_req else ''
            paper_items = items_req.paper.get(dataset_name) if items_req else None
            paper_rows: dict[str, dict] = {}
            for t in tables:
                for r in t.rows:
                    entry = paper_rows.setdefault(r.model, {'kind': 'paper', 'model': r.model, 'paper_row': r.model,
                                                            'judge': paper_judge, 'items': paper_items,
                                                            'sources': [], 'verified_by_us': True})
                    entry.update(r.values)
                    src = pub.source_text(r.source)
                    if src not in entry['sources']:
                        entry['sources'].append(src)
                    entry['verified_by_us'] = entry['verified_by_us'] and r.verified_by_us
            for entry in paper_rows.values():
                entry['source'] = '; '.join(entry.pop('sources'))
                rows.append(entry)
        title = ' + '.join(t.title for t in tables) if with_paper else \
            f'{dataset_name} in the layout of {pub.benchmark} ({", ".join(t.title for t in tables)})'
        # Tables with an Overall column are leaderboards sorted on it; dimension profiles keep their order.
        sort_by = 'Overall' if 'Overall' in columns else None
        layouts.append(Layout(name, title, columns, rows, sort_by))
    return layouts


def _ranked(row: Mapping) -> bool:
    """A row takes a rank unless it is one of our runs that is not comparable with the paper (a subset, another
    judge or input mode): those are listed apart, with the reason."""
    return not (row.get('kind') == 'ours' and row.get('comparable') is False)


def _sorted_rows(layout: Layout) -> list[dict]:
    """The ranked rows descending on the sort column (rows without it keep their order after the others), then the
    rows that are not comparable, in their order."""
    ranked = [r for r in layout.rows if _ranked(r)]
    apart = [r for r in layout.rows if not _ranked(r)]
    if not layout.sort_by:
        return ranked + apart
    with_value = [r for r in ranked if r.get(layout.sort_by) is not None]
    without = [r for r in ranked if r.get(layout.sort_by) is None]
    return sorted(with_value, key=lambda r: -r[layout.sort_by]) + without + apart


def _ranks(rows: Sequence[Mapping]) -> list:
    """1, 2, ... for the ranked rows; None for the rows listed apart."""
    out, n = [], 0
    for row in rows:
        n += _ranked(row)
        out.append(n if _ranked(row) else None)
    return out


# ---------------------------------------------------------------------------------------------- outputs
def leaderboard_frame(layouts: Sequence[Layout]):
    import pandas as pd
    records = []
    for layout in layouts:
        rows = _sorted_rows(layout)
        for rank, row in zip(_ranks(rows), rows):
            records.append({'layout': layout.name, 'rank': rank, **{k: row.get(k) for k in
                            ('kind', 'model', 'paper_row', 'judge', 'items', 'paper_items')},
                            **{c: row.get(c) for c in layout.columns},
                            'comparable': row.get('comparable'), 'not_comparable_why': row.get('not_comparable_why'),
                            'verified_by_us': row.get('verified_by_us'), 'source': row.get('source')})
    return pd.DataFrame(records)


def leaderboard_markdown(dataset_name: str, layouts: Sequence[Layout], pub: Published | None,
                         runs: Sequence[Run]) -> str:
    unit = pub.unit if pub else ''
    lines = [f'# Leaderboard: {dataset_name}', '']
    if pub is None:
        lines += ['No published results on file for this dataset: our runs only.', '']
    elif dataset_name not in pub.datasets:
        lines += [f'{dataset_name} uses the layout of {pub.benchmark} but is not the published split: '
                  'paper rows are left out.', '']
    judges = sorted({r.judge for r in runs if r.judge})
    if len(judges) > 1:
        lines += [f'Note: our runs used different judges ({", ".join(judges)}); their scores are not strictly '
                  'comparable (see `vlmeval-ext diff-manifests`).', '']
    for layout in layouts:
        order = f'Sorted by {layout.sort_by}. ' if layout.sort_by else ''
        lines += [f'## {layout.title}', '', f'{order}"ours" rows come from this work dir; "paper" rows from the '
                  'published sources listed below (* = quoted, not verified by us). Items: scored by the run / in '
                  'the paper. A run that differs from the paper\'s protocol (a subset, another judge or input '
                  'mode) is marked "not comparable" and listed after the ranked rows, without a rank.', '']
        head = ['Rank', 'Model', 'Kind', 'Judge', 'Items'] + layout.columns + ['Compared with the paper']
        lines.append('| ' + ' | '.join(head) + ' |')
        lines.append('|' + '---|' * len(head))
        sources = []
        rows = _sorted_rows(layout)
        for rank, row in zip(_ranks(rows), rows):
            name = row['model']
            if row['kind'] == 'ours' and row.get('paper_row'):
                name += f' (paper: {row["paper_row"]})'
            if row['kind'] == 'paper' and row.get('verified_by_us') is False:
                name += ' *'
            if row['kind'] == 'paper':
                sources += [s for s in (row.get('source') or '').split('; ') if s and s not in sources]
            cells = [str(rank) if rank else 'not ranked', name, row['kind'], row.get('judge') or '-',
                     _items_cell(row)] + \
                [_cell(row.get(c), c, unit) for c in layout.columns] + [_comparable_cell(row)]
            lines.append('| ' + ' | '.join(cells) + ' |')
        if sources:
            lines += ['', 'Sources: ' + ' | '.join(sources)]
        lines.append('')
    if pub is not None and pub.unverified and dataset_name in pub.datasets:
        lines += ['Left out (could not be verified):']
        lines += [f'- {u.get("what")}: {u.get("why")}' for u in pub.unverified]
        lines.append('')
    return '\n'.join(lines)


def _cell(value, column: str, unit: str) -> str:
    """A value in the published table's unit; without a published table, in the unit its column names."""
    if unit:
        return format_value(value, unit)
    from vlmeval_ext.records.summary import format_cell
    return '-' if value is None else format_cell(value, column)


def _items_cell(row: Mapping) -> str:
    if row.get('kind') == 'ours' and row.get('paper_items'):
        return f'{row.get("items") if row.get("items") is not None else "?"}/{row["paper_items"]}'
    return '-' if row.get('items') is None else str(row['items'])


def _comparable_cell(row: Mapping) -> str:
    if row.get('kind') != 'ours' or row.get('comparable') is None:
        return '-'
    if not row['comparable']:
        return f'not comparable: {row["not_comparable_why"]}'
    if row.get('reproduced'):
        k, m = row['reproduced']
        return f'comparable: reproduced in {k} of {m} cells (rounding + judge noise; `<stem>_vs_paper.md`)'
    return 'comparable'


def plot_leaderboard(layouts: Sequence[Layout], path: str | Path, dataset_name: str, unit: str = '') -> None:
    """One heatmap per layout in the paper's layout (rows sorted as in the table, columns as published), every
    cell annotated; our rows are labelled "(ours)" in blue, quoted-not-verified paper rows end with "*"."""
    import matplotlib
    import numpy as np

    from vlmeval_ext.records.plots import new_figure
    panels = [(layout, _sorted_rows(layout)) for layout in layouts]
    panels = [(layout, rows) for layout, rows in panels
              if rows and any(r.get(c) is not None for r in rows for c in layout.columns)]
    if not panels:
        raise ValueError(f'{dataset_name}: nothing to plot (no run or published row has a value)')
    width = max(6.0, 0.75 * max(len(layout.columns) for layout, _ in panels) + 3.0)
    heights = [0.32 * len(rows) + 1.3 for _, rows in panels]
    fig = new_figure(figsize=(width, sum(heights)))
    axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={'height_ratios': heights})
    for ax, (layout, rows) in zip(axes[:, 0], panels):
        grid = np.array([[np.nan if r.get(c) is None else float(r[c]) for c in layout.columns] for r in rows])
        cmap = matplotlib.colormaps['viridis'].with_extremes(bad='#eeeeee')
        finite = grid[np.isfinite(grid)]
        ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, aspect='auto',
                  vmin=float(finite.min()) if finite.size else 0.0, vmax=float(finite.max()) if finite.size else 1.0)
        ax.set_xticks(range(len(layout.columns)), layout.columns, rotation=35, ha='right', fontsize=8)
        labels = [r['model'] + (' (ours, not comparable)' if not _ranked(r) else ' (ours)' if r['kind'] == 'ours'
                                else (' *' if r.get('verified_by_us') is False else '')) for r in rows]
        ax.set_yticks(range(len(rows)), labels, fontsize=8)
        for tick, r in zip(ax.get_yticklabels(), rows):
            if r['kind'] == 'ours':
                tick.set_color('#1f4e9a' if _ranked(r) else '#999999')
                tick.set_fontweight('bold')
        apart = [r for r in rows if not _ranked(r)]
        if apart:
            ax.set_xlabel('not comparable with the paper (grey): ' + '; '.join(
                f'{r["model"]}: {r.get("not_comparable_why")}' for r in apart)[:300], fontsize=7)
        span = float(finite.max() - finite.min()) if finite.size else 0.0
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                if np.isfinite(grid[i, j]):
                    light = span == 0 or (grid[i, j] - finite.min()) / span > 0.55
                    ax.text(j, i, format_value(grid[i, j], unit), ha='center', va='center', fontsize=7,
                            color='black' if light else 'white')
        ax.set_title(layout.title + (f' ({unit})' if unit else ''), fontsize=9)
    fig.suptitle(f'{dataset_name}: our runs (blue labels) and published rows (* = quoted, not verified)', fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_leaderboard(dataset_name: str, work_dir: str | Path, out_prefix: str | Path | None = None,
                      plot: bool = True) -> dict:
    """Collect, lay out and write PREFIX.csv / .md / .png; returns {'csv', 'markdown', 'plot', 'frame', 'runs'}."""
    runs = collect_runs(work_dir, dataset_name)
    pub = published_for_dataset(dataset_name)
    if not runs and (pub is None or dataset_name not in pub.datasets):
        raise FileNotFoundError(f'no {dataset_name} results in {work_dir} (looked for '
                                f'<model>/<model>_{dataset_name}_score.json) and no published rows for it')
    layouts = build_layouts(dataset_name, runs, pub)
    prefix = Path(out_prefix) if out_prefix else Path(work_dir) / f'leaderboard_{dataset_name}'
    prefix.parent.mkdir(parents=True, exist_ok=True)
    frame = leaderboard_frame(layouts)
    paths = {'csv': Path(f'{prefix}.csv'), 'markdown': Path(f'{prefix}.md'), 'plot': None}
    frame.to_csv(paths['csv'], index=False)
    paths['markdown'].write_text(leaderboard_markdown(dataset_name, layouts, pub, runs), encoding='utf-8')
    if plot:
        paths['plot'] = Path(f'{prefix}.png')
        plot_leaderboard(layouts, paths['plot'], dataset_name, pub.unit if pub else '')
    return {**paths, 'frame': frame, 'runs': runs}


def leaderboard_main(argv) -> int:
    p = argparse.ArgumentParser(prog='vlmeval-ext leaderboard',
                                description='Collect every model evaluated in a work dir, plus the published rows, '
                                            'into one table in the paper\'s layout (CSV, Markdown) and a plot.')
    p.add_argument('--data', required=True, help='dataset name, e.g. GRAB or R-Bench-Full')
    p.add_argument('--work-dir', required=True, help='the kit work dir: DIR/<model>/<model>_<data>_score.json')
    p.add_argument('--out', default=None, help='output prefix (default: DIR/leaderboard_<data>)')
    p.add_argument('--no-plot', action='store_true')
    args = p.parse_args(argv)
    try:
        result = write_leaderboard(args.data, args.work_dir, args.out, plot=not args.no_plot)
    except (FileNotFoundError, ValueError) as err:
        print(f'[vlmeval-ext] ERROR: {err}', file=sys.stderr)
        return 2
    print(result['markdown'].read_text(encoding='utf-8'))
    print(f'{len(result["runs"])} run(s) of {args.data}: {result["csv"]}, {result["markdown"]}'
          + (f', {result["plot"]}' if result['plot'] else ''))
    return 0
