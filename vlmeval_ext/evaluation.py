"""One evaluation of a predictions file: the plugin's steps around a benchmark's scoring (kit-free).

Two things score a predictions file: the plugin class of a benchmark (vlmeval_ext.datasets, the kit-dialect class's
own `evaluate`, which the kit's run.py calls) and, for an evaluation that needs no LLM judge, `RuleScoring` here:
the same pure function of `vlmeval_ext/dataset/utils/<bench>.py` that the kit-dialect `evaluate` wraps, its tables
written as the kit's `dump` writes them, without importing the kit (`vlmeval-ext eval`; R-Bench has its own such
scorer for the offline judge and for a judge whose every verdict is cached: `without_the_kit` picks). Around either,
`evaluate` runs the same steps: one evaluation of a file at a time (vlmeval_ext.locks); our judge options taken out
of the kit's judge arguments; a reply echoing a configured key masked (one line); the predictions checked against the
dataset (vlmeval_ext.predictions); the scoring; then the score file gains `coverage`, notes, the judge calls paid and
the intervals, and the plots are drawn. When the judge could not give every verdict (down, the cache failed,
Ctrl-C), the score file is moved aside as `<stem>_score_incomplete.json` and the evaluation fails with one line.
"""
from __future__ import annotations

import json
import os
import os.path as osp
import time
from pathlib import Path

from vlmeval_ext import run_context
from vlmeval_ext.dataset.utils.exact_io import NO_JUDGE
from vlmeval_ext.errors import ExtError
from vlmeval_ext.io import CutReplies, DataError, keep_uncut_replies, load_predictions, stem_path, write_json
from vlmeval_ext.judging import OFFLINE_JUDGES, PLUGIN_OPTIONS, PROTOCOL_OPTIONS, check_judge_options
from vlmeval_ext.locks import evaluation_lock
from vlmeval_ext.registry import load_object


class JudgeIncomplete(ExtError):
    """The judge could not give every verdict: the evaluation is not a result (the same command resumes)."""


RESULT_SUFFIXES = ('.json', '.csv', '.tsv', '.xlsx', '.png', '.md')


def evaluate(subject, record, eval_file: str, judge_kwargs: dict):
    """Evaluate `eval_file` for `subject` (a plugin dataset class's instance, or RuleScoring), which provides
    `dataset_name`, `begin(options, eval_file)`, `result_tag(kwargs)`, `judge_arguments(kwargs, notes)`,
    `score(eval_file, handed)` (the table the kit prints) and `judges()` (the CachedJudges it made)."""
    with evaluation_lock(eval_file, record.title):
        return _evaluate(subject, record, str(eval_file), dict(judge_kwargs))


def _evaluate(subject, record, eval_file: str, judge_kwargs: dict):
    from vlmeval_ext.predictions import check_against_dataset, coverage_line
    from vlmeval_ext.io import tsv_path
    from vlmeval_ext.kit_workarounds.verbatim import restore as restore_verbatim
    from vlmeval_ext.prepare.common import subset_note
    from vlmeval_ext.secrets import mask_echoed_keys
    dataset = subject.dataset_name
    options, judge_kwargs = split_judge_kwargs(judge_kwargs)
    subject.begin(options, eval_file)
    restore_verbatim(eval_file)
    mask_echoed_keys(eval_file)
    try:
        preds = load_predictions(eval_file, required=record.prediction_columns)
    except CutReplies as cut:
        raise DataError(keep_uncut_replies(cut, eval_file)) from None
    coverage = check_against_dataset(preds, eval_file, record, dataset) if record.answer_columns \
        is not None and record.judge != 'embeddings' else None
    notes: list[str] = []
    try:
        subset = subset_note(tsv_path(record.split_of(dataset)))
    except DataError:                   # $LMUData names no folder: no dataset TSV there, so no subset mark either
        subset = None
    if subset:
        notes.append(f'{subset} (prepared with --allow-subset): not the whole benchmark, never ranked with the '
                     "paper's rows")
    tag = subject.result_tag(judge_kwargs)
    score_path = stem_path(eval_file, f'{tag}_score.json')
    finished = _finished_result(eval_file, score_path)
    table = subject.score(eval_file, subject.judge_arguments(dict(judge_kwargs), notes))
    judges = subject.judges()
    problems = [line for line in (j.outcome() for j in judges) if line]
    if problems:
        lacking = kept = ''
        if osp.exists(score_path):
            counts = json.loads(Path(score_path).read_text(encoding='utf-8')).get('counts') or {}
            lacking = f"; {counts.get('judge_failures', '?')} judged result(s) lack verdicts"
            os.replace(score_path, stem_path(eval_file, f'{tag}_score_incomplete.json'))
        if finished:                        # a finished result is never demoted by a rerun that could not finish
            for path, raw in finished.items():
                path.write_bytes(raw)
            kept = f'; the finished result of an earlier evaluation stays in {osp.basename(score_path)}'
        raise JudgeIncomplete(f'{dataset}: ' + '; '.join(problems) + lacking + kept
                              + '; run the same command to resume (nothing received is asked again)')
    score = add_to_score_file(subject, record, eval_file, score_path, coverage, notes, judges, options, tag)
    table = load_object(record.report).with_intervals(table, score)
    if coverage is not None:
        print(coverage_line(record.title, coverage))
    for note in notes:
        run_context.current().say_once(f'[{record.title}] {note}')
    return table


def say_judge_plan(subject, judge, name: str, found: int | None = None) -> None:
    """One line before judging: the judge calls to make, how many of them the verdict cache answers (`found`, where
    the caller counted them already), the items (from `subject.judge_requests`, where the benchmark plans its calls
    ahead)."""
    try:
        planned = subject.judge_requests(subject._eval_file, judge, name) if subject._eval_file else None
    except (ValueError, KeyError):
        planned = None                       # bad input: the evaluation itself says where, in one line
    if not planned or not planned[0]:
        return
    requests, items, upper = planned
    calls = sum(n for _, n in requests)
    upto = 'up to ' if upper else ''
    if judge.store is None:
        reused = 'the verdict cache is off (every call is made)'
    else:
        if found is None:
            found = sum(judge.store.get(judge.key(prompt, slot)) is not None
                        for prompt, n in requests for slot in range(1, n + 1))
        reused = f'{upto}{found} verdicts reused from the cache'
    print(f'{subject.dataset_name}: {upto}{calls} judge calls to make, {reused}, {items} items', flush=True)


def split_judge_kwargs(judge_kwargs: dict) -> tuple[dict, dict]:
    """(our judge options, checked; the judge arguments the benchmark's scoring gets, with the protocol options)."""
    kwargs = dict(judge_kwargs)
    ours = {k: kwargs.pop(k) for k in (*PLUGIN_OPTIONS, *PROTOCOL_OPTIONS) if k in kwargs}
    options = check_judge_options({**run_context.current().options, **ours})
    kwargs.update({k: options[k] for k in PROTOCOL_OPTIONS if k in options})
    return options, kwargs


def add_to_score_file(subject, record, eval_file: str, score_path: str, coverage, notes: list, judges: list,
                      options: dict, tag: str = '') -> dict:
    """The plugin's blocks in the score file (coverage, notes, judge calls actually paid), then the plots."""
    from vlmeval_ext.judging import shared_store
    score = json.loads(Path(score_path).read_text(encoding='utf-8'))
    if coverage is not None:
        score['coverage'] = coverage
    if notes:
        score['notes'] = [*(n for n in score.get('notes') or [] if not n.startswith('llm_extracted')), *notes]
    if judges:
        paid = {k: sum(j.stats[k] for j in judges)
                for k in ('made', 'cached', 'failed', 'rejected', 'rejected_before', 'rate_limited')}
        judge = judges[0]
        lowest = min(j.in_flight.lowest for j in judges)
        # the progress file's verdicts, less those the verdict cache put there for this evaluation (counted above)
        put = sum(j.put_in_progress_file for j in judges)
        paid['cached'] += put
        kept = ((score.get('judge') or {}).get('calls_cached') or 0) - put
        score['judge_calls'] = {'made': paid['made'], 'reused_from_cache': paid['cached'],
                                'kept_from_progress_file': kept,
                                'failed': paid['failed'], 'rejected_by_judge': paid['rejected'],
                                'rejected_earlier_not_asked': paid['rejected_before'],
                                'rate_limited_answers': paid['rate_limited'],
                                'lowest_concurrency': lowest,
                                'endpoint': judge.endpoint,
                                'parameters': judge.parameters, 'parameters_sha256': judge.params_sha,
                                'cache': 'off' if not options.get('cache', True) else str(shared_store().path)}
        took = time.monotonic() - min(j.created for j in judges)
        print(f'[{record.title}] judge {judge.name}: {paid["made"]} call(s) made, {paid["cached"]} '
              f'verdict(s) reused from the verdict cache, {kept} kept from the progress file beside the '
              f'predictions, {paid["failed"]} failed; judging took {took:.0f} s')
        if paid['rejected'] or paid['rejected_before']:
            rejected = paid['rejected'] + paid['rejected_before']
            print(f'[{record.title}] judge {judge.name} rejected {rejected}'
                  f' prompt(s) for good ({paid["rejected"]} this run, {paid["rejected_before"]} remembered from an '
                  'earlier run and not asked again): each is its item\'s judge failure, counted above; '
                  '--judge-args \'{"judge_retry_rejected": true}\' asks them again')
        if paid['rate_limited']:
            print(f'[{record.title}] judge {judge.name}: {paid["rate_limited"]} rate-limited answer(s) '
                  f'(HTTP 429), each waited out and asked again; calls in flight went down to {lowest}')
    report = load_object(record.report)
    report.extend_score(subject.dataset_name, eval_file, score)
    score.update(report.intervals(eval_file, score, tag))
    write_json(score, score_path)
    folder = self_model(eval_file, subject.dataset_name)
    report.write_extras(subject.dataset_name, eval_file, score, tag, model=run_context.current().typed_model(folder))
    return score


def _finished_result(eval_file: str, score_path: str) -> dict:
    """When an earlier evaluation finished (`score_path` holds a score): the bytes of every result file it wrote
    beside the predictions (`<stem>_*`: score, per-item tables, plots; not the progress and verdict logs, not the
    run record), so that a rerun that cannot finish puts them back. {} otherwise."""
    try:
        json.loads(Path(score_path).read_bytes())
    except (OSError, ValueError):
        return {}
    stem = Path(stem_path(eval_file, '_'))
    kept = {}
    for path in stem.parent.iterdir():
        if path.name.startswith(stem.name) and path.suffix in RESULT_SUFFIXES and path.is_file() \
                and not path.is_symlink() and not path.name.endswith(('_score_incomplete.json', '_manifest.json')):
            kept[path] = path.read_bytes()
    return kept


def self_model(eval_file, dataset: str) -> str:
    """The `<model>` of the kit's `<model>_<dataset>.<ext>` file name."""
    stem = Path(eval_file).stem
    suffix = f'_{dataset}'
    return stem[:-len(suffix)] if stem.endswith(suffix) and len(stem) > len(suffix) else stem


# ------------------------------------------------------------------------------------ scoring without the kit
def without_the_kit(record, dataset: str, eval_file: str, judge_kwargs: dict):
    """What scores this evaluation without the kit, or None where only the kit can: a benchmark's own answer where its
    plugin file has one (`Report.without_the_kit`: R-Bench, with the offline judge or every verdict cached); else
    RuleScoring for a benchmark scored by its rules (its plugin file's `rule_files`) and no LLM judge (the kit builds
    that)."""
    report = load_object(record.report)
    if report.without_the_kit is not None:
        return report.without_the_kit(record, dataset, eval_file, judge_kwargs)
    if report.rule_files is None:
        return None
    if report.LLM_JUDGE and judge_kwargs.get('model') not in (*NO_JUDGE, *OFFLINE_JUDGES):
        return None
    return RuleScoring(record, dataset)


class RuleScoring:
    """A benchmark scored by its pure rules without the kit (its plugin file's `rule_files`): the same function of
    `dataset/utils/<bench>.py` that the kit-dialect `evaluate` wraps, its tables written as the kit's `dump` writes
    them (vlmeval_ext.io.write_kit_table), so both give the same files."""

    def __init__(self, record, dataset_name: str):
        self.record, self.dataset_name = record, dataset_name
        self.report = load_object(record.report)

    def begin(self, options: dict, eval_file: str) -> None:
        pass

    def result_tag(self, judge_kwargs: dict) -> str:
        return ''

    def judge_arguments(self, judge_kwargs: dict, notes: list) -> dict:
        return self.report.judge_arguments(judge_kwargs, notes)

    def score(self, eval_file: str, handed: dict):
        from vlmeval_ext.dataset.utils.exact_io import read_text_table
        from vlmeval_ext.io import write_result_files
        files, table = self.report.rule_files(self.dataset_name, read_text_table(eval_file), eval_file, handed)
        write_result_files(eval_file, files)
        return table

    def judges(self) -> list:
        return []
