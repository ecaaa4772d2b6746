"""`vlmeval-ext <command>` (also `python -m vlmeval_ext <command>`). Every command asks the registry
(vlmeval_ext.registry) which benchmarks and datasets exist; `list`, `prepare` and every `--help` import no kit."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from vlmeval_ext.errors import ExtError, report

# Commands implemented elsewhere: name -> ('module:function taking argv', help).
DELEGATED = {
    'corrupt-image': ('vlmeval_ext.corrupt.cli:corrupt_image_main', 'write the 33 distortions of one image'),
    'corrupt': ('vlmeval_ext.corrupt.cli:corrupt_dataset_main', 'build <Dataset>-RC paired robustness variants'),
    'rococo': ('vlmeval_ext.cli.rococo:main',
               'RoCOCO tools: prepare, embed, score, gallery, make-mixed, demo-gallery'),
    'leaderboard': ('vlmeval_ext.records.leaderboard:leaderboard_main', 'collect a work dir into a leaderboard'),
    'diff-manifests': ('vlmeval_ext.records.manifest:diff_manifests_main', 'why two runs may disagree'),
    'summary': ('vlmeval_ext.records.summary:summary_main',
                'one table per benchmark of a work dir, with units (Markdown + CSV)'),
    'compare': ('vlmeval_ext.records.compare:compare_main',
                'does model B really beat model A? paired differences with intervals and p-values'),
    'report': ('vlmeval_ext.records.report_html:report_main',
               'one self-contained HTML page of a work dir: tables, plots and the items behind them'),
    'export-upstream': ('vlmeval_ext.cli.export_upstream:export_main',
                        'one patch per benchmark for a VLMEvalKit checkout, with its pull-request text'),
}


def _record(name: str):
    from vlmeval_ext.registry import benchmark_of, dataset_names
    record = benchmark_of(name)
    if record is None:
        import difflib
        near = difflib.get_close_matches(name, dataset_names(), n=3, cutoff=0.6)
        hint = f'did you mean {", ".join(near)}? ' if near else ''
        raise ExtError(f'unknown dataset {name!r}; {hint}`vlmeval-ext list` shows ours')
    return record


def cmd_run(argv):
    from vlmeval_ext.launcher import run
    return run(argv)


def eval_judge_kwargs(args) -> dict:
    """`eval`'s judge arguments: the launcher's (one builder for run.py and eval), plus eval's own --api-nproc and
    --retry."""
    from vlmeval_ext.launcher import judge_kwargs_of, judge_options_of, refuse_secrets
    refuse_secrets([args.judge_args or '', args.judge_base_url or ''])
    kit_args, options = judge_options_of(args.judge_args)
    kwargs = judge_kwargs_of(args, {**kit_args, **options})
    kwargs.setdefault('nproc', args.api_nproc)
    if args.retry is not None and 'judge_retries' not in options:
        kwargs['judge_retries'] = args.retry
    return kwargs


def cmd_eval(argv):
    p = argparse.ArgumentParser(prog='vlmeval-ext eval',
                                description='Evaluate an existing predictions file (.tsv/.xlsx/.csv) with the kit '
                                            "dataset's own evaluate, without the dataset TSV or the model. API keys "
                                            'come from the environment (OPENAI_API_KEY), never the command line.')
    p.add_argument('--data', required=True, help='dataset name (`vlmeval-ext list`)')
    p.add_argument('--pred', required=True, help='predictions file; the kit names them <model>_<dataset>.tsv')
    p.add_argument('--model', default=None,
                   help='model name recorded in the manifest and reports (default: the <model> of a '
                        '<model>_<dataset>.<ext> file name, else the file\'s folder)')
    p.add_argument('--judge', default=None, help='judge model name (the kit\'s build_judge), or "offline"')
    p.add_argument('--judge-base-url', default=None, help='OpenAI-compatible base URL, e.g. http://host:8000/v1')
    p.add_argument('--judge-args', default=None, help='JSON, e.g. {"judge_mode": "efficient"}')
    p.add_argument('--api-nproc', type=int, default=4, help='judge calls at once')
    p.add_argument('--retry', type=int, default=None, help='attempts after a failed judge call (default 3)')
    p.add_argument('--judge-timeout', type=int, default=600)
    args = p.parse_args(argv)
    if not os.path.isfile(args.pred):
        raise ExtError(f'predictions file {args.pred} not found')
    record = _record(args.data)
    kwargs = eval_judge_kwargs(args)
    from vlmeval_ext.interrupt import EXIT_STATUS, handling_ctrl_c, interrupted
    from vlmeval_ext.launcher import interrupted_line
    from vlmeval_ext.evaluation import evaluate, without_the_kit
    from vlmeval_ext.registry import plugin_class_of, register
    subject = without_the_kit(record, args.data, args.pred, kwargs)
    if subject is None:                         # an LLM judge to ask, or a benchmark only the kit dialect scores
        register(redact_logs=True, quiet_notices=True)
        dataset = plugin_class_of(record).for_predictions(args.data, args.pred)

        def score():
            return dataset.evaluate(args.pred, **kwargs)
    else:                                       # the same rules, without the kit's 10-20 s import
        def score():
            return evaluate(subject, record, args.pred, kwargs)
    try:
        with handling_ctrl_c(interrupted_line):
            result = score()
    except KeyboardInterrupt:
        print(f'[vlmeval-ext] INTERRUPTED: {interrupted_line()}', file=sys.stderr)
        return EXIT_STATUS
    if interrupted():
        return EXIT_STATUS
    _print_result(result)
    from vlmeval_ext.records.run_records import write_run_records
    records = write_run_records(args.data, args.pred, kwargs, model_name=args.model)
    print(f'run records: {records["manifest"]}' + (f', {records["vs_paper"]}' if records['vs_paper'] else ''))
    from vlmeval_ext.records.report_html import report_line
    print(report_line(Path(args.pred).resolve().parent))
    return 0


def cmd_records(argv):
    p = argparse.ArgumentParser(prog='vlmeval-ext records',
                                description='Write <stem>_manifest.json (and <stem>_vs_paper.* when the model maps '
                                            'to a published row) for a predictions file the kit evaluated, e.g. '
                                            'after running the kit\'s own run.py. Our run.py does this itself.')
    p.add_argument('pred', help="the kit's predictions file, <work-dir>/<model>/[<run>/]<model>_<dataset>.tsv")
    p.add_argument('--data', required=True)
    p.add_argument('--judge', default=None, help='the --judge of the run (recorded when the score file names none)')
    args = p.parse_args(argv)
    if not os.path.isfile(args.pred):
        raise ExtError(f'predictions file {args.pred} not found')
    record = _record(args.data)
    from pathlib import Path

    from vlmeval_ext.predictions import check_against_dataset
    from vlmeval_ext.io import load_predictions, stem_path
    preds = load_predictions(args.pred, required=record.prediction_columns)   # the file is one of this dataset
    if record.answer_columns and record.judge != 'embeddings':
        check_against_dataset(preds, args.pred, record, args.data)
    if not Path(stem_path(args.pred, '_score.json')).is_file() and not Path(
            stem_path(args.pred, '_efficient_score.json')).is_file():
        raise ExtError(f'{args.pred}: no score file beside it: evaluate it first (the kit\'s run.py, or '
                       f'`vlmeval-ext eval --data {args.data} --pred {args.pred}`)')
    from vlmeval_ext.records.run_records import write_run_records
    records = write_run_records(args.data, args.pred, {'model': args.judge} if args.judge else {})
    print(records['manifest'])
    if records['vs_paper']:
        print(records['vs_paper'])
    return 0


def _print_result(result):
    import pandas as pd
    if isinstance(result, pd.DataFrame):
        print(result.to_string(index=False))
    elif result is not None:
        print(json.dumps(result, indent=2, default=str))


PREPARE_FLAGS = {'coco_root': '--coco-root', 'allow_subset': '--allow-subset', 'max_side': '--max-side'}


def cmd_prepare(argv):
    p = argparse.ArgumentParser(prog='vlmeval-ext prepare',
                                description='Build the kit TSV under $LMUData from the official source, or from a '
                                            'local copy of the official release (--from) on offline machines. The '
                                            'folder layouts --from accepts are listed in the README ("Preparing '
                                            'data").')
    p.add_argument('name')
    p.add_argument('--from', dest='source', default=None, help='local copy of the official release')
    p.add_argument('--coco-root', default=None, help='RoCOCO: the COCO folder holding val2014/ (or set COCO_ROOT)')
    p.add_argument('--allow-subset', action='store_true',
                   help='R-Bench-Full, GRAB, ReMI: keep a source with fewer (or more) items than the official '
                        'release instead of stopping; the dataset is marked as a subset wherever it appears')
    p.add_argument('--max-side', type=int, default=None,
                   help='GRAB: cap on the long image side in px (default 2048; 0 keeps full size)')
    args = p.parse_args(argv)
    record = _record(args.name)
    if record.prepare is None:
        raise ExtError(f'{args.name} is built by another command (see README)')
    if args.name in record.demos:
        raise ExtError(f'{args.name} ships with the package (nothing to prepare)')
    from vlmeval_ext.prepare.common import mark_subset, prepare_options
    from vlmeval_ext.registry import load_object
    function = load_object(record.prepare)
    options = prepare_options(function, args.name, {k: getattr(args, k) for k in PREPARE_FLAGS}, PREPARE_FLAGS)
    path = function(args.name, args.source, **options)
    from vlmeval_ext.io import file_md5
    mark_subset(path, record, args.allow_subset)
    print(f'{args.name}: {path} (md5 {file_md5(path)})')
    return 0


def cmd_list(argv):
    argparse.ArgumentParser(prog='vlmeval-ext list', description='our datasets and their state').parse_args(argv)
    from vlmeval_ext.io import file_md5, tsv_path
    from vlmeval_ext.prepare.common import subset_note
    from vlmeval_ext.registry import BENCHMARKS, CORRUPTED, rc_names
    rows = []
    for record in (*BENCHMARKS, CORRUPTED):
        names = record.all_names() if record is not CORRUPTED else rc_names()
        for name in names:
            path = tsv_path(record.split_of(name))
            cls = (record.plugin_class or record.kit_class).partition(':')[2]
            if name in record.demos:
                state, size, md5 = 'demo (ships in package)', '-', record.demo_md5[record.demos[name]]
            elif os.path.exists(path):
                state = 'prepared' + (f' ({subset_note(path)})' if subset_note(path) else '')
                size, md5 = f'{os.path.getsize(path) / 1e6:.1f} MB', file_md5(path)
            else:
                state, size, md5 = 'not prepared', '-', '-'
            rows.append((name, cls, state, size, md5))
    head = ('dataset', 'class', 'state', 'size', 'md5')
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(5)]
    for r in [head] + rows:
        print('  '.join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
    return 0


def cmd_cache(argv):
    p = argparse.ArgumentParser(prog='vlmeval-ext cache',
                                description='The verdict cache: every judge verdict is stored the moment it arrives '
                                            'and reused by any later evaluation that asks the very same prompt of '
                                            'the same judge, endpoint and parameters. It is on by default; to judge '
                                            "again, pass --judge-args '{\"cache\": false}' or clear it here.")
    sub = p.add_subparsers(dest='action', required=True, metavar='ACTION')
    sub.add_parser('path', help='where the cache is ($VLMEVAL_EXT_CACHE, else $XDG_CACHE_HOME/vlmeval-ext, else '
                                '~/.cache/vlmeval-ext)')
    sub.add_parser('stats', help='its size, and the verdicts per judge and endpoint with the oldest and newest')
    clear = sub.add_parser('clear', help='delete the verdicts (and remembered rejections) of every judge, or of one')
    clear.add_argument('--judge', default=None, metavar='NAME', help='only this judge model name (see `stats`)')
    args = p.parse_args(argv)
    import time

    from vlmeval_ext.judging import STORE_FILE, VerdictStore, cache_dir
    path = cache_dir() / STORE_FILE
    if args.action == 'path':
        print(path)
        return 0
    if not path.is_file():
        print(f'{path}: no verdict cache yet (nothing was judged with the cache on)')
        return 0
    store = VerdictStore(path)
    if args.action == 'clear':
        judges = store.judges()
        if args.judge is not None and args.judge not in judges:
            raise ExtError(f'verdict cache {path}: no verdict of judge {args.judge!r}; its judges: '
                           f'{", ".join(sorted(judges)) or "none"}')
        verdicts, rejections = store.clear(args.judge)
        who = f' of judge {args.judge}' if args.judge is not None else ''
        print(f'{path}: deleted {verdicts} verdict(s) and {rejections} remembered rejection(s){who}')
        return 0

    def day(stamp):
        return time.strftime('%Y-%m-%d %H:%M', time.localtime(stamp))
    rows = store.stats()
    size = sum(f.stat().st_size for f in path.parent.glob(f'{STORE_FILE}*') if f.is_file())
    print(f'{path}: {size / 1e6:.1f} MB, {sum(r[2] for r in rows)} verdict(s), '
          f'{store.rejection_count()} remembered rejection(s)')
    if rows:
        head = ('judge', 'endpoint', 'verdicts', 'oldest', 'newest')
        table = [head] + [(r[0], r[1] or '(local)', str(r[2]), day(r[3]), day(r[4])) for r in rows]
        widths = [max(len(row[i]) for row in table) for i in range(5)]
        for row in table:
            print('  '.join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
    return 0


COMMANDS = {'run': (cmd_run, 'run.py with our datasets registered (all kit flags)'),
            'eval': (cmd_eval, 'evaluate an existing predictions file'),
            'records': (cmd_records, 'write the manifest and paper comparison of an evaluated predictions file'),
            'prepare': (cmd_prepare, 'build a dataset TSV under $LMUData'),
            'list': (cmd_list, 'our datasets and their state'),
            'cache': (cmd_cache, 'the verdict cache: path, stats, clear [--judge NAME]')}


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ('-h', '--help'):
        print('usage: vlmeval-ext <command> [args]\n\ncommands:')
        for name, (_, help_text) in {**COMMANDS, **DELEGATED}.items():
            print(f'  {name:15s} {help_text}')
        sys.exit(0 if argv else 2)
    name, rest = argv[0], argv[1:]
    from vlmeval_ext.kit_workarounds.console import install_log_redaction, quiet_kit_notices
    install_log_redaction()
    quiet_kit_notices()
    try:
        if name in COMMANDS:
            code = COMMANDS[name][0](rest)
        elif name in DELEGATED:
            module, _, func = DELEGATED[name][0].partition(':')
            code = getattr(importlib.import_module(module), func)(rest)
        else:
            print(f'[vlmeval-ext] ERROR: unknown command {name!r}; run `vlmeval-ext --help`', file=sys.stderr)
            code = 2
    except ExtError as err:
        code = report(err)
    sys.exit(code or 0)
