"""`<Dataset>-RC` as a kit dataset: prompts and scoring are the base dataset's own; we add the pairing report.

A plugin feature (no kit-dialect file of its own): names are every `<Dataset>-RC.tsv` built under $LMUData by
`vlmeval-ext corrupt`; loading goes through the plugin's strict checks (vlmeval_ext.datasets.LoadingChecks).
"""
from __future__ import annotations

import hashlib
import os
import os.path as osp
import shutil

import pandas as pd
from vlmeval.dataset.image_base import ImageBaseDataset

from vlmeval_ext.corrupt import kit as K
from vlmeval_ext.corrupt import report as R
from vlmeval_ext.corrupt import variants as V
from vlmeval_ext.datasets import LoadingChecks
from vlmeval_ext.io import (CutReplies, DataError, keep_uncut_replies, lmu_data_root, load_predictions, stem_path,
                            write_json)
from vlmeval_ext.locks import evaluation_lock
from vlmeval_ext.predictions import EMPTY, FAILED, classify_prediction, is_missing

IMAGE_COLUMNS = ('image', 'image_path')


def prediction_kind(value) -> str:
    """ANSWER, EMPTY or FAILED (core.predictions); a cell a number-guessing reader turned into a number is the
    answer's text."""
    return classify_prediction(value if isinstance(value, str) or is_missing(value) else str(value))


def _text(value) -> str:
    return '' if is_missing(value) else str(value).strip()


def seed_from_earlier_run(sub_dir: str) -> str | None:
    """A new run folder of the kit (`<model>/<run id>/`, the upstream kit starts one per run and copies only the
    files beside the predictions) gets the `_RC` folder of the latest earlier run of the same model and dataset:
    the kit's judge results in it are kept only for rows that are the very same (their `.rows-sha1`, see
    `_score_part`), so evaluating the same predictions again asks no judge call. Returns the folder copied."""
    from vlmeval.smp.file import list_eval_run_dirs
    if osp.exists(sub_dir):
        return None
    here = osp.dirname(sub_dir)
    for run in list_eval_run_dirs(osp.dirname(here), current_run_dir=here):      # the newest first
        earlier = osp.join(run, osp.basename(sub_dir))
        if osp.isdir(earlier) and not osp.islink(earlier):
            shutil.copytree(earlier, sub_dir, symlinks=True)
            return earlier
    return None


def base_rows(base, part: pd.DataFrame, where: str) -> pd.DataFrame:
    """The base dataset's own rows (images left out) for the indices of `part`, with part's predictions: the
    eval file its evaluator expects. A row whose index or question the base does not have is an error (the -RC
    was built from another copy of the base)."""
    data = base.data
    position = {int(i): k for k, i in enumerate(data['index'])}
    rows = []
    for idx, question in zip(part['index'], part['question'] if 'question' in part else [None] * len(part)):
        k = position.get(int(idx))
        if k is None:
            raise DataError(f'{where}: index {idx} is not in {base.dataset_name}; this -RC was built from another '
                            f'copy of it: rebuild it with `vlmeval-ext corrupt --data {base.dataset_name}`')
        theirs = data['question'].iloc[k] if 'question' in data else None
        if question is not None and not is_missing(theirs) and _text(question) != _text(theirs):
            raise DataError(f'{where}: index {idx}: the question differs from {base.dataset_name}\'s; this -RC was '
                            f'built from another copy of it: rebuild it with `vlmeval-ext corrupt --data '
                            f'{base.dataset_name}`')
        rows.append(k)
    frame = data.iloc[rows][[c for c in data.columns if c not in IMAGE_COLUMNS]].reset_index(drop=True)
    frame['prediction'] = ['' if is_missing(p) else str(p) for p in part['prediction']]
    return frame


class _TextTSV(ImageBaseDataset):
    def load_data(self, dataset):
        from vlmeval_ext.io import read_table
        return read_table(self.data_path)      # every cell as text


class CorruptedDataset(LoadingChecks, _TextTSV):
    """Paired reference/distorted variants of a kit image dataset, built by `vlmeval-ext corrupt --data NAME`.

    TYPE is 'VQA': the kit's run.py gives MCQ and Y/N datasets its default API judge when --judge is absent; an -RC
    chooses its own default instead (corrupt.kit.rc_judge: exact matching, no API).
    """
    TYPE = 'VQA'
    # Each row is asked with the base dataset's own prompt (build_prompt below), on the reference and on every
    # distorted image alike: a model's custom prompt must not replace it on some rows.
    force_use_dataset_prompt = True
    DATASET_URL: dict = {}
    DATASET_MD5: dict = {}
    REQUIRED_COLUMNS = ('index', 'image', *V.RC_COLUMNS)

    @classmethod
    def supported_datasets(cls):
        from vlmeval_ext.registry import rc_names
        return rc_names()

    def ensure_tsv(self, dataset: str) -> str:
        path = osp.join(lmu_data_root(), f'{dataset}.tsv')
        self.data_path = path
        if not osp.exists(path):
            raise DataError(f'{path}: not found; build it with `vlmeval-ext corrupt --data {V.base_name(dataset)}`')
        return path

    def __init__(self, dataset: str, skip_noimg: bool = True):
        V.base_name(dataset)
        super().__init__(dataset, skip_noimg)
        if self._from_predictions:
            return
        self.base_info = self._base()       # an -RC whose base the kit cannot score stops here, before inference
        self.base = self.base_info.dataset  # its prompts

    def _base(self) -> K.BaseDataset:
        root = lmu_data_root()
        return K.kit_base_dataset(V.base_name(self.dataset_name), self.dataset_name, root,
                                  osp.join(root, 'images', self.dataset_name))

    def check_row_images(self, line) -> None:
        """Checked, not written: the base dataset's dump_image writes them for its prompt. Base64 and image header
        only (an -RC holds one image per variant: decoding them all at every load would be slow)."""
        from vlmeval_ext.loading import BadImageCell, image_problem
        problem = image_problem(line['image'], decode=False)
        if problem:
            raise BadImageCell(f'{self.data_path}: index {line["index"]}, column \'image\': {problem}')

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        self.image_folder(self.base.img_root)   # the kit's dump_image writes there: only images of this TSV
        return self.base.build_prompt(line)  # the base dataset's own prompt, our (corrupted) image

    def _score_part(self, base: K.BaseDataset, rows: pd.DataFrame, sub_file: str, judge: K.RCJudge) -> tuple:
        """The base dataset's own evaluate on its rows -> (kit headline, {base index: score or None}). The kit's
        result files of an earlier evaluation of the very same rows are kept (its evaluators reuse them: no judge
        call is made again); rows that changed start afresh."""
        from vlmeval.smp import dump, load
        fingerprint = hashlib.sha1(rows.to_csv(sep='\t', index=False).encode('utf-8')).hexdigest()
        stamp = f'{sub_file}.rows-sha1'
        unchanged = osp.isfile(sub_file) and osp.isfile(stamp) and open(stamp).read().strip() == fingerprint
        if not unchanged:
            stem = osp.splitext(osp.basename(sub_file))[0]
            folder = osp.dirname(sub_file)
            for name in os.listdir(folder):       # the kit's caches of other rows under this file's name
                if name.startswith(stem):
                    os.remove(osp.join(folder, name))
            dump(rows, sub_file)
            with open(stamp, 'w') as f:
                f.write(fingerprint + '\n')
        result = base.dataset.evaluate(sub_file, **judge.kwargs)
        scored = K.kit_row_result_file(base.task, sub_file, judge.kwargs.get('model', judge.name))
        if not osp.isfile(scored):
            raise DataError(f'{sub_file}: the kit\'s {base.task} evaluator wrote no per-row result {scored}')
        match_to_score = K.kit_match_to_score(base.dataset.dataset_name) if base.task == 'VQA' else None
        scores = V.row_scores_from_result(load(scored), scored, match_to_score)
        return K.kit_headline(result), {int(i): scores.get(int(i)) for i in rows['index']}

    def evaluate(self, eval_file, **judge_kwargs):
        from vlmeval_ext.kit_workarounds.console import kit_lines_once
        with evaluation_lock(eval_file, self.dataset_name), kit_lines_once(self.dataset_name):
            return self._evaluate(eval_file, **judge_kwargs)

    def _evaluate(self, eval_file, **judge_kwargs):
        try:
            pred = load_predictions(eval_file, required=('index', 'prediction', *V.RC_COLUMNS))
        except CutReplies as cut:
            raise DataError(keep_uncut_replies(cut, eval_file)) from None
        base_name = V.base_name(self.dataset_name)
        parts = V.split_by_slot(pred)
        if 0 not in parts:
            raise DataError(f'{eval_file}: no reference rows (variant ref): cannot pair the distorted rows')
        base = getattr(self, 'base_info', None) or self._base()
        judge = K.rc_judge(judge_kwargs, base.task, base_name)
        K.check_judge(judge)
        idx = pd.to_numeric(pred['index']).astype('int64')
        combo_of = {int(k): (int(d), int(s)) for k, d, s in
                    zip(idx // V.INDEX_SLOT, pred['distortion'], pred['strength']) if k}
        stem, _ = osp.splitext(str(eval_file))
        sub_dir = stem + '_RC'
        seed_from_earlier_run(sub_dir)
        os.makedirs(osp.join(sub_dir, 'consistency'), exist_ok=True)
        fmt = K.kit_pred_format()
        items = sorted({int(i) % V.INDEX_SLOT % V.CIRCULAR_GROUP for i in idx})

        per_variant, failures, scores, answered = {}, {}, {}, {}
        for slot, part in parts.items():
            tag = 'ref' if slot == 0 else 'd{:02d}_s{}'.format(*combo_of[slot])
            kinds = part['prediction'].map(prediction_kind)
            answered[slot] = part[kinds != FAILED]   # empty answers included: the base's rule scores them
            kit_metric, row_scores = None, {}
            if len(answered[slot]):  # inference failures are counted, never handed to the kit to score
                rows = base_rows(base.dataset, answered[slot], str(eval_file))
                kit_metric, row_scores = self._score_part(
                    base, rows, osp.join(sub_dir, f'{osp.basename(stem)}_{tag}.{fmt}'), judge)
            by_item = {i % V.CIRCULAR_GROUP: s for i, s in row_scores.items()}
            present = {int(i) % V.CIRCULAR_GROUP for i in part['index']}
            failures[tag] = {'inference_failed': int((kinds == FAILED).sum()),
                             'not_scored': sum(1 for s in row_scores.values() if s is None),
                             'missing_row': len(set(items) - present)}
            scores[slot] = {i: by_item.get(i) for i in items}
            valid = [s for s in by_item.values() if s is not None]
            per_variant[tag] = {'kit_metric': kit_metric, 'mean': sum(valid) / len(valid) if valid else None,
                                'scored': len(valid), 'empty': int((kinds == EMPTY).sum()),
                                'failed': sum(failures[tag].values())}

        task = base.task
        graded = V.is_graded(base_name, [s for sc in scores.values() for s in sc.values()]) and task != 'MCQ'
        consistency = self._consistency(base, answered, combo_of, sub_dir, stem, fmt, judge,
                                        str(eval_file)) if graded else None
        dis = {combo_of[slot]: sc for slot, sc in scores.items() if slot}
        rows = V.paired_rows(scores[0], dis, consistency, task=task)
        table = R.rc_table(rows, task)
        note = R.approximation_note([d for d, _ in dis])
        relative_mode = ('consistency (distorted prediction scored against the reference prediction)'
                         if graded else 'distorted row right (relative = right on both)')

        pd.DataFrame(rows).to_csv(stem_path(eval_file, '_rc_scores.csv'), index=False)
        robust = pd.DataFrame(table).rename_axis('dimension').reset_index()
        robust.to_csv(stem_path(eval_file, '_robustness.csv'), index=False)
        excluded = sum(1 for r in rows if r['score_ref'] is None or r['score_com'] is None)
        summary = {'base_dataset': base_name, 'base_rows': base.source, 'task': task, 'judge': judge.block,
                   'relative_mode': relative_mode, 'per_variant': per_variant, **table, 'pairs': len(rows),
                   'pairs_excluded_from_relative': excluded, 'failures': failures,
                   'failed_rows': sum(v['failed'] for v in per_variant.values()),
                   'empty_rows': sum(v['empty'] for v in per_variant.values()), 'approximations': note}
        from vlmeval_ext.plugin.corrupted import item_intervals as rc_intervals
        summary.update(rc_intervals(pd.DataFrame(rows, columns=['pair_id', 'type', 'distortion', 'strength',
                                                                'score_ref', 'score_dis', 'score_com'])))
        write_json(summary, stem_path(eval_file, '_score.json'))
        report = R.markdown_report(self.dataset_name, task, table, per_variant, failures, relative_mode,
                                   judge.block, note)
        with open(stem_path(eval_file, '_robustness.md'), 'w', encoding='utf-8') as f:
            f.write(report)
        from vlmeval_ext.plugin.rbench import plot_radar, plot_task_strength
        from vlmeval_ext import run_context
        from vlmeval_ext.records.plots import model_of_file, no_plot_line, run_title
        typed = run_context.current().typed_model(model_of_file(eval_file, self.dataset_name))
        title = run_title(self.dataset_name, typed, judge.name, len(rows),
                          len(rows) - excluded)
        if plot_radar(table, stem_path(eval_file, '_radar.png'), title=f'{title}\nrobustness (0-1)'):
            plot_task_strength(table, stem_path(eval_file, '_strength.png'), title=title, tasks=(task,))
        else:
            print(no_plot_line(self.dataset_name, stem_path(eval_file, '_radar.png'), 'no pair was scored'))
        print(f'[{self.dataset_name}] {len(rows)} pairs, judge {judge.name}, relative = {relative_mode}; '
              f'{summary["failed_rows"]} inference-failed and {summary["empty_rows"]} empty rows; per distortion, '
              f'failures and approximations: {stem_path(eval_file, "_robustness.md")}')
        # What the kit prints (once): reference / absolute / relative by dimension, 0-1.
        dims = [d for d in robust['dimension'] if any(table[m].get(d) is not None for m in table)]
        title = f'{self.dataset_name} (0-1)'
        printed = pd.DataFrame([{title: metric, **{f'{d} (0-1)': table[metric].get(d) for d in dims}}
                                for metric in table]).round(4)
        return printed.astype(object).where(printed.notna(), 'n/a')

    def _consistency(self, base, answered, combo_of, sub_dir, stem, fmt, judge, where) -> dict:
        """{(d, s): {item: consistency}}: each distorted prediction scored by the base metric with its
        reference prediction as the answer (R-Bench's consistency for graded metrics)."""
        ref_pred = {int(i): ('' if is_missing(p) else str(p)) for i, p in
                    zip(answered[0]['index'], answered[0]['prediction'])}
        out = {}
        for slot, part in answered.items():
            if slot == 0:
                continue
            part = part[part['index'].astype(int).isin(ref_pred)]
            scores = {}
            if len(part):
                rows = base_rows(base.dataset, part, where)
                rows['answer'] = [V.consistency_answer(ref_pred[int(i)], a) for i, a in zip(rows['index'],
                                                                                          rows['answer'])]
                tag = 'd{:02d}_s{}'.format(*combo_of[slot])
                _, scores = self._score_part(base, rows, osp.join(sub_dir, 'consistency',
                                                                  f'{osp.basename(stem)}_{tag}.{fmt}'), judge)
            out[combo_of[slot]] = {i % V.CIRCULAR_GROUP: s for i, s in scores.items()}
        return out
