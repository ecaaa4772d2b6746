"""The plugin's dataset classes: each kit-dialect benchmark (vlmeval_ext.dataset.*) with what the plugin adds.

`PluginDataset` goes in front of a kit-dialect class; the kit's own `ImageBaseDataset.__init__` still runs. It adds,
each as one named step around the kit dialect's own methods (which stay the file that goes upstream):

- names: the plugin's demo splits (shipped in vlmeval_ext/demo/, copied to $LMUData on first use) beside the real
  names, from the benchmark's registry record;
- loading: `$LMUData/<split>.tsv` must exist (else one line: how to build it), its md5 must match (DATASET_MD5, else
  the `.md5` sidecar `prepare` writes; a mismatch is an error, never a silent re-download), and the table passes
  vlmeval_ext.loading's strict checks; a row whose image does not decode is left out of the run with one line and
  counted as a missing item; image files are written only inside the image folder, stamped with the TSV's md5;
- the judge: where the kit dialect's `evaluate` builds the kit's judge itself (`build_judge`), the plugin's `score`
  hands the same scoring (the dialect's `evaluate_with` / `score_items`) a CachedJudge (vlmeval_ext.judging): the
  kit's judge behind the verdict cache, counted retries, a dead-judge switch, one test call first;
- evaluate: one evaluation of a predictions file at a time (vlmeval_ext.locks: a second one waits, then reuses the
  first one's verdicts); our judge options taken out of the kit's judge arguments; a reply echoing a configured key
  masked in the predictions file (one line); the predictions checked against the dataset (vlmeval_ext.predictions);
  then the kit dialect's own evaluate; then the score file gains `coverage`, notes and intervals, and the plots are
  drawn. When the judge could not give every verdict (down, the cache failed, Ctrl-C), the score file is moved aside
  as `<stem>_score_incomplete.json` and the evaluation fails with one line saying how to resume.
"""
from __future__ import annotations

import functools
import os
import os.path as osp
import shutil
import sys

import pandas as pd

from vlmeval_ext import evaluation
from vlmeval_ext.evaluation import JudgeIncomplete
from vlmeval_ext.io import (DataError, file_md5, lmu_data_root, load_predictions, read_md5_sidecar, safe_name,
                            stem_path)
from vlmeval_ext.judging import (CachedJudge, build_kit_judge, cache_dir, judge_identity, kit_judge_arguments,
                                 shared_store)
from vlmeval_ext.kit_workarounds.judge_resolution import remember
from vlmeval_ext.loading import (KIT_REFERENCE_MAX, BadImageCell, default_suffix, images_from_tsv,
                                 kit_ready_table, safe_join, write_image_cell)
from vlmeval_ext.registry import BENCHMARKS, load_object


_RECORDS = {r.key: r for r in BENCHMARKS}
REPORT_OF = {r.key: load_object(r.report) for r in BENCHMARKS}


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

    # -- the judge: the kit's, behind the verdict cache
    def cached_judge(self, name: str, judge_kwargs: dict):
        """The CachedJudge for `name`, built from the kit's build_judge arguments `judge_kwargs`; its test call made
        and its plan said in one line."""
        options = self._judge_options
        store = shared_store() if options.get('cache', True) else None
        stem = stem_path(self._eval_file, '') if self._eval_file else None
        kit_judge = build_kit_judge(name, **dict(judge_kwargs))
        remember(name, kit_judge_arguments(judge_kwargs), kit_judge, cache_dir(), judge_identity)  # `eval`, no kit
        judge = CachedJudge(kit_judge, name, store=store,
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
        evaluation.say_judge_plan(self, judge, name)

    def judge_arguments(self, judge_kwargs: dict, notes: list) -> dict:
        """The judge arguments the kit dialect's evaluate gets: the plugin file's rule (plugin.base.Report)."""
        return REPORT_OF[self.record_key].judge_arguments(judge_kwargs, notes)

    def result_tag(self, judge_kwargs: dict) -> str:
        """The tag in the result file names for these judge arguments ('' for the default)."""
        return ''

    # -- evaluate (vlmeval_ext.evaluation: the plugin's steps around the kit dialect's own evaluate)
    def evaluate(self, eval_file, **judge_kwargs):
        return evaluation.evaluate(self, self.record(), eval_file, judge_kwargs)

    def begin(self, options: dict, eval_file: str) -> None:
        self._judge_options, self._judges, self._eval_file = options, [], eval_file

    def score(self, eval_file: str, handed: dict):
        self._handed = handed
        return super().evaluate(eval_file, **handed)

    def judges(self) -> list:
        return list(self._judges)


# ---------------------------------------------------------------------------------------------- the benchmarks
def _plugin_names(lower, record) -> tuple[dict, dict, dict]:
    urls = {**lower.DATASET_URL, **{name: '' for name in record.demos}}
    md5s = {**lower.DATASET_MD5, **{record.split_of(name): record.demo_md5[file] for name, file in record.demos.items()}}
    files = {name: record.demo_file(name) for name in record.demos}
    return urls, md5s, files


@functools.lru_cache(maxsize=None)
def plugin_class_of(key: str):
    """The class register() puts into the kit for the benchmark `key`: PluginDataset in front of its kit-dialect
    class, under the kit-dialect class's name, with the benchmark's own steps in front of both where its record names
    them (`plugin_steps`, a kit-free class of its plugin file): a benchmark needs no class here."""
    record = _RECORDS[key]
    lower = load_object(record.kit_class)
    steps = (load_object(record.plugin_steps),) if record.plugin_steps else ()
    urls, md5s, files = _plugin_names(lower, record)
    return type(lower.__name__, (*steps, PluginDataset, lower),
                {'record_key': key, 'DATASET_URL': urls, 'DATASET_MD5': md5s, 'DEMO_FILES': files,
                 'REQUIRED_COLUMNS': record.required_columns, '__module__': __name__,
                 '__doc__': f'{lower.__name__} with the plugin\'s steps'
                            + (f' ({steps[0].__name__}, PluginDataset).' if steps else ' (PluginDataset).')})


# Every benchmark's class, as register() puts it into the kit (names for tests and for `--config` lookups)
GRAB = plugin_class_of('GRAB')
RBenchFull = plugin_class_of('R-Bench-Full')
ReMI = plugin_class_of('ReMI')
RoCOCOMCQ = plugin_class_of('RoCOCO-MCQ')
RoCOCORetrieval = plugin_class_of('RoCOCO-retrieval')


__all__ = ['GRAB', 'RBenchFull', 'ReMI', 'RoCOCOMCQ', 'RoCOCORetrieval', 'PluginDataset', 'LoadingChecks',
           'JudgeIncomplete', 'KIT_REFERENCE_MAX']
