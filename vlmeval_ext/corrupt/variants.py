"""`<Dataset>-RC`: paired robustness variants of any kit image dataset (pure: pandas + the engine, no kit).

Every sampled item appears once as a reference row (`variant` ref) and once per chosen (distortion, strength)
as a distorted row (`variant` dis), all sharing `pair_id` = the base index. Row indices are
`slot * INDEX_SLOT + base index` (slot 0 = reference, 1.. = the distortion/strength combinations), so splitting
by slot and taking `index % INDEX_SLOT` gives back rows of the base dataset, which its own `evaluate` scores.
Multi-image rows (a JSON list of base64 images) have every image corrupted.
"""
from __future__ import annotations

import base64
import io
import json
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from PIL import Image

from vlmeval_ext.io import DataError, parse_list_cell
from vlmeval_ext.predictions import is_missing
from vlmeval_ext.distortions import check_distortion, check_strength, corrupt

RC_SUFFIX = '-RC'
INDEX_SLOT = 10 ** 8          # > any kit index (MMBench circular copies stay below 10**7)
CIRCULAR_GROUP = 10 ** 6      # kit circular datasets keep copies of one question at i + k * 10**6
RC_COLUMNS = ('pair_id', 'variant', 'distortion', 'strength')


def rc_name(base: str) -> str:
    return base + RC_SUFFIX


def base_name(rc: str) -> str:
    if not rc.endswith(RC_SUFFIX) or len(rc) == len(RC_SUFFIX):
        raise DataError(f'{rc!r} is not a robustness-variant dataset name (expected <Dataset>{RC_SUFFIX})')
    return rc[:-len(RC_SUFFIX)]


def combos(distortions: Sequence[int], strengths: Sequence[int]) -> list[tuple[int, int]]:
    """(distortion, strength) per slot 1..n, in a fixed order."""
    return [(check_distortion(d), check_strength(s)) for d in distortions for s in strengths]


def slot_tag(slot: int, combo_list: Sequence[tuple[int, int]]) -> str:
    if slot == 0:
        return 'ref'
    d, s = combo_list[slot - 1]
    return f'd{d:02d}_s{s}'


def _is_reference(cell) -> bool:
    """Kit TSVs store a repeated image as the index of the row that holds it (a short digit string)."""
    return isinstance(cell, (int, np.integer)) or (isinstance(cell, str) and len(cell) <= 64 and cell.strip().isdigit())


def resolve_images(base: pd.DataFrame, path: str) -> pd.Series:
    """The `image` column with kit index references replaced by the referenced row's image."""
    if 'image' not in base or 'index' not in base:
        raise DataError(f'{path}: needs columns index and image (an image dataset in the kit TSV format)')
    by_index = dict(zip(base['index'].astype(int), base['image']))
    out = []
    for row, cell in enumerate(base['image']):
        if is_missing(cell) or (isinstance(cell, str) and not cell.strip()):
            raise DataError(f'{path}: row {row + 2}, column \'image\': empty')
        if _is_reference(cell):
            target = by_index.get(int(cell))
            if target is None or _is_reference(target):
                raise DataError(f'{path}: row {row + 2}, column \'image\': refers to index {cell}, which holds no image')
            cell = target
        out.append(cell)
    return pd.Series(out, index=base.index)


def image_list(cell: str, path: str, row: int) -> tuple[list[str], bool]:
    """(base64 images, was_a_list) of one image cell."""
    text = cell.strip()
    if text.startswith('['):
        return [str(x) for x in parse_list_cell(text, path, row, 'image')], True
    return [text], False


def _decode(b64: str, where: str) -> Image.Image:
    """The image as it is shown: its EXIF orientation applied to the pixels (the tag is not kept), so a reference
    and its distorted variants have the same geometry in every viewer."""
    from PIL import ImageOps
    try:
        img = Image.open(io.BytesIO(base64.b64decode(b64)))
        img.load()
        return ImageOps.exif_transpose(img)
    except Exception as err:  # report which cell is bad, with the decoder's reason
        raise DataError(f'{where}: not a decodable base64 image ({type(err).__name__}: {err})') from err


def _orientation(b64: str) -> int:
    """The EXIF Orientation tag of an encoded image (1, upright, when there is none)."""
    try:
        with Image.open(io.BytesIO(base64.b64decode(b64))) as img:
            return int(img.getexif().get(0x0112, 1) or 1)
    except Exception:  # an unreadable cell: corrupt_cell names it
        return 1


def reference_cell(cell: str, path: str, row: int) -> str:
    """The reference row's image: as stored, unless an EXIF orientation would turn it in EXIF-aware viewers but
    not its distorted variants (whose pixels are already turned): then re-encoded upright (PNG, lossless)."""
    images, was_list = image_list(cell, path, row)
    if all(_orientation(b64) == 1 for b64 in images):
        return cell
    out = [_encode_png(_decode(b64, f'{path}: row {row}, column \'image\' [{k}]')) for k, b64 in enumerate(images)]
    return json.dumps(out) if was_list else out[0]


def variant_image_path(cell, tag: str, path: str, row: int):
    """An `image_path` cell with the variant's tag in every file name ('a.jpg' -> 'a__d05_s3.jpg'): the kit writes
    a row's image under its image_path and reuses an existing file, so rows sharing a name would share an image."""
    import os.path as osp

    def tagged(name: str) -> str:
        stem, ext = osp.splitext(str(name))
        return f'{stem}__{tag}{ext or ".png"}'
    text = '' if is_missing(cell) else str(cell).strip()
    if text.startswith('['):
        return json.dumps([tagged(n) for n in parse_list_cell(text, path, row, 'image_path')])
    return tagged(text)


def _encode_png(img: Image.Image) -> str:
    buf = io.BytesIO()
    img.save(buf, 'PNG', compress_level=1)  # lossless: a codec must not add its own distortion
    return base64.b64encode(buf.getvalue()).decode('ascii')


def corrupt_cell(cell: str, distortion: int, strength: int, seed: int, path: str, row: int) -> str:
    images, was_list = image_list(cell, path, row)
    out = [_encode_png(corrupt(_decode(b64, f'{path}: row {row}, column \'image\' [{k}]'), distortion, strength,
                               seed + 7919 * k))
           for k, b64 in enumerate(images)]
    return json.dumps(out) if was_list else out[0]


def sample_items(base: pd.DataFrame, sample: int | None, seed: int) -> pd.DataFrame:
    """Sample whole questions (kit circular copies i + k*10**6 stay together), deterministic in seed."""
    if sample is None:
        return base
    if isinstance(sample, bool) or not isinstance(sample, (int, np.integer)) or sample < 1:
        raise ValueError(f'sample must be a number of questions of at least 1 (None: all), got {sample!r}')
    groups = np.unique(base['index'].astype(np.int64) % CIRCULAR_GROUP)
    if sample >= len(groups):
        return base
    chosen = set(np.random.default_rng(seed).choice(groups, size=sample, replace=False).tolist())
    return base[(base['index'].astype(np.int64) % CIRCULAR_GROUP).isin(chosen)]


def build_rc_frame(base: pd.DataFrame, distortions: Sequence[int], strengths: Sequence[int],
                   sample: int | None = None, seed: int = 0, path: str = '<base TSV>', progress: bool = True
                   ) -> pd.DataFrame:
    """The -RC table: reference + distorted rows per sampled item (see the module docstring)."""
    clash = [c for c in RC_COLUMNS if c in base.columns]
    if clash:
        raise DataError(f'{path}: already has column(s) {clash}; is it already a {RC_SUFFIX} dataset?')
    indices = pd.to_numeric(base['index'], errors='coerce')
    if indices.isna().any() or (indices % 1 != 0).any() or (indices < 0).any() or (indices >= INDEX_SLOT).any():
        bad = int(np.flatnonzero(indices.isna() | (indices % 1 != 0) | (indices < 0) | (indices >= INDEX_SLOT))[0])
        raise DataError(f'{path}: row {bad + 2}, column \'index\': {base["index"].iloc[bad]!r} is not an integer '
                        f'in [0, {INDEX_SLOT})')
    base = base.copy()
    base['index'] = indices.astype(np.int64)
    base['image'] = resolve_images(base, path)
    base = sample_items(base, sample, seed).reset_index(drop=True)
    combo_list = combos(distortions, strengths)

    from tqdm import tqdm
    ref = base.assign(pair_id=base['index'], variant='ref', distortion=0, strength=0)
    ref['image'] = [reference_cell(c, path, row + 2) for row, c in enumerate(base['image'])]
    parts = [ref]
    bar = tqdm(total=len(base) * len(combo_list), desc='corrupt', unit='image-row', disable=not progress)
    for slot, (d, s) in enumerate(combo_list, start=1):
        dis = ref.assign(variant='dis', distortion=d, strength=s, index=base['index'] + slot * INDEX_SLOT)
        if 'image_path' in base:
            tag = slot_tag(slot, combo_list)
            dis['image_path'] = [variant_image_path(c, tag, path, row + 2) for row, c in enumerate(base['image_path'])]
        cells = []
        for row, (idx, cell) in enumerate(zip(base['index'], base['image'])):
            # one seed per (item, run seed): each item gets its own noise pattern, reproducibly
            cells.append(corrupt_cell(cell, d, s, int(seed) * 1_000_003 + int(idx), path, row + 2))
            bar.update()
        dis['image'] = cells
        parts.append(dis)
    bar.close()
    return pd.concat(parts, ignore_index=True)


def split_by_slot(pred: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Predictions of an -RC dataset -> {slot: rows in the base format (base index restored, RC columns dropped)}."""
    idx = pd.to_numeric(pred['index'], errors='raise').astype(np.int64)
    out = {}
    for slot in sorted(set((idx // INDEX_SLOT).tolist())):
        part = pred[(idx // INDEX_SLOT) == slot].copy()
        part['index'] = idx[part.index] % INDEX_SLOT
        out[int(slot)] = part.drop(columns=[c for c in RC_COLUMNS if c in part.columns])
    return out


# ------------------------------------------------------------------------------------------------ scores
def _score_cell(value, where: str, row: int, column: str, match_to_score) -> float | None:
    """One per-row score of the kit's result table as a number in [0, 1]; None when the cell is empty."""
    if is_missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    if column == 'eval_match':
        matches = value if isinstance(value, list) else parse_list_cell(str(value), where, row, column)
        value = match_to_score([float(m) for m in matches])
    elif isinstance(value, str) and value.strip() in ('True', 'False'):   # Y/N `score` read back as text
        value = value.strip() == 'True'
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise DataError(f'{where}: row {row}, column {column!r}: {value!r} is not a score') from None
    if not 0.0 <= score <= 1.0:
        raise DataError(f'{where}: row {row}, column {column!r}: score {value!r} outside [0, 1]')
    return score


def row_scores_from_result(result: pd.DataFrame, where: str, match_to_score=None) -> dict[int, float | None]:
    """{base index: score in [0, 1]} from the per-row table the base dataset's own evaluator wrote: MCQ `hit`,
    Y/N `score` (True/False), VQA `eval_match` (reduced by the kit's own `match_to_score`, e.g. max for ChartQA,
    mean for TextVQA) or `eval_score`. An answer the evaluator could not read is scored as its rule says (the
    kit's MCQ exact matching: wrong); only an empty score cell gives None (counted as not scored)."""
    if 'index' not in result.columns:
        raise DataError(f'{where}: the base evaluator\'s result table has no index column')
    if 'hit' in result.columns:
        column = 'hit'
    elif 'eval_match' in result.columns and match_to_score is not None:
        column = 'eval_match'
    else:
        column = next((c for c in ('eval_score', 'score') if c in result.columns), None)
    if column is None:
        raise DataError(f'{where}: no per-row score column (hit, eval_match, eval_score or score)')
    return {int(idx): _score_cell(value, where, row + 2, column, match_to_score)
            for row, (idx, value) in enumerate(zip(result['index'], result[column]))}


def is_graded(base: str, scores: Sequence[float | None]) -> bool:
    """Graded (partial-credit) base metric: declared in the spec (TextVQA's VQA score, DocVQA's ANLS, ...) or
    seen (a row scored strictly between 0 and 1)."""
    from vlmeval_ext.distortions import corrupt_spec
    declared = corrupt_spec().get('rc', {}).get('graded_metric_datasets', [])
    return any(base.startswith(p) for p in declared) or any(s is not None and 0.0 < s < 1.0 for s in scores)


def consistency_answer(reference_prediction: str, base_answer) -> str:
    """R-Bench's consistency for graded metrics: the reference prediction becomes the answer the distorted
    prediction is scored against. A list answer (TextVQA's ten annotators) becomes a list of as many copies,
    so metrics that compare against 'the other annotators' still give 1 for an identical answer."""
    text = '' if is_missing(base_answer) else str(base_answer).strip()
    if text.startswith('['):
        try:
            n = len(parse_list_cell(text, '<answer>', 0, 'answer'))
        except DataError:
            n = 1
        return json.dumps([str(reference_prediction)] * max(n, 1))
    return str(reference_prediction)


def paired_rows(ref_scores: Mapping[int, float | None],
                dis_scores: Mapping[tuple[int, int], Mapping[int, float | None]],
                com_scores: Mapping[tuple[int, int], Mapping[int, float | None]] | None = None,
                task: str = '') -> list[dict]:
    """One row per (item, distortion, strength): score_ref (its reference row's score), score_dis and score_com,
    R-Bench's names. score_com is the consistency score for graded metrics; for right/wrong metrics it is
    score_dis, so relative = score_com x score_ref = 'right on both'. None (failed) is excluded and counted."""
    rows = []
    for (d, s), scores in dis_scores.items():
        coms = None if com_scores is None else com_scores.get((d, s), {})
        for pair_id, score in scores.items():
            com = score if coms is None else coms.get(pair_id)
            rows.append({'pair_id': pair_id, 'type': task, 'distortion': d, 'strength': s,
                         'score_ref': ref_scores.get(pair_id), 'score_dis': score, 'score_com': com})
    return rows
