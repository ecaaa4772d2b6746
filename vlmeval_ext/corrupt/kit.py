"""What a `<Dataset>-RC` asks of the kit, through its public API only.

- The base dataset: the kit's `build_dataset(name)` on `$LMUData/<name>.tsv` when that file is the one the kit
  accepts as it is. When it is absent, or another copy (a sampled or local one whose md5 differs from the kit's
  DATASET_MD5), `build_dataset` would download the published file over it; the -RC then hands the same kit class
  the base rows it was built from, through `load_data`, the loading step the kit documents for overriding.
- Its evaluator: the kit's own ImageMCQDataset, ImageYORNDataset or ImageVQADataset `evaluate`, run on the
  base rows with the model's predictions.
- Its per-row scores: the result file that evaluator writes, named by the kit's `get_intermediate_file_path`
  (`kit_row_result_file`), and its headline number: the `evaluate` return value.
- The judge it is given (`rc_judge`): without `--judge`, the kit's exact matching, which needs no API.
"""
from __future__ import annotations

import os.path as osp
from dataclasses import dataclass, field
from typing import Mapping

import pandas as pd

from vlmeval_ext.io import DataError
from vlmeval_ext.judging import OFFLINE_JUDGES, PLUGIN_OPTIONS, PROTOCOL_OPTIONS
from vlmeval_ext.corrupt.variants import RC_COLUMNS

# The kit evaluators whose per-row results an -RC reads: {task: (kit class, methods a base class must inherit
# unchanged from it)}. The task names the tables (MCQ, Y/N, VQA: the kit's TYPE of those classes).
_EVALUATOR_METHODS = {'MCQ': ('evaluate', 'evaluate_heuristic'), 'Y/N': ('evaluate',),
                      'VQA': ('evaluate', 'evaluate_heuristic')}

# The per-row file each evaluator writes beside its eval file: the suffix it hands get_intermediate_file_path.
# ImageMCQDataset names the file after its judge, with short names for two judges. Same in ms-vlmeval 0.0.20 and
# VLMEvalKit e8e78f05 (tests/plugin/test_rc_kit_naming.py runs each evaluator on both).
KIT_MCQ_JUDGE_FILE_NAMES = {'chatgpt-0125': 'openai', 'gpt-4-0125': 'gpt4'}
_ROW_RESULT_SUFFIX = {'Y/N': '_auxmatch', 'VQA': '_results'}


def _evaluator_classes() -> dict[str, type]:
    from vlmeval.dataset.image_mcq import ImageMCQDataset
    from vlmeval.dataset.image_vqa import ImageVQADataset
    from vlmeval.dataset.image_yorn import ImageYORNDataset
    return {'MCQ': ImageMCQDataset, 'Y/N': ImageYORNDataset, 'VQA': ImageVQADataset}


def kit_evaluator(cls: type) -> str | None:
    """'MCQ', 'Y/N' or 'VQA' when `cls` scores with that kit evaluator unchanged; None otherwise."""
    for task, kit_cls in _evaluator_classes().items():
        if all(getattr(cls, m, None) is getattr(kit_cls, m) for m in _EVALUATOR_METHODS[task]):
            return task
    return None


def kit_row_result_file(task: str, eval_file: str, judge: str) -> str:
    """The per-row result file the kit's `task` evaluator writes for `eval_file` with judge model `judge`."""
    from vlmeval.smp import get_intermediate_file_path
    suffix = f'_{KIT_MCQ_JUDGE_FILE_NAMES.get(judge, judge)}_result' if task == 'MCQ' else _ROW_RESULT_SUFFIX[task]
    return get_intermediate_file_path(eval_file, suffix)


def kit_pred_format() -> str:
    """The file format the kit writes predictions in (xlsx unless PRED_FORMAT says otherwise)."""
    from vlmeval.smp.file import get_pred_file_format
    return get_pred_file_format()


# ------------------------------------------------------------------------------------------- the base dataset
def kit_dataset_class(name: str) -> type | None:
    """The kit class that `build_dataset(name)` builds for a kit dataset name (its own lookup order); None for a
    name the kit does not know (a user's own TSV)."""
    import vlmeval.dataset as kit
    for cls in kit.DATASET_CLASSES:
        if name in cls.supported_datasets():
            return cls
    return None


def custom_class(columns) -> type:
    """The kit's class for a user's own image TSV, chosen by its columns as `build_dataset` does."""
    import vlmeval.dataset as kit
    return kit.CustomMCQDataset if {'A', 'B'} <= set(columns) else kit.CustomVQADataset


def kit_tsv_problem(name: str, cls: type | None, path: str) -> str | None:
    """Why `build_dataset(name)` would not use `path` as it is (None: it would)."""
    if not osp.isfile(path):
        return f'{path} is absent'
    expected = (getattr(cls, 'DATASET_MD5', None) or {}).get(name) if cls is not None else None
    if expected:
        from vlmeval.smp import md5
        actual = md5(path)
        if actual != expected:
            return f'{path} has md5 {actual}, not the kit\'s {expected}'
    return None


def dataset_from_rows(cls: type, name: str, rows: pd.DataFrame):
    """The kit's `cls(dataset=name)` whose load_data returns `rows` instead of reading $LMUData/<name>.tsv; the
    rest of the kit's construction (image references, index types, post_build) runs as for its own TSV."""
    class FromRows(cls):
        def load_data(self, dataset):
            return rows.copy()

    FromRows.__name__ = FromRows.__qualname__ = f'{cls.__name__}FromRows'
    return FromRows(dataset=name)


def reference_rows(rc_tsv: str) -> pd.DataFrame:
    """The base rows an -RC TSV was built from (its reference rows, RC columns dropped), read by the kit's loader."""
    from vlmeval.smp import load
    if not osp.isfile(rc_tsv):
        raise DataError(f'{rc_tsv}: not found; build it with `vlmeval-ext corrupt --data <Dataset>`')
    data = load(rc_tsv)
    missing = [c for c in ('index', *RC_COLUMNS) if c not in data.columns]
    if missing:
        raise DataError(f'{rc_tsv}: missing column(s) {missing}: not a <Dataset>-RC TSV')
    ref = data[data['variant'] == 'ref'].drop(columns=list(RC_COLUMNS))
    if ref.empty:
        raise DataError(f'{rc_tsv}: no reference rows (variant ref)')
    return ref.reset_index(drop=True)


@dataclass
class BaseDataset:
    dataset: object            # the kit's dataset object
    task: str                  # its evaluator: MCQ, Y/N or VQA
    source: str                # where its rows came from, for the report


def kit_base_dataset(name: str, rc_name: str, lmu_root: str, img_root: str) -> BaseDataset:
    """The kit's dataset object for base `name` of `rc_name` (see the module docstring), its images written under
    `img_root` (the kit's attribute for that), and its evaluator; an evaluator the -RC cannot read stops here."""
    cls = kit_dataset_class(name)
    path = osp.join(lmu_root, f'{name}.tsv')
    problem = kit_tsv_problem(name, cls, path)
    if problem is None:
        from vlmeval.dataset import build_dataset
        dataset = build_dataset(name)
        if dataset is None:
            raise DataError(f'{path}: the kit could not build dataset {name!r} from it')
        source = f"the kit's build_dataset({name!r}) on {path}"
    else:
        rows = reference_rows(osp.join(lmu_root, f'{rc_name}.tsv'))
        cls = cls or custom_class(rows.columns)
        dataset = dataset_from_rows(cls, name, rows)
        source = (f"the {name} rows {rc_name} was built from, loaded by the kit's {cls.__name__} ({problem}; "
                  'build_dataset would download the published file over it)')
    task = kit_evaluator(type(dataset))
    if task is None:
        raise DataError(f'{rc_name}: base dataset {name} is scored by {type(dataset).__name__}.evaluate, whose '
                        'per-row scores an -RC cannot read; -RC supports bases scored by the kit\'s '
                        'ImageMCQDataset, ImageYORNDataset or ImageVQADataset evaluate')
    dataset.img_root = img_root
    return BaseDataset(dataset, task, source)


# ------------------------------------------------------------------------------------------------- the judge
@dataclass
class RCJudge:
    name: str                  # the judge model the base evaluator was given, or 'none'
    mode: str                  # what it means for the scores
    kwargs: dict = field(default_factory=dict)   # the judge kwargs handed to the base evaluate

    @property
    def block(self) -> dict:
        return {'name': self.name, 'mode': self.mode}

    @property
    def is_api(self) -> bool:
        return self.name not in ('none', 'exact_matching')


def rc_judge(judge_kwargs: Mapping, task: str, base: str) -> RCJudge:
    """The judge for the base evaluator. Without --judge (no `model` in the kit's judge kwargs): the kit's exact
    matching, passed explicitly, so the kit never reaches for its default API judge; an offline judge name also
    means exact matching (no offline judge exists for a kit dataset). VQA evaluators use no judge."""
    kwargs = {k: v for k, v in judge_kwargs.items() if k not in PLUGIN_OPTIONS + PROTOCOL_OPTIONS}
    if kwargs.get('use_verifier'):
        raise DataError('--use-verifier is not supported for <Dataset>-RC: its scores are read from the kit\'s '
                        'standard per-row results')
    asked = kwargs.pop('model', None)
    if task == 'VQA':
        unused = f'; --judge {asked} is not used' if asked else ''
        return RCJudge('none', f"{base}'s own metric in the kit (no judge{unused})", kwargs)
    rule = {'MCQ': 'an answer naming no option is wrong', 'Y/N': 'an answer that is neither yes nor no is wrong'}
    if asked is None or asked == 'exact_matching' or asked in OFFLINE_JUDGES:
        why = {None: 'the default without --judge', 'exact_matching': '--judge exact_matching'}.get(
            asked, f'--judge {asked}: a kit dataset has no offline judge')
        return RCJudge('exact_matching', f"the kit's exact matching, no judge API ({rule[task]}; {why})",
                       {**kwargs, 'model': 'exact_matching'})
    return RCJudge(asked, f"the kit's exact matching, then judge {asked} for answers it cannot match",
                   {**kwargs, 'model': asked})


def check_judge(judge: RCJudge) -> None:
    """One tiny call to an API judge before scoring: the kit would fall back to exact matching on a dead judge
    after minutes of retries, and the record would name a judge that was never used."""
    if not judge.is_api:
        return
    from vlmeval_ext.judging import CachedJudge, build_kit_judge
    kit_judge = build_kit_judge(judge.name, **{k: judge.kwargs[k] for k in ('api_base', 'key', 'timeout')
                                               if k in judge.kwargs})
    CachedJudge(kit_judge, judge.name, store=None).preflight()


# ------------------------------------------------------------------------------------------------ the scores
def kit_headline(result) -> float | None:
    """The base evaluate's headline number from its return value ('Overall' where it reports one)."""
    if isinstance(result, pd.DataFrame) and len(result):
        for key in ('Overall', 'overall', 'acc', 'Acc'):
            if key in result.columns:
                return float(result[key].iloc[0])
    if isinstance(result, dict):
        for key in ('Overall', 'overall', 'acc'):
            if key in result:
                return float(result[key])
    return None


def kit_match_to_score(base: str):
    """The kit's own reduction of a VQA row's per-answer matches (max for ChartQA, ANLS threshold for DocVQA,
    mean for TextVQA), so per-row scores average to the kit's headline number."""
    from vlmeval.dataset.utils.vqa_eval import hit_calculate
    return lambda matches: float(hit_calculate([{'match': matches}], base)[0])
