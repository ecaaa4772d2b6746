"""The plugin's dataset classes: each kit-dialect benchmark (vlmeval_ext.dataset.*) with what the plugin adds.

`PluginDataset` goes in front of a kit-dialect class; the kit's own `ImageBaseDataset.__init__` still runs. It adds,
each as one named step around the kit dialect's own methods (which stay the file that goes upstream):

- names: the plugin's demo splits (shipped in vlmeval_ext/demo/, copied to $LMUData on first use) beside the real
  names, from the benchmark's registry record;
- loading: `$LMUData/<split>.tsv` must exist (else one line: how to build it), its md5 must match (DATASET_MD5, else
  the `.md5` sidecar `prepare` writes; a mismatch is an error, never a silent re-download), and the table passes
  vlmeval_ext.loading's strict checks; a row whose image does not decode is left out of the run with one line and
  counted as a missing item; image files are written only inside the image folder, stamped with the TSV's md5;
- the judge: the `judge()` hook answers with a CachedJudge (vlmeval_ext.judging): the kit's judge behind the
  verdict cache, counted retries, a dead-judge switch, one test call first;
- evaluate: one evaluation of a predictions file at a time (vlmeval_ext.locks: a second one waits, then reuses the
  first one's verdicts); our judge options taken out of the kit's judge arguments; a reply echoing a configured key
  masked in the predictions file (one line); the predictions checked against the dataset (vlmeval_ext.coverage);
  then the kit dialect's own evaluate; then the score file gains `coverage`, notes and intervals, and the plots are
  drawn. When the judge could not give every verdict (down, the cache failed, Ctrl-C), the score file is moved aside
  as `<stem>_score_incomplete.json` and the evaluation fails with one line saying how to resume.
"""
from __future__ import annotations

import json
import os
import os.path as osp
import pickle
import shutil
import sys
import time
from pathlib import Path

import pandas as pd

from vlmeval_ext import run_context
from vlmeval_ext.dataset import grab, rbench_full, remi, rococo_mcq, rococo_retrieval
from vlmeval_ext.errors import ExtError
from vlmeval_ext.io import (CutReplies, DataError, file_md5, keep_uncut_replies, lmu_data_root, load_predictions,
                            read_md5_sidecar, safe_name, stem_path, write_json)
from vlmeval_ext.judging import (NO_JUDGE, OFFLINE_JUDGES, PLUGIN_OPTIONS, PROTOCOL_OPTIONS, CachedJudge,
                                 JudgeOptionError, build_kit_judge, check_judge_options, shared_store)
from vlmeval_ext.locks import evaluation_lock
from vlmeval_ext.loading import (KIT_REFERENCE_MAX, BadImageCell, default_suffix, images_from_tsv,
                                 kit_ready_table, safe_join, write_image_cell)
from vlmeval_ext.registry import BENCHMARKS, SMOKE_TEST_MODELS, load_object


class JudgeIncomplete(ExtError):
    """The judge could not give every verdict: the evaluation is not a result (the same command resumes)."""


_RECORDS = {r.key: r for r in BENCHMARKS}


def _text(value) -> str:
    return '' if value is None or (isinstance(value, float) and value != value) else str(value)


class LoadingChecks:
    """Strict loading for a kit ImageBaseDataset: the TSV must exist and match its md5, its table passes
    vlmeval_ext.loading's checks, bad image rows are left out and counted, image files stay in their folder."""

    REQUIRED_COLUMNS: tuple = ('index',)
    DEMO_FILES: dict = {}                 # demo name -> shipped TSV path
    _from_predictions: str | None = None  # evaluate a predictions file without the TSV (vlmeval-ext eval)
    tsv_md5: str | None = None
    _images_checked: str | None = None

    def split_of(self, dataset: str) -> str:
        return dataset

    def image_rows(self, data: pd.DataFrame):
        """Which rows must hold an image (default: every row)."""
        return None

    @classmethod
    def for_predictions(cls, dataset: str, eval_file: str):
        """An instance that evaluates `eval_file` without the dataset TSV: its rows are the predictions' own."""
        obj = cls.__new__(cls)
        obj._from_predictions = str(eval_file)
        obj.__init__(dataset=dataset)
        return obj

    # -- the TSV
    def ensure_tsv(self, dataset: str) -> str:
        split = self.split_of(dataset)
        path = osp.join(lmu_data_root(), f'{split}.tsv')
        self.data_path = path
        if osp.exists(path):
            return path
        if dataset in self.DEMO_FILES:
            tmp = f'{path}.partial{os.getpid()}'
            shutil.copyfile(self.DEMO_FILES[dataset], tmp)
            os.replace(tmp, path)
            return path
        if self.DATASET_URL.get(split):
            return path                   # hosted: the kit dialect's load_data downloads it
        raise DataError(f'{path}: dataset TSV not found. Build it with `vlmeval-ext prepare {dataset}` (offline: '
                        f'`vlmeval-ext prepare {dataset} --from DIR`); LMUData={lmu_data_root()}')

    def check_md5(self, dataset: str, path: str) -> str | None:
        if not osp.exists(path):
            return None
        split = self.split_of(dataset)
        expected = self.DATASET_MD5.get(split)
        sidecar = path + '.md5'
        if expected is None and osp.exists(sidecar):
            expected = read_md5_sidecar(path, dataset)
        actual = file_md5(path)
        if expected and actual != expected:
            fix = (f'It ships with the package: delete it (`rm {path}`) and the next run copies it again'
                   if dataset in self.DEMO_FILES else
                   f'Rebuild it with `vlmeval-ext prepare {dataset}` (offline: `--from DIR`)')
            raise DataError(f'{path}: md5 {actual} does not match the expected {expected}; the file is damaged or '
                            f'from another source. {fix}')
        return actual

    def load_data(self, dataset):
        if self._from_predictions:
            data = load_predictions(self._from_predictions, required=('index',))
            self.data_path, self.bad_image_rows = self._from_predictions, {}
            return data.drop(columns=[c for c in ('prediction', 'image') if c in data])
        path = self.ensure_tsv(dataset)
        if osp.exists(path) and osp.getsize(path) == 0:
            raise DataError(f'{path}: the file is empty (0 bytes); rebuild it with `vlmeval-ext prepare {dataset}`')
        self.tsv_md5 = self.check_md5(dataset, path)
        data = self.downloaded(dataset, path) if not osp.exists(path) else super().load_data(dataset)
        self.data_path, self.bad_image_rows = path, {}
        self.tsv_md5 = self.tsv_md5 or file_md5(path)
        return self.validated(data, path)

    def downloaded(self, dataset: str, path: str) -> pd.DataFrame:
        """The kit dialect's load_data fetching a hosted TSV (DATASET_URL): a failed or damaged download is one
        line naming the URL, and no half-written file stays behind."""
        url = self.DATASET_URL.get(self.split_of(dataset))
        try:
            return super().load_data(dataset)
        except ValueError as err:
            if osp.exists(path):
                os.remove(path)
            raise DataError(f'{path}: the downloaded file\'s md5 is not the expected '
                            f'{self.DATASET_MD5.get(self.split_of(dataset))} ({url}); nothing was kept') from err
        except Exception as err:  # the kit's download_file raises what requests/urllib raise
            if osp.exists(path):
                os.remove(path)
            raise DataError(f'{dataset}: could not download {url} ({type(err).__name__}: {str(err)[:120]}); '
                            'check the connection, or build the TSV with `vlmeval-ext prepare`') from None

    def validated(self, data: pd.DataFrame, path: str) -> pd.DataFrame:
        return kit_ready_table(data, path, self.REQUIRED_COLUMNS, self.image_rows(data), self.bad_image_rows)

    def post_build(self, dataset):
        if self._from_predictions:
            self.meta_only = True
            return
        super().post_build(dataset)
        self.leave_out_bad_images()

    # -- images
    def leave_out_bad_images(self) -> dict:
        """Dump every row's image(s) now (build_prompt reuses them); a row whose image does not decode is left out
        of the run with one line naming file, index and column, and kept in `bad_image_rows`."""
        bad = dict(getattr(self, 'bad_image_rows', None) or {})
        if 'image' in self.data and not self.meta_only:
            for _, line in self.data.iterrows():
                if not _text(line['image']) and not isinstance(line['image'], list):
                    continue              # a row that takes no image (RoCOCO retrieval's caption rows)
                try:
                    self.check_row_images(line)
                except BadImageCell as err:
                    bad[str(line['index'])] = str(err)
        self.bad_image_rows = bad
        if not bad:
            return bad
        self.data = self.data[~self.data['index'].astype(str).isin(list(bad))].reset_index(drop=True)
        if self.data.empty:
            raise DataError(f'{self.data_path}: no row holds a decodable image (first: {next(iter(bad.values()))})')
        for reason in bad.values():
            print(f'[vlmeval-ext] WARNING: {reason}; this row is left out of the run and counted as a missing item',
                  file=sys.stderr, flush=True)
        return bad

    def check_row_images(self, line) -> None:
        self.dump_image(line)

    def image_folder(self, folder: str | None = None) -> str:
        """img_root (or `folder`), emptied first when its images were dumped from another version of the TSV."""
        folder = folder or self.img_root
        if self.tsv_md5 and self._images_checked != folder:
            images_from_tsv(folder, self.tsv_md5, getattr(self, 'data_path', None) or self.dataset_name)
            self._images_checked = folder
        os.makedirs(folder, exist_ok=True)
        return folder

    def dump_image(self, line):
        """The row's image(s) in img_root, never outside it: `<index>.jpg` for a JPEG, else `<index>.png`
        (`_<k>` before the suffix for the k-th of several), or the names of `image_path`."""
        from vlmeval.smp import read_ok
        self.image_folder()
        where = f'{self.data_path}: index {line["index"]}'
        images = line['image'] if isinstance(line['image'], list) else [line['image']]
        names = line.get('image_path') if 'image_path' in line else None
        if names is None or (isinstance(names, float) and pd.isna(names)):
            stems = [f'{line["index"]}'] if len(images) == 1 else [f'{line["index"]}_{i}' for i in range(len(images))]
            names = [stem + default_suffix(image) for stem, image in zip(stems, images)]
        names = names if isinstance(names, list) else [names]
        if len(names) != len(images):
            raise DataError(f'{where}: {len(images)} images but {len(names)} image_path entries')
        paths = []
        for image, name in zip(images, names):
            path = safe_join(self.img_root, str(name), where)
            if not read_ok(path):
                write_image_cell(image, path, where)
            paths.append(path)
        return paths


class PluginDataset(LoadingChecks):
    """A kit-dialect dataset with the plugin's steps (see the module docstring). A subclass names its record."""

    record_key: str = ''
    _judges: list = []
    _eval_file: str | None = None
    _judge_options: dict = {}
    _handed: dict = {}                      # the judge arguments handed to the kit dialect's evaluate

    @classmethod
    def record(cls):
        return _RECORDS[cls.record_key]

    def split_of(self, dataset):
        return self.record().split_of(dataset)

    # -- the judge hook of the kit dialect
    def judge(self, **judge_kwargs):
        name = judge_kwargs.pop('model')
        options = self._judge_options
        store = shared_store() if options.get('cache', True) else None
        stem = stem_path(self._eval_file, '') if self._eval_file else None
        judge = CachedJudge(build_kit_judge(name, **judge_kwargs), name, store=store,
                            log_path=f'{stem}_{safe_name(name)}_verdicts.jsonl' if stem else None,
                            unstored_path=f'{stem}_unstored_verdicts.jsonl' if stem else None,
                            retries=options.get('judge_retries', 3), backoff=options.get('judge_backoff', 0.5),
                            retry_rejected=options.get('judge_retry_rejected', False))
        judge.preflight()
        self._judges = [*self._judges, judge]
        self.say_judge_plan(judge, name)
        return judge

    # -- what judging is about to ask, said before it starts
    def judge_requests(self, eval_file: str, judge, name: str):
        """(the (prompt, calls) of each prompt the evaluation of `eval_file` is about to ask the judge, its item
        count, whether the calls are an upper bound); None where the benchmark does not plan its calls ahead."""
        return None

    def say_judge_plan(self, judge, name: str) -> None:
        """One line before judging: the judge calls to make, how many of them the verdict cache answers, the items."""
        try:
            planned = self.judge_requests(self._eval_file, judge, name) if self._eval_file else None
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
            found = sum(judge.store.get(judge.key(prompt, slot)) is not None
                        for prompt, n in requests for slot in range(1, n + 1))
            reused = f'{upto}{found} verdicts reused from the cache'
        print(f'{self.dataset_name}: {upto}{calls} judge calls to make, {reused}, {items} items', flush=True)

    def judge_arguments(self, judge_kwargs: dict, notes: list) -> dict:
        """The judge arguments the kit dialect's evaluate gets (a benchmark may drop a judge it cannot use)."""
        return judge_kwargs

    def result_tag(self, judge_kwargs: dict) -> str:
        """The tag in the result file names for these judge arguments ('' for the default)."""
        return ''

    # -- evaluate
    def evaluate(self, eval_file, **judge_kwargs):
        with evaluation_lock(eval_file, self.record().title):
            return self._evaluate(str(eval_file), **judge_kwargs)

    def _evaluate(self, eval_file: str, **judge_kwargs):
        from vlmeval_ext.coverage import check_against_dataset, coverage_line
        from vlmeval_ext.secrets import mask_echoed_keys
        from vlmeval_ext.kit_workarounds.verbatim import restore as restore_verbatim
        record = self.record()
        ours = {k: judge_kwargs.pop(k) for k in (*PLUGIN_OPTIONS, *PROTOCOL_OPTIONS) if k in judge_kwargs}
        options = check_judge_options({**run_context.current().options, **ours})
        judge_kwargs.update({k: options[k] for k in PROTOCOL_OPTIONS if k in options})
        self._judge_options, self._judges, self._eval_file = options, [], eval_file
        restore_verbatim(eval_file)
        mask_echoed_keys(eval_file)
        try:
            preds = load_predictions(eval_file, required=record.prediction_columns)
        except CutReplies as cut:
            raise DataError(keep_uncut_replies(cut, eval_file)) from None
        coverage = check_against_dataset(preds, eval_file, record, self.dataset_name) if record.answer_columns \
            is not None and record.judge != 'embeddings' else None
        notes: list[str] = []
        from vlmeval_ext.io import tsv_path
        from vlmeval_ext.prepare.common import subset_note
        subset = subset_note(tsv_path(self.split_of(self.dataset_name)))
        if subset:
            notes.append(f'{subset} (prepared with --allow-subset): not the whole benchmark, never ranked with the '
                         "paper's rows")
        tag = self.result_tag(judge_kwargs)
        score_path = stem_path(eval_file, f'{tag}_score.json')
        finished = _finished_result(eval_file, score_path)
        self._handed = self.judge_arguments(dict(judge_kwargs), notes)
        table = super().evaluate(eval_file, **self._handed)
        problems = [line for line in (j.outcome() for j in self._judges) if line]
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
            raise JudgeIncomplete(f'{self.dataset_name}: ' + '; '.join(problems) + lacking + kept
                                  + '; run the same command to resume (nothing received is asked again)')
        score = self.add_to_score_file(eval_file, score_path, coverage, notes, tag)
        table = load_object(record.report).with_intervals(table, score)
        if coverage is not None:
            print(coverage_line(record.title, coverage))
        for note in notes:
            run_context.current().say_once(f'[{record.title}] {note}')
        return table

    def extend_score(self, score: dict, eval_file: str) -> None:
        """A benchmark's own additions to its score file (default: none)."""

    def add_to_score_file(self, eval_file: str, score_path: str, coverage, notes: list, tag: str = '') -> dict:
        """The plugin's blocks in the score file (coverage, notes, judge calls actually paid), then the plots."""
        score = json.loads(Path(score_path).read_text(encoding='utf-8'))
        if coverage is not None:
            score['coverage'] = coverage
        if notes:
            score['notes'] = [*(n for n in score.get('notes') or [] if not n.startswith('llm_extracted')), *notes]
        if self._judges:
            paid = {k: sum(j.stats[k] for j in self._judges)
                    for k in ('made', 'cached', 'failed', 'rejected', 'rejected_before', 'rate_limited')}
            judge = self._judges[0]
            lowest = min(j.in_flight.lowest for j in self._judges)
            kept = (score.get('judge') or {}).get('calls_cached') or 0     # the kit's progress file, not asked
            score['judge_calls'] = {'made': paid['made'], 'reused_from_cache': paid['cached'],
                                    'kept_from_progress_file': kept,
                                    'failed': paid['failed'], 'rejected_by_judge': paid['rejected'],
                                    'rejected_earlier_not_asked': paid['rejected_before'],
                                    'rate_limited_answers': paid['rate_limited'],
                                    'lowest_concurrency': lowest,
                                    'endpoint': judge.endpoint,
                                    'parameters': judge.parameters, 'parameters_sha256': judge.params_sha,
                                    'cache': 'off' if not self._judge_options.get('cache', True)
                                    else str(shared_store().path)}
            took = time.monotonic() - min(j.created for j in self._judges)
            print(f'[{self.record().title}] judge {judge.name}: {paid["made"]} call(s) made, {paid["cached"]} '
                  f'verdict(s) reused from the verdict cache, {kept} kept from the progress file beside the '
                  f'predictions, {paid["failed"]} failed; judging took {took:.0f} s')
            if paid['rejected'] or paid['rejected_before']:
                rejected = paid['rejected'] + paid['rejected_before']
                print(f'[{self.record().title}] judge {judge.name} rejected {rejected}'
                      f' prompt(s) for good ({paid["rejected"]} this run, {paid["rejected_before"]} remembered from an '
                      'earlier run and not asked again): each is its item\'s judge failure, counted above; '
                      '--judge-args \'{"judge_retry_rejected": true}\' asks them again')
            if paid['rate_limited']:
                print(f'[{self.record().title}] judge {judge.name}: {paid["rate_limited"]} rate-limited answer(s) '
                      f'(HTTP 429), each waited out and asked again; calls in flight went down to {lowest}')
        self.extend_score(score, eval_file)
        report = load_object(self.record().report)
        score.update(report.intervals(eval_file, score, tag))
        write_json(score, score_path)
        folder = self_model(eval_file, self.dataset_name)
        report.write_extras(self.dataset_name, eval_file, score, tag, model=run_context.current().typed_model(folder))
        return score


RESULT_SUFFIXES = ('.json', '.csv', '.tsv', '.xlsx', '.png', '.md')


def _progress(path: str) -> dict | None:
    """A kit dialect's judge progress file, read only ({} when absent; None when cut short, the failures the kit
    dialect's load_progress catches too: the evaluation then moves it aside and says so in one line)."""
    try:
        with open(path, 'rb') as f:
            data = pickle.load(f)
    except FileNotFoundError:
        return {}
    except (EOFError, pickle.UnpicklingError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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


# ---------------------------------------------------------------------------------------------- the benchmarks
def _plugin_names(lower, record) -> tuple[dict, dict, dict]:
    urls = {**lower.DATASET_URL, **{name: '' for name in record.demos}}
    md5s = {**lower.DATASET_MD5, **{record.split_of(name): record.demo_md5[file] for name, file in record.demos.items()}}
    files = {name: record.demo_file(name) for name in record.demos}
    return urls, md5s, files


class GRAB(PluginDataset, grab.GRAB):
    record_key = 'GRAB'
    DATASET_URL, DATASET_MD5, DEMO_FILES = _plugin_names(grab.GRAB, _RECORDS['GRAB'])
    REQUIRED_COLUMNS = _RECORDS['GRAB'].required_columns

    def judge_arguments(self, judge_kwargs, notes):
        name = judge_kwargs.get('model')
        if 'caption_seed' in judge_kwargs:
            raise JudgeOptionError('--judge-args "caption_seed" is R-Bench\'s (the captions its efficient mode '
                                   'judges); GRAB has no captions to draw')
        if name in OFFLINE_JUDGES:
            judge_kwargs.pop('model')
            notes.append(f"llm_extracted: skipped (--judge {name}: GRAB's answer extraction needs an LLM judge and has "
                         'no offline approximation); official and normalized need no judge')
        return judge_kwargs

    def judge_requests(self, eval_file, judge, name):
        from vlmeval.smp import get_intermediate_file_path

        from vlmeval_ext.dataset.utils import grab as rules
        from vlmeval_ext.dataset.utils.exact_io import is_infer_fail, judge_id, read_text_table
        done = _progress(get_intermediate_file_path(eval_file, '_grab_extraction', 'pkl'))
        if done is None:
            return None
        rows = [{'index': item['index'], 'question': item['question'], 'prediction': item['prediction'],
                 'answer': rules.answer_text(item['answer'], item['question']),
                 'failed': True if is_infer_fail(item['prediction']) else None}
                for item in read_text_table(eval_file).to_dict('records')]
        mode = self._handed.get('judge_mode', 'official')
        _, todo = rules.extraction_requests(rows, done, judge_id(name, judge), mode)
        return [(rules.extraction_prompt(q, p), 1) for q, p in todo.values()], len(rows), False


class RBenchFull(PluginDataset, rbench_full.RBenchFull):
    record_key = 'R-Bench-Full'
    DATASET_URL, DATASET_MD5, DEMO_FILES = _plugin_names(rbench_full.RBenchFull, _RECORDS['R-Bench-Full'])
    REQUIRED_COLUMNS = _RECORDS['R-Bench-Full'].required_columns

    def judge_arguments(self, judge_kwargs, notes):
        if judge_kwargs.get('model') in NO_JUDGE[1:]:
            raise JudgeIncomplete('R-Bench needs an LLM judge (the kit would fall back to exact matching): pass '
                                  '--judge MODEL (an OpenAI-compatible judge, see README) or --judge offline')
        if judge_kwargs.get('model') in OFFLINE_JUDGES:
            from vlmeval_ext.offline_judge import OFFLINE_LABEL
            notes.append(f"judge {judge_kwargs['model']}: {OFFLINE_LABEL}; every table says so")
        elif judge_kwargs.get('judge_mode') == 'efficient' and judge_kwargs.get('caption_seed') is None:
            # drawn here, not in the kit dialect, so the calls can be counted before judging: the seed a started
            # progress file holds (a resumed run keeps its draws), else a fresh random one
            saved = (_progress(self._progress_file()) or {}).get('caption_seed')
            judge_kwargs['caption_seed'] = int(saved) if saved is not None else int.from_bytes(os.urandom(4), 'big')
        return judge_kwargs

    def _progress_file(self) -> str:
        from vlmeval.smp import get_intermediate_file_path
        return get_intermediate_file_path(self._eval_file, '_rbench_judge', 'pkl')

    def judge_requests(self, eval_file, judge, name):
        from vlmeval_ext.dataset.utils import rbench_full as rules
        from vlmeval_ext.dataset.utils.exact_io import judge_id, read_text_table
        done = _progress(self._progress_file())
        if done is None:
            return None
        mode = self._handed.get('judge_mode', 'official')
        items = rules.pair_rows(read_text_table(eval_file), eval_file)[0]
        _, demands, _, todo = rules.judge_requests(items, mode, self._handed.get('caption_seed'), done,
                                                   judge_id(name, judge), eval_file)
        return [(p, rules.calls_of(demands, p)) for p in todo], len(items), mode == 'efficient'

    def result_tag(self, judge_kwargs):
        return '_efficient' if judge_kwargs.get('judge_mode') == 'efficient' else ''

    def score_items(self, items, eval_file, **judge_kwargs):
        name = judge_kwargs.get('model')
        if name in OFFLINE_JUDGES:
            from vlmeval_ext.offline_judge import score_items_offline
            return score_items_offline(items, name)
        return super().score_items(items, eval_file, **judge_kwargs)


class ReMI(PluginDataset, remi.ReMI):
    record_key = 'ReMI'
    DATASET_URL, DATASET_MD5, DEMO_FILES = _plugin_names(remi.ReMI, _RECORDS['ReMI'])
    REQUIRED_COLUMNS = _RECORDS['ReMI'].required_columns


class RoCOCOMCQ(PluginDataset, rococo_mcq.RoCOCOMCQ):
    record_key = 'RoCOCO-MCQ'
    DATASET_URL, DATASET_MD5, DEMO_FILES = _plugin_names(rococo_mcq.RoCOCOMCQ, _RECORDS['RoCOCO-MCQ'])
    REQUIRED_COLUMNS = _RECORDS['RoCOCO-MCQ'].required_columns


class RoCOCORetrieval(PluginDataset, rococo_retrieval.RoCOCORetrieval):
    record_key = 'RoCOCO-retrieval'
    DATASET_URL, DATASET_MD5, DEMO_FILES = _plugin_names(rococo_retrieval.RoCOCORetrieval,
                                                         _RECORDS['RoCOCO-retrieval'])
    REQUIRED_COLUMNS = _RECORDS['RoCOCO-retrieval'].required_columns

    def image_rows(self, data):
        kinds = {str(k) for k in data['kind']}
        if not kinds <= {'image', 'text'}:
            raise DataError(f'{self.data_path}: column \'kind\' must be image or text, found {sorted(kinds)}')
        return [str(k) == 'image' for k in data['kind']]

    def validated(self, data, path):
        # The kit dialect's load_data keeps the image column aside (caption rows have none): checked with it.
        table = super().validated(data.assign(image=self._images.values), path)
        self._images = table.pop('image')
        return table

    def load_data(self, dataset):
        if self._from_predictions:
            self._images = pd.Series(dtype=object)
        return super().load_data(dataset)

    def post_build(self, dataset):
        if self._from_predictions:
            self.meta_only = True
            return
        super().post_build(dataset)

    def dump_image(self, line):
        self.image_folder()
        safe_join(self.img_root, f'{line["index"]}.jpg', f'{self.data_path}: index {line["index"]}')
        try:
            return rococo_retrieval.RoCOCORetrieval.dump_image(self, line)
        except (ValueError, OSError) as err:     # not base64, or not an image
            raise BadImageCell(f'{self.data_path}: index {line["index"]}, column \'image\': not a decodable base64 '
                               f'image ({type(err).__name__}: {str(err)[:80]})') from err

    def extend_score(self, score: dict, eval_file: str) -> None:
        if self_model(eval_file, self.dataset_name) in SMOKE_TEST_MODELS:
            from vlmeval_ext.plugin.rococo_retrieval import SMOKE_TEST_NOTE
            score['note'] = SMOKE_TEST_NOTE
            run_context.current().say_once(f'[RoCOCO] {SMOKE_TEST_NOTE}')


def self_model(eval_file, dataset: str) -> str:
    """The `<model>` of the kit's `<model>_<dataset>.<ext>` file name."""
    stem = Path(eval_file).stem
    suffix = f'_{dataset}'
    return stem[:-len(suffix)] if stem.endswith(suffix) and len(stem) > len(suffix) else stem


__all__ = ['GRAB', 'RBenchFull', 'ReMI', 'RoCOCOMCQ', 'RoCOCORetrieval', 'PluginDataset', 'LoadingChecks',
           'JudgeIncomplete', 'KIT_REFERENCE_MAX']
