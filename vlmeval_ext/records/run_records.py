"""Run records: what an evaluation wrote, read back and recorded beside it (a named step after the kit's evaluate).

`write_run_records(dataset_name, eval_file, judge_kwargs)` reads the kit's output files of one model x dataset,
the predictions file `<model>_<dataset>.<ext>` and the `<stem>_score.json` our evaluate wrote, and writes

- `<stem>_manifest.json`: versions, dataset TSV md5, model, judge, prompt hashes, seeds, counts (core.manifest);
- `<stem>_vs_paper.md` / `.csv` when the model maps to a published row (core.published).

Our launcher calls it for every model x dataset of ours the kit evaluated; `vlmeval-ext eval` calls it after
evaluating a predictions file. Nothing in the kit's run calls it: a user who runs the kit's own run.py calls it
(or `vlmeval-ext records PRED --data NAME`) afterwards.

Keys read from `<stem>_score.json`: `judge` (`name` or `model`, `mode`, `endpoint_host`) and `counts` (`items`,
`scored`, `empty`, `inference_failures`, `judge_failures`, as the benchmark reports them). Where a file has no
`counts`, they are counted from the predictions file with the one rule of core.predictions; where it has no
`judge`, the benchmark's fixed judge (`run_record`) or the judge arguments of the run are recorded.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from vlmeval_ext.io import DataError, read_table, stem_path
from vlmeval_ext.judging import endpoint_hostname
from vlmeval_ext.records.manifest import KIT_EVAL_ID, model_dir_of, write_manifest
from vlmeval_ext.predictions import EMPTY, FAILED, classify_prediction


def model_name_of(eval_file: str | Path, dataset_name: str) -> str:
    """The model name in the kit's file name `<model>_<dataset>.<ext>`."""
    stem = Path(eval_file).stem
    suffix = f'_{dataset_name}'
    if not stem.endswith(suffix) or len(stem) == len(suffix):
        return model_dir_of(eval_file).name
    return stem[:-len(suffix)]


def prediction_counts(eval_file: str | Path) -> dict:
    """{'items', 'empty', 'inference_failures'} of a predictions file, by core.predictions' rule."""
    preds = read_table(eval_file)
    if 'prediction' not in preds.columns:
        raise DataError(f'{eval_file}: missing column \'prediction\'')
    kinds = [classify_prediction(v) for v in preds['prediction']]
    return {'items': len(kinds), 'empty': kinds.count(EMPTY), 'inference_failures': kinds.count(FAILED)}


def _judge_block(score: dict, record: dict, judge_kwargs: dict) -> dict:
    """The judge actually used: the score file's, else the benchmark's fixed one, else the run's arguments."""
    reported = score.get('judge') if isinstance(score.get('judge'), dict) else None
    calls = score.get('judge_calls') if isinstance(score.get('judge_calls'), dict) else {}
    if reported:
        judge = {'model': reported.get('name', reported.get('model')), 'mode': reported.get('mode')}
        if 'endpoint_host' in reported:
            judge['endpoint_host'] = reported['endpoint_host']
        for key in ('retries', 'offline_approximation', 'label'):
            if key in reported:
                judge[key] = reported[key]
        for key in ('endpoint', 'parameters'):        # what the judge was actually sent (vlmeval_ext.judging)
            if key in calls:
                judge[key] = calls[key]
        return judge
    if record.get('judge'):
        return dict(record['judge'])
    judge = {'model': judge_kwargs.get('model'), 'mode': judge_kwargs.get('judge_mode')}
    if judge_kwargs.get('api_base'):
        judge['endpoint_host'] = endpoint_hostname(judge_kwargs['api_base'])
    return judge


def _report(dataset_name: str):
    """The registry record and the report of a dataset (kit-free; any -RC, built or not)."""
    from vlmeval_ext.registry import benchmark_of, load_object
    record = benchmark_of(dataset_name)
    return record, (load_object(record.report) if record is not None and record.report else None)


def _link_beside_kit_files(path: str, eval_file: str | Path) -> None:
    """In an upstream checkout's layout (<model>/<eval id>/ files, linked from <model>/ by the kit), link a file
    we wrote into <model>/ the same way, so tools that read <model>/ find it."""
    run_dir = Path(eval_file).resolve().parent
    if not KIT_EVAL_ID.fullmatch(run_dir.name):
        return
    link = run_dir.parent / Path(path).name
    if link.is_symlink() or not link.exists():
        if link.is_symlink():
            link.unlink()
        link.symlink_to(Path(run_dir.name) / Path(path).name)


def write_run_records(dataset_name: str, eval_file: str | Path, judge_kwargs: dict | None = None,
                      model_name: str | None = None, model_info: dict | None = None, tag: str | None = None) -> dict:
    """Write `<stem>_manifest.json` (and `<stem>_vs_paper.*` when comparable) for one evaluated predictions file;
    with `tag` ('_efficient'), those of the tagged results. `model_info`: what was actually called (a served
    model's name, endpoint and generation arguments), recorded as the model. Returns {'manifest', 'vs_paper'}."""
    eval_file = str(eval_file)
    judge_kwargs = dict(judge_kwargs or {})
    model_name = model_name or model_name_of(eval_file, dataset_name)
    if tag is None:
        tag = '_efficient' if judge_kwargs.get('judge_mode') == 'efficient' else ''
    score_path = stem_path(eval_file, f'{tag}_score.json')
    score = json.loads(Path(score_path).read_text(encoding='utf-8')) if os.path.exists(score_path) else {}
    benchmark, report = _report(dataset_name)
    record = dict(report.run_record(dataset_name)) if report is not None else {}
    counts = score.get('counts') if isinstance(score.get('counts'), dict) else prediction_counts(eval_file)
    extra = {'judge': _judge_block(score, record, judge_kwargs), 'prompts': record.pop('prompts', {}),
             'seeds': record.pop('seeds', {}), 'counts': counts,
             **{k: v for k, v in record.items() if k != 'judge'}}
    tsv = None
    if benchmark is not None:
        from vlmeval_ext.io import tsv_path
        demo = benchmark.demo_file(dataset_name)
        tsv = demo or tsv_path(benchmark.split_of(dataset_name))
    manifest = write_manifest(dataset_name, eval_file, judge_kwargs, extra, n_items=counts.get('items'), tsv=tsv,
                              model_name=model_name, model_info=model_info, tag=tag)
    _link_beside_kit_files(manifest, eval_file)
    vs_paper = None
    if score:
        from vlmeval_ext.records.published import side_by_side_for_run
        if side_by_side_for_run(dataset_name, model_name, score_path) is not None:
            vs_paper = stem_path(eval_file, f'{tag}_vs_paper.md')
            for suffix in ('_vs_paper.md', '_vs_paper.csv'):
                _link_beside_kit_files(stem_path(eval_file, tag + suffix), eval_file)
    return {'manifest': manifest, 'vs_paper': vs_paper}
