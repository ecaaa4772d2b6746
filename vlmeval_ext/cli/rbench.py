"""`python -m vlmeval_ext.cli.rbench report SCORES.csv [--tables]`: R-Bench's robustness table rebuilt from a per-item
scores file (an evaluation's `<stem>_scores.csv`, or one written by any pipeline with the same columns), without
judging; `python -m vlmeval_ext.cli.rbench prepare OUT.tsv [--from DIR|modelscope|hf] [--allow-subset]`: the kit TSV
written anywhere. The table is the kit dataset's own (vlmeval_ext.dataset.utils.rbench_full.rbench_table)."""
from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

from vlmeval_ext.dataset.utils.rbench_full import TASKS, rbench_table

SCORE_COLUMNS = ['name', 'type', 'distortion', 'strength', 'score_ref', 'score_dis', 'score_com']


def _value(text) -> float | None:
    if text is None or text == '':
        return None
    value = float(text)
    return None if math.isnan(value) else value


def read_scores_csv(path: str | Path) -> list[dict]:
    """A per-item scores file (columns SCORE_COLUMNS; an empty score = failed), every error naming line and
    column."""
    path = Path(path)
    with open(path, encoding='utf-8', newline='') as f:
        reader = csv.DictReader(f)
        missing = [c for c in SCORE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f'{path}: missing columns {missing} (need {SCORE_COLUMNS})')
        rows = []
        for i, rec in enumerate(reader, 2):
            for col in ('distortion', 'strength'):
                try:
                    rec[col] = int(float(rec[col]))
                except ValueError:
                    raise ValueError(f'{path} line {i} column {col}: {rec[col]!r} is not an integer') from None
            if rec['type'] not in TASKS:
                raise ValueError(f'{path} line {i} column type: {rec["type"]!r} is not one of {TASKS}')
            if not 1 <= rec['distortion'] <= 33 or not 1 <= rec['strength'] <= 3:
                raise ValueError(f'{path} line {i}: distortion {rec["distortion"]} / strength {rec["strength"]} '
                                 'out of range (1-33 / 1-3)')
            for col in ('score_ref', 'score_dis', 'score_com'):
                try:
                    value = _value(rec[col])
                except ValueError:
                    raise ValueError(f'{path} line {i} column {col}: {rec[col]!r} is not a number') from None
                if value is not None and not 0.0 <= value <= 1.0:
                    raise ValueError(f'{path} line {i} column {col}: {value} outside [0, 1]')
                rec[col] = value
            rows.append(rec)
    return rows


def failure_counts(rows) -> dict[str, int]:
    return {col: sum(1 for r in rows if r[col] is None) for col in ('score_ref', 'score_dis', 'score_com')}


def robustness_csv_text(table) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator='\n')
    writer.writerow(['dimension', 'absolute (0-1)', 'relative (0-1)'])
    for dim in table['absolute']:
        writer.writerow([dim, *('' if v is None else f'{v:.4f}' for v in (table[m][dim]
                                                                         for m in ('absolute', 'relative')))])
    return buf.getvalue()


def paper_tables(table, label: str = '') -> str:
    """The two tables of the paper's Table 3: MCQ/VQA/CAP x low/mid/high, then Overall."""
    cols = [f'{t}-{s}' for t in TASKS for s in ('low', 'mid', 'high')] + ['Overall']
    head = [c.replace('-', ' ') for c in cols]
    out = []
    for metric in ('absolute', 'relative'):
        out.append(f'| {metric.capitalize()} | ' + ' | '.join(head) + ' |')
        out.append('|' + '---|' * (len(head) + 1))
        vals = [table[metric].get(c) for c in cols]
        out.append(f'| {label or "this run"} | ' + ' | '.join('-' if v is None else f'{v:.4f}' for v in vals) + ' |')
        out.append('')
    return '\n'.join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog='python -m vlmeval_ext.cli.rbench')
    sub = ap.add_subparsers(dest='cmd', required=True)
    rep = sub.add_parser('report', help='rebuild the robustness table from a per-item scores CSV')
    rep.add_argument('scores')
    rep.add_argument('--tables', action='store_true', help="also print the paper's Table 3 layout (to stderr)")
    prep = sub.add_parser('prepare', help='official release -> kit TSV (2,970 rows)')
    prep.add_argument('out')
    prep.add_argument('--from', dest='source', default=None,
                      help='local copy (saved HF dataset, parquet, or Ref_Release.csv + image folders), '
                           '"modelscope" or "hf" (default)')
    prep.add_argument('--allow-subset', action='store_true')
    args = ap.parse_args(argv)
    if args.cmd == 'report':
        rows = read_scores_csv(args.scores)
        table = rbench_table(rows)
        sys.stdout.write(robustness_csv_text(table))
        failed = failure_counts(rows)
        if any(failed.values()):
            print(f'excluded failed scores: {failed}', file=sys.stderr)
        if args.tables:
            print(paper_tables(table), file=sys.stderr)
        return 0
    from vlmeval_ext.prepare.rbench import build_tsv
    result = build_tsv(args.source, args.out, allow_subset=args.allow_subset)
    print(f'wrote {result["rows"]} rows to {args.out} ({len(result["warnings"])} data warnings)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
