"""python -m vlmeval_ext.rbench report SCORES.csv   -> dimension,absolute,relative CSV on stdout
   python -m vlmeval_ext.rbench prepare OUT.tsv [--from DIR|modelscope|hf] [--allow-subset]"""
from __future__ import annotations

import argparse
import sys

from vlmeval_ext.rbench.report import failure_counts, paper_tables, rbench_table, read_scores_csv, robustness_csv_text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog='python -m vlmeval_ext.rbench')
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
    from vlmeval_ext.rbench.data import prepare
    result = prepare(args.source, args.out, allow_subset=args.allow_subset)
    print(f'wrote {result["rows"]} rows to {args.out} ({len(result["warnings"])} data warnings)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
