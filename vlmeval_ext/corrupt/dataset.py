"""`<Dataset>-RC` as a kit dataset: prompts and scoring are the base dataset's own; we add the pairing report."""
from __future__ import annotations

import glob
import os
import os.path as osp
import shutil

import pandas as pd

from vlmeval_ext.core.dataset import ExtImageDataset, lmu_data_root
from vlmeval_ext.core.io import DataError, load_predictions, read_table, stem_path, write_json
from vlmeval_ext.corrupt import variants as V


def kit_base_class(name: str, columns) -> type:
    """The kit class that owns base dataset `name` (the kit's own lookup order), or the kit's custom MCQ/VQA
    class for a user's TSV, chosen by its columns as the kit's build_dataset does."""
    import vlmeval.dataset as kit
    for cls in kit.DATASET_CLASSES:
        if cls is CorruptedDataset:
            continue
        if name in cls.supported_datasets():
            return cls
    return kit.CustomMCQDataset if {'A', 'B'} <= set(columns) else kit.CustomVQADataset


def base_without_tsv(name: str, data: pd.DataFrame, img_root: str):
    """The base dataset object, built WITHOUT loading its TSV.

    Why: the kit's `__init__` re-downloads a local TSV whose md5 differs from its DATASET_MD5 (any sampled or
    user-made copy; offline it fails), and runs list cells as Python code. Everything the base needs for prompts and
    scoring is already in our -RC rows (its own columns), so we hand it those rows as its `data`. Its images
    go under our own image folder, so a rebuilt -RC never reuses stale images of another build.
    """
    cls = kit_base_class(name, data.columns)
    obj = cls.__new__(cls)
    obj.dataset_name = name
    obj.data = data
    obj.img_root = img_root
    obj.meta_only = 'image' not in data
    obj.skip_noimg = True
    obj.data_path = osp.join(lmu_data_root(), f'{name}.tsv')
    obj.post_build(name)
    return obj


def _kit_match_to_score(base_name: str):
    """The kit's own reduction of a VQA row's per-answer matches (max for ChartQA, ANLS threshold for DocVQA,
    mean for TextVQA), so per-row scores average to the kit's headline number."""
    from vlmeval.dataset.utils.vqa_eval import hit_calculate
    return lambda matches: float(hit_calculate([{'match': matches}], base_name)[0])


def _kit_headline(result) -> float | None:
    """The base evaluate's headline number ('Overall' where it reports one)."""
    if isinstance(result, pd.DataFrame) and len(result):
        for key in ('Overall', 'overall', 'acc', 'Acc'):
            if key in result.columns:
                return float(result[key].iloc[0])
    if isinstance(result, dict):
        for key in ('Overall', 'overall', 'acc'):
            if key in result:
                return float(result[key])
    return None


def _result_table(sub_file: str) -> pd.DataFrame:
    """The per-row result table the base evaluator wrote beside `sub_file` (kit names: `_<judge>_result`,
    `_results`); the newest one if several."""
    stem, _ = osp.splitext(sub_file)
    found = [p for p in glob.glob(stem + '_*result*.*') if p.endswith(('.xlsx', '.csv', '.tsv', '.json'))]
    if not found:
        raise DataError(f'{sub_file}: the base evaluator wrote no per-row result file ({stem}_*result*)')
    return read_table(max(found, key=osp.getmtime))


class CorruptedDataset(ExtImageDataset):
    """Paired reference/distorted variants of a kit image dataset, built by `vlmeval-ext corrupt --data NAME`."""

    SPEC = 'corrupt'
    DATASET_URL: dict = {}
    DATASET_MD5: dict = {}
    REQUIRED_COLUMNS = ('index', 'image', *V.RC_COLUMNS)

    @classmethod
    def supported_datasets(cls):
        """Every `<Dataset>-RC.tsv` already built under $LMUData."""
        root = os.environ.get('LMUData') or osp.join(osp.expanduser('~'), 'LMUData')
        return sorted(osp.basename(p)[:-4] for p in glob.glob(osp.join(root, f'*{V.RC_SUFFIX}.tsv')))

    @classmethod
    def for_evaluation(cls, dataset: str):
        V.base_name(dataset)  # any <Dataset>-RC: evaluation needs only the predictions file
        obj = cls.__new__(cls)
        obj.dataset_name = dataset
        obj.data = None
        return obj

    def __init__(self, dataset: str, skip_noimg: bool = True):
        super().__init__(dataset, skip_noimg)
        self.base = base_without_tsv(V.base_name(dataset), self.data, self.img_root)
        # the kit decides prompt handling by TYPE: take the base dataset's
        self.TYPE = getattr(self.base, 'TYPE', self.TYPE)

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        return self.base.build_prompt(line)  # the base dataset's own prompt, our (corrupted) image

    def _score_part(self, base, part: pd.DataFrame, sub_file: str, base_name: str, judge_kwargs) -> tuple:
        """Run the base dataset's own evaluate on rows in its format -> (kit headline, {base index: score})."""
        part.to_excel(sub_file, index=False)
        base.data = part.drop(columns=['prediction'])  # what the kit's MCQ evaluate checks predictions against
        result = base.evaluate(sub_file, **dict(judge_kwargs))
        match_to_score = _kit_match_to_score(base_name) if base.TYPE == 'VQA' else None
        return _kit_headline(result), V.row_scores_from_result(_result_table(sub_file), sub_file, match_to_score)

    def evaluate(self, eval_file, **judge_kwargs):
        pred = load_predictions(eval_file, required=('index', 'prediction', *V.RC_COLUMNS))
        base_name = V.base_name(self.dataset_name)
        parts = V.split_by_slot(pred)
        if 0 not in parts:
            raise DataError(f'{eval_file}: no reference rows (variant ref): cannot pair the distorted rows')
        idx = pd.to_numeric(pred['index']).astype('int64')
        combo_of = {int(k): (int(d), int(s)) for k, d, s in
                    zip(idx // V.INDEX_SLOT, pred['distortion'], pred['strength']) if k}
        stem, _ = osp.splitext(str(eval_file))
        sub_dir = stem + '_RC'
        shutil.rmtree(sub_dir, ignore_errors=True)  # the kit's result caches must not outlive these predictions
        os.makedirs(osp.join(sub_dir, 'consistency'))
        base = base_without_tsv(base_name, parts[0].drop(columns=['prediction']),
                                osp.join(lmu_data_root(), 'images', self.dataset_name))
        task = str(getattr(base, 'TYPE', 'VQA'))
        items = sorted({int(i) % V.INDEX_SLOT % V.CIRCULAR_GROUP for i in idx})

        per_variant, failures, scores, answered = {}, {}, {}, {}
        for slot, part in parts.items():
            tag = 'ref' if slot == 0 else 'd{:02d}_s{}'.format(*combo_of[slot])
            missing = part['prediction'].map(V.missing_prediction)
            answered[slot] = part[~missing]
            kit_metric, row_scores = None, {}
            if len(answered[slot]):  # rows without an answer are counted, never handed to the kit to score
                kit_metric, row_scores = self._score_part(
                    base, answered[slot], osp.join(sub_dir, f'{osp.basename(stem)}_{tag}.xlsx'), base_name,
                    judge_kwargs)
            by_item = {i % V.CIRCULAR_GROUP: s for i, s in row_scores.items()}
            present = {int(i) % V.CIRCULAR_GROUP for i in part['index']}
            failures[tag] = {'missing_prediction': int(missing.sum()),
                             'unparseable': sum(1 for s in row_scores.values() if s is None),
                             'missing_row': len(set(items) - present)}
            scores[slot] = {i: by_item.get(i) for i in items}
            valid = [s for s in by_item.values() if s is not None]
            per_variant[tag] = {'kit_metric': kit_metric, 'mean': sum(valid) / len(valid) if valid else None,
                                'scored': len(valid), 'failed': sum(failures[tag].values())}

        graded = V.is_graded(base_name, [s for sc in scores.values() for s in sc.values()]) and task != 'MCQ'
        consistency = self._consistency(base, base_name, parts, answered, combo_of, sub_dir, stem,
                                        judge_kwargs) if graded else None
        dis = {combo_of[slot]: sc for slot, sc in scores.items() if slot}
        rows = V.paired_rows(scores[0], dis, consistency, task=task)
        table = V.rc_table(rows, task)
        note = V.approximation_note([d for d, _ in dis])
        relative_mode = ('consistency (distorted prediction scored against the reference prediction)'
                         if graded else 'distorted row right (relative = right on both)')

        pd.DataFrame(rows).to_csv(stem_path(eval_file, '_rc_scores.csv'), index=False)
        robust = pd.DataFrame(table).rename_axis('dimension').reset_index()
        robust.to_csv(stem_path(eval_file, '_robustness.csv'), index=False)
        excluded = sum(1 for r in rows if r['score_ref'] is None or r['score_com'] is None)
        summary = {'base_dataset': base_name, 'task': task, 'relative_mode': relative_mode,
                   'per_variant': per_variant, **table, 'pairs': len(rows),
                   'pairs_excluded_from_relative': excluded, 'failures': failures,
                   'failed_rows': sum(v['failed'] for v in per_variant.values()), 'approximations': note}
        write_json(summary, stem_path(eval_file, '_score.json'))
        report = V.markdown_report(self.dataset_name, task, table, per_variant, failures, relative_mode, note)
        with open(stem_path(eval_file, '_robustness.md'), 'w', encoding='utf-8') as f:
            f.write(report)
        from vlmeval_ext.rbench.report import plot_radar, plot_task_strength
        plot_radar(table, stem_path(eval_file, '_radar.png'), title=f'{self.dataset_name} robustness')
        plot_task_strength(table, stem_path(eval_file, '_strength.png'), title=self.dataset_name, tasks=(task,))
        print(report)
        self.manifest_extra = {'seeds': {'note': 'per-item seed = run seed * 1000003 + base index'},
                               'counts': {'failed_rows': summary['failed_rows'],
                                          'pairs_excluded_from_relative': excluded}}
        return robust

    def _consistency(self, base, base_name, parts, answered, combo_of, sub_dir, stem, judge_kwargs) -> dict:
        """{(d, s): {item: consistency}}: each distorted prediction scored by the base metric with its
        reference prediction as the answer (R-Bench's consistency for graded metrics)."""
        ref_pred = {int(i): p for i, p in zip(answered[0]['index'], answered[0]['prediction'])}
        out = {}
        for slot, part in answered.items():
            if slot == 0:
                continue
            rows = part[part['index'].astype(int).isin(ref_pred)].copy()
            rows['answer'] = [V.consistency_answer(ref_pred[int(i)], a) for i, a in zip(rows['index'], rows['answer'])]
            scores = {}
            if len(rows):
                tag = 'd{:02d}_s{}'.format(*combo_of[slot])
                _, scores = self._score_part(base, rows, osp.join(sub_dir, 'consistency',
                                                                  f'{osp.basename(stem)}_{tag}.xlsx'),
                                             base_name, judge_kwargs)
            out[combo_of[slot]] = {i % V.CIRCULAR_GROUP: s for i, s in scores.items()}
        return out
