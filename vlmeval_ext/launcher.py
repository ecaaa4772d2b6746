"""`python run.py ...` / `vlmeval-ext run ...`: register our datasets, then hand over to the kit's own main.

Every kit flag works unchanged (the kit parses them). Two things are added around the kit:
- before: an unknown --data name gets the kit's message plus our names, and stops (the kit would warn and
  guess a "custom" dataset);
- after: the kit logs a failed model x dataset combination and exits 0; we read its status.json and exit 1
  naming the error, so scripts and CI see the failure.
Set VLMEVALKIT_RUN_PY=/path/to/VLMEvalKit/run.py to hand over to an upstream checkout's run.py instead.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from pathlib import Path


def _peek_args(argv):
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument('--data', nargs='+', default=[])
    parser.add_argument('--model', nargs='+', default=[])
    parser.add_argument('--work-dir', default='./outputs')
    parser.add_argument('--config', default=None)
    parser.add_argument('--base-url', default=None)
    args, _ = parser.parse_known_args(argv)
    return args


def check_dataset_names(names) -> list[str]:
    """Names neither the kit nor we know and with no TSV under $LMUData: the errors to print."""
    import vlmeval.dataset as kit
    from vlmeval.dataset.video_dataset_config import supported_video_datasets

    from vlmeval_ext.core.dataset import lmu_data_root
    from vlmeval_ext.registry import our_dataset_names
    ours = our_dataset_names()
    errors = []
    for name in names:
        if name in kit.SUPPORTED_DATASETS or name in supported_video_datasets:
            continue
        if os.path.exists(os.path.join(lmu_data_root(), f'{name}.tsv')):
            continue  # the kit's custom-dataset path: a user TSV under $LMUData
        errors.append(f'Dataset {name} is not officially supported and {lmu_data_root()}/{name}.tsv does not '
                      f'exist (the kit would skip it). vlmeval-ext datasets: {", ".join(ours)}')
    return errors


def failed_combinations(work_dir: str, models, datasets) -> list[str]:
    """Model x dataset combinations the kit recorded as failed in its status.json."""
    failures = []
    for model in models:
        status_file = Path(work_dir) / model / 'status.json'
        if not status_file.exists():
            continue
        status = json.loads(status_file.read_text())
        for name in datasets:
            entry = status.get('datasets', {}).get(name, {})
            message = entry.get('error_message') or entry.get('eval_error')
            if message:
                failures.append(f'{model} x {name}: {message}')
    return failures


JUDGE_CHECKED_ENV = 'VLMEVAL_EXT_JUDGE_CHECKED'
def judge_preflight(argv) -> str | None:
    """With an API --judge for one of our datasets, make one tiny call before inference starts: the kit would
    find a dead judge only after hours of inference. Returns the error, or None."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument('--judge', default=None)
    parser.add_argument('--judge-base-url', default=None)
    parser.add_argument('--judge-key', default=None)
    parser.add_argument('--mode', default='all')
    parser.add_argument('--data', nargs='+', default=[])
    args, _ = parser.parse_known_args(argv)
    from vlmeval_ext.core.judging import OFFLINE_JUDGES
    if not args.judge or args.judge in OFFLINE_JUDGES or args.judge == 'exact_matching' or args.mode == 'infer':
        return None
    from vlmeval_ext.registry import our_dataset_names
    ours = set(our_dataset_names())
    if not any(name in ours or name.endswith('-RC') for name in args.data):
        return None
    from vlmeval_ext.core.judge import JudgeUnavailable, preflight
    from vlmeval_ext.core.judging import kit_judge_caller
    kwargs = {'timeout': 60}
    if args.judge_base_url:
        kwargs['api_base'] = f"{args.judge_base_url.rstrip('/')}/chat/completions"
    if args.judge_key:
        kwargs['key'] = args.judge_key
    call, _ = kit_judge_caller(args.judge, **kwargs)
    try:
        preflight(call)
    except JudgeUnavailable as err:
        return str(err)
    # Checked once for the whole run: evaluate() need not ask again (see core.judging.bind_judge).
    os.environ[JUDGE_CHECKED_ENV] = args.judge
    return None


def run(argv: list[str]) -> int:
    from vlmeval_ext.registry import register_all
    register_all()
    args = _peek_args(argv)
    if args.data and not args.config:
        errors = check_dataset_names(args.data)
        if errors:
            for e in errors:
                print(f'[vlmeval-ext] ERROR: {e}', file=sys.stderr)
            return 2
    error = judge_preflight(argv)
    if error:
        print(f'[vlmeval-ext] ERROR: {error}', file=sys.stderr)
        return 2
    import vlmeval.inference  # noqa: F401  (bound `dump` by name: imported first so the patch reaches it)
    from vlmeval_ext.core.kit_patches import apply_all
    apply_all()
    sys.argv = ['run.py', *argv]
    upstream = os.environ.get('VLMEVALKIT_RUN_PY')
    if upstream:
        if not os.path.isfile(upstream):
            print(f'[vlmeval-ext] ERROR: VLMEVALKIT_RUN_PY={upstream} is not a file', file=sys.stderr)
            return 2
        runpy.run_path(upstream, run_name='__main__')
    else:
        from vlmeval.run import main
        main()
    models = args.model
    datasets = args.data
    if args.config:
        cfg = json.loads(Path(args.config).read_text())
        models, datasets = list(cfg.get('model', {})), list(cfg.get('data', {}))
    if int(os.environ.get('RANK', 0)) != 0:
        return 0
    failures = failed_combinations(os.environ.get('MMEVAL_ROOT', args.work_dir), models, datasets)
    for f in failures:
        print(f'[vlmeval-ext] FAILED: {f}', file=sys.stderr)
    return 1 if failures else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == '__main__':
    main()
