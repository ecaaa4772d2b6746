"""RoCOCO kit TSVs (pure, no kit import): build them from the official annotations + COCO images, and score the
predictions files the kit writes for them.

Two layouts:
- MCQ (`RoCOCO-MCQ-<attack>`): one row per image: image, question, A..D, answer letter, twin letter (the option
  holding the ground truth's adversarial twin), as mcq.build_items draws them.
- Retrieval (`RoCOCO-I2T-<file>`, `RoCOCO-T2I-<method>`): one row per gallery/query item in protocol order;
  `kind` = image | text. Image rows carry the COCO file's bytes unchanged (base64); text rows carry the
  normalised caption in `question`. Columns `item` (position on its side), `image_row` (the image a row is or
  belongs to), `ground_truth` (text rows), `seed` (image rows: 0 = original, else the mixing seed) let the
  protocol be rebuilt from the predictions file alone. An embedding model answers each row with its vector
  encoded by encode_vector; score_retrieval decodes them in order and applies protocol.py.
"""
from __future__ import annotations

import base64
import io
import os
import re
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from vlmeval_ext.core.io import DataError, tsv_path, write_kit_tsv
from vlmeval_ext.core.predictions import FAILED, classify_prediction, prediction_text
from vlmeval_ext.rococo import mcq as Q
from vlmeval_ext.rococo import protocol as P

ANNOTATION_FILES = {'clean': 'coco_karpathy_test.json', **{a: f'{a}.json' for a in P.ATTACKS}}
MIX_METHODS = tuple(P.SPEC['mixing']['methods'])
MIX_SEEDS = tuple(P.SPEC['mixing']['seeds'])
MIX_LAM = P.SPEC['mixing']['lam']
MCQ_NAMES = [f'RoCOCO-MCQ-{a}' for a in P.ATTACKS]
I2T_NAMES = [f'RoCOCO-I2T-{k}' for k in ANNOTATION_FILES]
T2I_NAMES = [f'RoCOCO-T2I-{m}' for m in MIX_METHODS]
MCQ_COLUMNS = ('index', 'image', 'question', 'A', 'B', 'C', 'D', 'answer', 'twin', 'attack', 'coco_image')
RETRIEVAL_COLUMNS = ('index', 'kind', 'item', 'image_row', 'ground_truth', 'seed', 'source', 'question')


# ------------------------------------------------------------------------------------------------ sources
def parse_name(name: str) -> tuple[str, str]:
    """'RoCOCO-I2T-danger' -> ('I2T', 'danger'); demo suffixes are not preparable."""
    m = re.fullmatch(r'RoCOCO-(MCQ|I2T|T2I)-([A-Za-z_]+)', name)
    if not m or name not in MCQ_NAMES + I2T_NAMES + T2I_NAMES:
        raise DataError(f'unknown RoCOCO dataset {name!r}; preparable: {", ".join(MCQ_NAMES + I2T_NAMES + T2I_NAMES)}')
    return m.group(1), m.group(2)


def annotation_path(ann_dir: str | os.PathLike, key: str) -> Path:
    path = Path(ann_dir) / ANNOTATION_FILES[key]
    if not path.is_file():
        raise DataError(f'{path}: RoCOCO annotation not found. The folder given (--from / --ann-dir) must hold the '
                        f'official annotations of github.com/pseulki/rococo (annotations/{ANNOTATION_FILES[key]})')
    return path


def resolve_coco_root(coco_root=None, source_dir=None) -> Path:
    """--coco-root, else $COCO_ROOT, else the --from folder when it holds val2014/."""
    for candidate in (coco_root, os.environ.get('COCO_ROOT'),
                      source_dir if source_dir and (Path(source_dir) / 'val2014').is_dir() else None):
        if candidate:
            if not Path(candidate).is_dir():
                raise DataError(f'COCO root {candidate} is not a directory')
            return Path(candidate)
    raise DataError('RoCOCO needs your copy of COCO val2014: pass --coco-root DIR or set COCO_ROOT (the folder '
                    'holding val2014/); the images are never downloaded by this package')


def mixed_folder_name(method: str, seed: int, lam: float = MIX_LAM) -> str:
    """The folder `make-mixed` writes by default under the COCO root."""
    return f'{method}_{lam}_seed{seed}'


def file_b64(path: Path, where: str) -> str:
    """The file's bytes, base64 (no re-encoding: the model sees the COCO JPEG as distributed)."""
    if not path.is_file():
        raise DataError(f'{where}: image {path} not found')
    data = path.read_bytes()
    if not data:
        raise DataError(f'{where}: image {path} is empty (0 bytes)')
    return base64.b64encode(data).decode('ascii')


def image_file(path: Path, where: str) -> Path:
    """The image file, checked as file_b64 checks it but not read: write_tsv_streaming reads it per row."""
    if not path.is_file():
        raise DataError(f'{where}: image {path} not found')
    if path.stat().st_size == 0:
        raise DataError(f'{where}: image {path} is empty (0 bytes)')
    return path


write_tsv = write_kit_tsv   # the kit's TSV + .md5 sidecar (vlmeval_ext.core.io)


def write_tsv_streaming(frame: pd.DataFrame, path: str | os.PathLike) -> str:
    """write_tsv for a frame whose image cells may hold file paths (frame_for(..., lazy_images=True)): each
    file is read and base64-encoded as its row is written, so memory holds one image, not the gallery. Same
    format as write_tsv (tab separated, every cell quoted), written atomically, plus the `.md5` sidecar."""
    import csv

    from vlmeval_ext.core.io import file_md5
    path = str(path)
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    tmp = path + '.partial'
    columns = list(frame.columns)
    at = columns.index('image') if 'image' in columns else -1
    with open(tmp, 'w', encoding='utf-8', newline='') as f:
        writer = csv.writer(f, delimiter='\t', quoting=csv.QUOTE_ALL, lineterminator='\n')
        writer.writerow(columns)
        for row in frame.itertuples(index=False, name=None):
            if at >= 0 and isinstance(row[at], Path):
                row = (*row[:at], base64.b64encode(row[at].read_bytes()).decode('ascii'), *row[at + 1:])
            writer.writerow(row)
    os.replace(tmp, path)
    with open(path + '.md5', 'w') as f:
        f.write(file_md5(path) + '\n')
    return path


def prepare_tsv(name: str, source_dir=None, coco_root=None, mixed_root=None) -> str:
    """Build $LMUData/<name>.tsv from the annotation folder (source_dir, else $ROCOCO_ANNOTATIONS) and the COCO
    images; T2I names make their mixed images first where missing. Returns the TSV path."""
    parse_name(name)
    ann_dir = source_dir or os.environ.get('ROCOCO_ANNOTATIONS')
    if not ann_dir:
        raise DataError(f'{name}: give the folder holding the RoCOCO annotation JSONs (github.com/pseulki/rococo '
                        'annotations/) with --from DIR, or set ROCOCO_ANNOTATIONS')
    root = resolve_coco_root(coco_root, source_dir)
    frame = frame_for(name, ann_dir, root, mixed_root, lazy_images=True)
    return write_tsv_streaming(frame, tsv_path(name))


# ------------------------------------------------------------------------------------------------ MCQ frame
def mcq_frame(ann: P.Annotation, attack: str, image_b64: Callable[[int], str], rows: Sequence[int] | None = None,
              seed: int = Q.SEED, n_options: int = 4) -> pd.DataFrame:
    """One MCQ row per image; image_b64(image row) gives the encoded image."""
    records = []
    for item in Q.build_items(ann, attack, seed=seed, n_options=n_options, rows=rows):
        record = {'index': item['index'], 'image': image_b64(item['index']), 'question': item['question']}
        record.update({c: item[c] for c in Q.LETTERS[:n_options]})
        record.update(answer=item['answer'], twin=item['twin'], attack=attack, coco_image=item['image_path'],
                      answer_text_row=item['answer_text_row'], twin_text_row=item['twin_text_row'])
        records.append(record)
    return pd.DataFrame.from_records(records)


# ------------------------------------------------------------------------------------------ retrieval frames
def _image_rows(paths: Sequence[str], image_row: Sequence[int], seed: int, image_b64: Callable[[str, str], str],
                start_item: int) -> list[dict]:
    return [{'kind': 'image', 'item': start_item + k, 'image_row': int(r), 'ground_truth': '', 'seed': seed,
             'source': p, 'question': '', 'image': image_b64(p, f'gallery item {start_item + k}')}
            for k, (p, r) in enumerate(zip(paths, image_row))]


def _text_rows(ann: P.Annotation) -> list[dict]:
    return [{'kind': 'text', 'item': t, 'image_row': int(ann.text_image[t]),
             'ground_truth': 'yes' if ann.is_ground_truth[t] else 'no', 'seed': 0, 'source': '',
             'question': ann.texts[t], 'image': ''} for t in range(ann.n_texts)]


def _finish(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(rows)
    df.insert(0, 'index', np.arange(len(df)))
    return df


def i2t_frame(ann: P.Annotation, image_b64: Callable[[str, str], str]) -> pd.DataFrame:
    """Rows: the images in annotation order (queries), then every caption in file order (gallery)."""
    return _finish(_image_rows(ann.images, range(ann.n_images), 0, image_b64, 0) + _text_rows(ann))


def t2i_frame(ann: P.Annotation, mixed_dirs: dict[int, str], image_b64: Callable[[str, str], str]) -> pd.DataFrame:
    """Rows: the originals, then the mixed twins of each seed (same order), then the clean captions (queries)."""
    if ann.has_adversarial:
        raise DataError(f'{ann.path}: text-to-image uses the clean annotation file (coco_karpathy_test.json)')
    rows = _image_rows(ann.images, range(ann.n_images), 0, image_b64, 0)
    for seed, folder in sorted(mixed_dirs.items()):
        paths = [P.mixed_image_path(p, folder) for p in ann.images]
        rows += _image_rows(paths, range(ann.n_images), seed, image_b64, len(rows))
    return _finish(rows + _text_rows(ann))


def frame_for(name: str, ann_dir, coco_root: Path, mixed_root: Path | None = None,
              progress: bool = True, lazy_images: bool = False) -> pd.DataFrame:
    """The TSV frame of a preparable name (mixed images are made with make_mixed where missing).

    lazy_images: image cells hold the checked file paths instead of their base64 (write them with
    write_tsv_streaming: the full T2I gallery is 20,000 images, ~1.6 GB of base64)."""
    task, key = parse_name(name)
    coco_root = Path(coco_root)
    mixed_root = Path(mixed_root) if mixed_root else coco_root
    mixed_folders = {mixed_folder_name(key, seed) for seed in MIX_SEEDS} if task == 'T2I' else set()

    def image_b64(rel: str, where: str) -> str:
        base = mixed_root if Path(rel).parts[0] in mixed_folders else coco_root
        return (image_file if lazy_images else file_b64)(base / rel, f'{name}: {where}')

    if task == 'MCQ':
        ann = P.load_annotation(annotation_path(ann_dir, key))
        return mcq_frame(ann, key, lambda i: image_b64(ann.images[i], f'annotation row {i}'))
    if task == 'I2T':
        return i2t_frame(P.load_annotation(annotation_path(ann_dir, key)), image_b64)
    ann = P.load_annotation(annotation_path(ann_dir, 'clean'))
    folders = {}
    for seed in MIX_SEEDS:
        folder = mixed_folder_name(key, seed)
        if not all((mixed_root / P.mixed_image_path(p, folder)).is_file() for p in ann.images):
            from vlmeval_ext.rococo.mixed import make_mixed
            print(f'[rococo] writing {key} images, seed {seed}, to {mixed_root / folder}')
            make_mixed(ann.images, coco_root, mixed_root / folder, key, seed, lam=MIX_LAM, progress=progress)
        folders[seed] = folder
    return t2i_frame(ann, folders, image_b64)


# --------------------------------------------------------------------------------------------- vector codec
_DTYPES = {'f32': np.float32, 'f16': np.float16}


def encode_vector(vec: np.ndarray, precision: str = 'f32') -> str:
    """'emb:f32:<dim>:<base64 little-endian>' -- compact, exact at f32, and self-describing."""
    if precision not in _DTYPES:
        raise ValueError(f'precision must be one of {list(_DTYPES)}, got {precision!r}')
    vec = np.asarray(vec, dtype=_DTYPES[precision]).reshape(-1)
    return f'emb:{precision}:{vec.size}:' + base64.b64encode(vec.astype(vec.dtype.newbyteorder('<')).tobytes()).decode()


def decode_vector(cell, where: str) -> np.ndarray:
    """Inverse of encode_vector; errors name where (file, row, index)."""
    if not isinstance(cell, str) or not cell.startswith('emb:'):
        shown = cell if not isinstance(cell, str) else cell[:60]
        raise DataError(f'{where}, column \'prediction\': not an embedding (expected "emb:f32:<dim>:<base64>" from '
                        f'a RoCOCO embedding model, got {shown!r}); retrieval datasets need an embedding model '
                        f'such as RoCOCO-CLIP-B32, generative models use RoCOCO-MCQ-<attack>')
    parts = cell.split(':', 3)
    if len(parts) != 4 or parts[1] not in _DTYPES or not parts[2].isdigit():
        raise DataError(f'{where}, column \'prediction\': malformed embedding header {cell[:40]!r}')
    dtype = np.dtype(_DTYPES[parts[1]]).newbyteorder('<')
    try:
        raw = base64.b64decode(parts[3], validate=True)
    except ValueError as err:
        raise DataError(f'{where}, column \'prediction\': embedding is not valid base64 ({err})') from err
    dim = int(parts[2])
    if len(raw) != dim * dtype.itemsize:
        raise DataError(f'{where}, column \'prediction\': {len(raw)} bytes for a {dim}-dim {parts[1]} vector '
                        f'(truncated or garbled)')
    vec = np.frombuffer(raw, dtype=dtype).astype(np.float32)
    if not np.isfinite(vec).all():
        raise DataError(f'{where}, column \'prediction\': embedding holds NaN/inf')
    return vec


# -------------------------------------------------------------------------------------- retrieval scoring
def _stack(rows: pd.DataFrame, source: str) -> np.ndarray:
    vectors = [decode_vector(cell, f'{source}: row {int(pos) + 2} (index {idx}, {kind} item {item})')
               for pos, idx, kind, item, cell in zip(rows['_pos'], rows['index'], rows['kind'], rows['item'],
                                                      rows['prediction'])]
    dims = {v.size for v in vectors}
    if len(dims) != 1:
        first = next(i for i, v in enumerate(vectors) if v.size != vectors[0].size)
        raise DataError(f'{source}: row {int(rows["_pos"].iloc[first]) + 2}: embedding dim {vectors[first].size} '
                        f'differs from {vectors[0].size} (mixed models in one predictions file?)')
    return np.stack(vectors)


def _check_items(rows: pd.DataFrame, source: str, what: str) -> None:
    items = rows['item'].astype(int).tolist()
    if items != list(range(items[0], items[0] + len(items))):
        raise DataError(f'{source}: {what} rows are not consecutive items (missing or duplicated rows?)')


def annotation_from_text_rows(texts: pd.DataFrame, image_sources: list[str], source: str) -> P.Annotation:
    """The protocol's view of the gallery, rebuilt from the predictions file's text rows."""
    text_image = texts['image_row'].astype(int).to_numpy()
    flags = texts['ground_truth'].astype(str).str.lower()
    bad = ~flags.isin(['yes', 'no'])
    if bad.any():
        pos = int(texts['_pos'][bad].iloc[0])
        raise DataError(f'{source}: row {pos + 2}, column \'ground_truth\': expected yes/no, got '
                        f'{texts["ground_truth"][bad].iloc[0]!r}')
    is_gt = (flags == 'yes').to_numpy()
    n_images = len(image_sources)
    if text_image.min(initial=0) < 0 or text_image.max(initial=0) >= n_images:
        raise DataError(f'{source}: column \'image_row\' of text rows must index the {n_images} images')
    ground_truth = [[] for _ in range(n_images)]
    for t in np.flatnonzero(is_gt):
        ground_truth[text_image[t]].append(int(t))
    lonely = [i for i, g in enumerate(ground_truth) if not g]
    if lonely:
        raise DataError(f'{source}: image item {lonely[0]} has no ground-truth caption ({len(lonely)} such images)')
    texts_list = texts['question'].astype(str).tolist()
    return P.Annotation(path=source, images=list(image_sources), texts=texts_list, raw_texts=texts_list,
                        text_image=text_image, is_ground_truth=is_gt,
                        twin_of=np.full(len(texts_list), -1, dtype=np.int64), ground_truth=ground_truth)


def score_retrieval(preds: pd.DataFrame, direction: str, source: str,
                    block_rows: int = P.BLOCK_ROWS) -> dict:
    """Scores of a RoCOCO-I2T/T2I predictions file (rows in any order; `index` is protocol order).

    Returns {'direction', 'n_images', 'n_texts', 'dim', 'metrics', 'per_seed' (t2i)}; percent, as in the paper.
    """
    df = preds.copy()
    df['_pos'] = np.arange(len(df))
    df = df.sort_values('index', kind='stable')
    kinds = set(df['kind'].astype(str))
    if not kinds <= {'image', 'text'}:
        raise DataError(f'{source}: column \'kind\' must be image or text, found {sorted(kinds - {"image", "text"})}')
    images, texts = df[df['kind'] == 'image'], df[df['kind'] == 'text']
    if images.empty or texts.empty:
        raise DataError(f'{source}: needs both image and text rows ({len(images)} / {len(texts)})')
    _check_items(texts, source, 'text')
    _check_items(images, source, 'image')
    seeds = images['seed'].astype(int)
    originals = images[seeds == 0]
    image_emb = _stack(images, source)
    text_emb = _stack(texts, source)
    if image_emb.shape[1] != text_emb.shape[1]:
        raise DataError(f'{source}: image embeddings have dim {image_emb.shape[1]}, text {text_emb.shape[1]}')
    ann = annotation_from_text_rows(texts.reset_index(drop=True), originals['source'].astype(str).tolist(), source)
    out = {'direction': direction, 'n_images': ann.n_images, 'n_texts': ann.n_texts, 'dim': int(text_emb.shape[1])}
    names = (f'{source} image rows', f'{source} text rows')
    if direction == 'i2t':
        if len(originals) != len(images):
            raise DataError(f'{source}: image-to-text has no mixed images, found seeds {sorted(set(seeds))}')
        out['metrics'] = P.score_i2t(ann, image_emb, text_emb, block_rows=block_rows, names=names)
        return out
    n = ann.n_images
    per_seed = {}
    orig_emb = image_emb[(seeds == 0).to_numpy()]
    for seed in sorted(set(seeds) - {0}):
        mixed = image_emb[(seeds == seed).to_numpy()]
        if len(mixed) != n:
            raise DataError(f'{source}: seed {seed} has {len(mixed)} mixed images for {n} originals')
        per_seed[str(seed)] = P.score_t2i(ann, np.concatenate([orig_emb, mixed]), text_emb,
                                          block_rows=block_rows, names=names)
    if not per_seed:
        raise DataError(f'{source}: text-to-image needs mixed images (rows with seed > 0)')
    out['metrics'] = P.average_seeds(list(per_seed.values()))
    out['per_seed'] = per_seed
    return out


def retrieval_table(result: dict) -> pd.DataFrame:
    """The paper's layout: one row (and per seed for t2i), R@1, R@5, R@10, R_mean, false rate."""
    keys = ['R@1', 'R@5', 'R@10', 'R_mean', 'false_rate']
    rows = [{'seed': f'seed {s}', **{k: round(m[k], 2) for k in keys}} for s, m in result.get('per_seed', {}).items()]
    rows.append({'seed': 'mean' if rows else '-', **{k: round(result['metrics'][k], 2) for k in keys}})
    return pd.DataFrame(rows)


# -------------------------------------------------------------------------------------------- MCQ scoring
def score_mcq(preds: pd.DataFrame, source: str) -> tuple[dict, pd.DataFrame]:
    """Accuracy, twin rate and the parse accounting of a RoCOCO-MCQ predictions file.

    vlmeval_ext.core.predictions decides what a reply is: the kit's exact failure text is excluded and counted; an
    empty reply is an answer that names no option (wrong, counted as `empty`). A reply is read by
    mcq.parse_choice: a stated capital letter, or the text of exactly one option; hedges and the rest are counted
    (`hedge`, `unparsed`), never guessed."""
    rows = []
    letters = [c for c in Q.LETTERS if c in preds.columns]
    for pos, item in enumerate(preds.to_dict('records')):
        options = {c: str(item[c]) for c in letters if isinstance(item.get(c), str) and item[c]}
        for col in ('answer', 'twin'):
            if item.get(col) not in options:
                raise DataError(f'{source}: row {pos + 2}, column {col!r}: {item.get(col)!r} is not one of the '
                                f'options {sorted(options)}')
        reply = item['prediction']
        if classify_prediction(reply) == FAILED:
            choice, how = None, 'inference_failed'
        else:
            choice, how = Q.parse_choice(prediction_text(reply), options)
        rows.append({'index': item['index'], 'answer': item['answer'], 'twin': item['twin'], 'choice': choice,
                     'how': how, 'n_options': len(options),
                     'prediction': reply if isinstance(reply, str) else ''})
    # An inference failure is no answer at all: counted and listed, excluded from the means (like every benchmark
    # here), so a rerun that repairs it changes the score only by what the model then answers.
    answered = [r for r in rows if r['how'] != 'inference_failed']
    if not answered:
        raise DataError(f'{source}: every prediction is an inference failure; nothing to score')
    result = Q.score(answered)
    result['n_items'] = len(rows)
    counts = pd.Series([r['how'] for r in rows]).value_counts()
    result['inference_failed'] = int(counts.get('inference_failed', 0))
    result['empty'] = int(counts.get('empty', 0))
    result['parsed_by'] = {k: int(v) for k, v in counts.items()}
    result['chance'] = 100.0 * float(np.mean([1.0 / r['n_options'] for r in rows]))
    return result, pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------- demo
def demo_image_png(coco_name: str, index: int, size=(160, 120)) -> bytes:
    """A generated stand-in picture (no COCO image may ship): colour blocks seeded by the row, the file name."""
    from PIL import Image, ImageDraw
    rng = np.random.default_rng([2023, index])
    img = Image.new('RGB', size, tuple(int(v) for v in rng.integers(60, 200, 3)))
    draw = ImageDraw.Draw(img)
    for _ in range(4):
        x0, y0 = int(rng.integers(0, size[0] - 30)), int(rng.integers(0, size[1] - 30))
        x1, y1 = x0 + int(rng.integers(15, 60)), y0 + int(rng.integers(15, 50))
        draw.rectangle([x0, y0, x1, y1], fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    draw.text((4, size[1] - 14), f'stand-in {coco_name.split("_")[-1][:12]}', fill=(255, 255, 255))
    buf = io.BytesIO()
    img.save(buf, format='PNG', optimize=True)
    return buf.getvalue()
