"""`vlmeval-ext <subcommand>` (also `python -m vlmeval_ext <subcommand>`)."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

from vlmeval_ext.errors import ExtError, report

# Subcommands implemented by a benchmark module: name -> ('module:function taking argv', help).
DELEGATED = {
    'corrupt-image': ('vlmeval_ext.corrupt.cli:corrupt_image_main', 'write the 33 distortions of one image'),
    'corrupt': ('vlmeval_ext.corrupt.cli:corrupt_dataset_main', 'build <Dataset>-RC paired robustness variants'),
    'rococo': ('vlmeval_ext.rococo.__main__:main', 'RoCOCO tools: prepare, embed, score, gallery, make-mixed'),
    'leaderboard': ('vlmeval_ext.core.leaderboard:leaderboard_main', 'collect a work dir into a leaderboard'),
    'diff-manifests': ('vlmeval_ext.core.manifest:diff_manifests_main', 'why two runs may disagree'),
    'summary': ('vlmeval_ext.core.summary:summary_main',
                'one table per benchmark of a work dir, with units (Markdown + CSV)'),
    'export-upstream': ('vlmeval_ext.upstream_export:export_main',
                        'write our benchmarks as kit-native code into a VLMEvalKit checkout, and its git diff'),
}


def _unknown(name: str) -> ExtError:
    from vlmeval_ext.registry import dataset_names
    return ExtError(f'unknown dataset {name!r}; ours are: {", ".join(dataset_names())}')


def _preparing_class(name: str):
    """The kit-free class whose `prepare` builds dataset `name` (prepare never imports the kit or torch)."""
    from vlmeval_ext.registry import evaluator_for_dataset
    cls = evaluator_for_dataset(name)
    if cls is None:
        raise _unknown(name)
    return cls


def _evaluation_class(name: str):
    """The class that evaluates `name`: kit-free unless its evaluate needs the kit (RoCOCO-MCQ, -RC)."""
    from vlmeval_ext.registry import class_for_evaluation
    cls = class_for_evaluation(name)
    if cls is None:
        raise _unknown(name)
    return cls


def cmd_run(argv):
    from vlmeval_ext.launcher import run
    return run(argv)


def cmd_eval(argv):
    p = argparse.ArgumentParser(prog='vlmeval-ext eval',
                                description='Evaluate an existing predictions file (.tsv/.xlsx/.csv) without the '
                                            'dataset TSV or the model. API keys come from the environment '
                                            '(OPENAI_API_KEY), never from the command line.')
    p.add_argument('--data', required=True, help='dataset name (`vlmeval-ext list`)')
    p.add_argument('--pred', required=True, help='predictions file; the kit names them <model>_<dataset>.xlsx')
    p.add_argument('--model', default=None,
                   help='model name recorded in the manifest and reports (default: the <model> of a '
                        '<model>_<dataset>.<ext> file name, else the file\'s folder)')
    p.add_argument('--judge', default=None, help='judge model name (kit build_judge), or "offline"')
    p.add_argument('--judge-base-url', default=None, help='OpenAI-compatible base URL, e.g. http://host:8000/v1')
    p.add_argument('--judge-args', default=None, help='JSON, e.g. {"judge_mode": "efficient"}')
    p.add_argument('--api-nproc', type=int, default=4)
    p.add_argument('--retry', type=int, default=3)
    p.add_argument('--judge-timeout', type=int, default=600)
    args = p.parse_args(argv)
    if not os.path.isfile(args.pred):
        raise ExtError(f'predictions file {args.pred} not found')
    cls = _evaluation_class(args.data)
    judge_kwargs = {'nproc': args.api_nproc, 'judge_retries': args.retry, 'timeout': args.judge_timeout}
    if args.judge_args:
        try:
            extra = json.loads(args.judge_args)
        except ValueError as err:
            raise ExtError(f'--judge-args is not valid JSON ({err}): {args.judge_args[:80]!r}') from None
        if not isinstance(extra, dict):
            raise ExtError(f'--judge-args must be a JSON object, e.g. {{"judge_mode": "efficient"}}; got '
                           f'{args.judge_args[:80]!r}')
        judge_kwargs.update(extra)
    if args.judge:
        judge_kwargs['model'] = args.judge
    if args.judge_base_url:
        judge_kwargs['api_base'] = f"{args.judge_base_url.rstrip('/')}/chat/completions"
    result = cls.for_evaluation(args.data).evaluate(args.pred, **judge_kwargs)
    _print_result(result)
    from vlmeval_ext.reporting import write_run_records
    records = write_run_records(args.data, args.pred, judge_kwargs, model_name=args.model)
    print(f'run records: {records["manifest"]}' + (f', {records["vs_paper"]}' if records['vs_paper'] else ''))
    return 0


def cmd_records(argv):
    p = argparse.ArgumentParser(prog='vlmeval-ext records',
                                description='Write <stem>_manifest.json (and <stem>_vs_paper.* when the model maps '
                                            'to a published row) for a predictions file the kit evaluated, e.g. '
                                            'after running the kit\'s own run.py. Our run.py does this itself.')
    p.add_argument('pred', help="the kit's predictions file, <work-dir>/<model>/[<run>/]<model>_<dataset>.xlsx")
    p.add_argument('--data', required=True)
    p.add_argument('--judge', default=None, help='the --judge of the run (recorded when the score file names none)')
    args = p.parse_args(argv)
    if not os.path.isfile(args.pred):
        raise ExtError(f'predictions file {args.pred} not found')
    _evaluation_class(args.data)
    from vlmeval_ext.reporting import write_run_records
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


def cmd_prepare(argv):
    p = argparse.ArgumentParser(prog='vlmeval-ext prepare',
                                description='Build the kit TSV under $LMUData from the official source, or from a '
                                            'local copy of the official release (--from) on offline machines. The '
                                            'folder layouts --from accepts are listed in the README ("Preparing '
                                            'the data").')
    p.add_argument('name')
    p.add_argument('--from', dest='source', default=None, help='local copy of the official release')
    p.add_argument('--coco-root', default=None,
                   help='RoCOCO: the COCO folder holding val2014/ (or set COCO_ROOT)')
    p.add_argument('--allow-subset', action='store_true',
                   help='R-Bench-Full, GRAB, ReMI: keep a source with fewer (or more) items than the official '
                        'release instead of stopping; the output says so')
    args = p.parse_args(argv)
    cls = _preparing_class(args.name)
    if not hasattr(cls, 'prepare'):
        raise ExtError(f'{args.name} is built by another command (see README)')
    options = _prepare_options(cls, args)
    path = cls.prepare(args.name, args.source, **options)
    from vlmeval_ext.core.io import file_md5
    print(f'{args.name}: {path} (md5 {file_md5(path)})')
    return 0


def _prepare_options(cls, args) -> dict:
    """The options given on the command line that this dataset's prepare takes; one it does not take is an
    error naming the datasets that do."""
    import inspect
    accepted = inspect.signature(cls.prepare).parameters
    options = {}
    for flag, dest, value in (('--coco-root', 'coco_root', args.coco_root),
                              ('--allow-subset', 'allow_subset', args.allow_subset)):
        if not value:
            continue
        if dest not in accepted:
            raise ExtError(f'prepare {args.name}: {flag} does not apply to this dataset')
        options[dest] = value
    return options


def cmd_list(argv):
    argparse.ArgumentParser(prog='vlmeval-ext list', description='our datasets and their state').parse_args(argv)
    from vlmeval_ext.core.io import file_md5, tsv_path
    from vlmeval_ext.registry import DATASET_CLASS_PATHS, evaluator_classes
    rows = []
    for cls, path in zip(evaluator_classes(), DATASET_CLASS_PATHS):
        for name in cls.supported_datasets():
            path = tsv_path(cls.source_split(name))
            if os.path.exists(path):
                state, size, md5 = 'prepared', f'{os.path.getsize(path) / 1e6:.1f} MB', file_md5(path)
            else:
                state, size, md5 = ('demo (ships in package)' if name in cls.DEMO_DATASETS else 'not prepared'), '-', '-'
            rows.append((name, path.partition(':')[2], state, size, md5))
    widths = [max(len(str(r[i])) for r in rows + [('dataset', 'class', 'state', 'size', 'md5')]) for i in range(5)]
    for r in [('dataset', 'class', 'state', 'size', 'md5')] + rows:
        print('  '.join(str(v).ljust(w) for v, w in zip(r, widths)))
    return 0


COMMANDS = {'run': (cmd_run, 'run.py with our datasets registered (all kit flags)'),
            'eval': (cmd_eval, 'evaluate an existing predictions file'),
            'records': (cmd_records, 'write the manifest and paper comparison of an evaluated predictions file'),
            'prepare': (cmd_prepare, 'build a dataset TSV under $LMUData'),
            'list': (cmd_list, 'our datasets and their state')}


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ('-h', '--help'):
        print('usage: vlmeval-ext <command> [args]\n\ncommands:')
        for name, (_, help_text) in {**COMMANDS, **DELEGATED}.items():
            print(f'  {name:15s} {help_text}')
        sys.exit(0 if argv else 2)
    name, rest = argv[0], argv[1:]
    from vlmeval_ext.core.logs import quiet_kit_notices
    from vlmeval_ext.core.secrets import install_log_redaction
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
