"""RoCOCO's kit TSVs from the official annotations and your own COCO val2014 images (kit-free).

Two layouts (the kit-dialect classes vlmeval_ext.dataset.rococo_mcq / rococo_retrieval read them):
- MCQ (`RoCOCO-MCQ-<attack>`): one row per image: image, question, A..D, answer letter, twin letter (the option
  holding the ground truth's adversarial twin). Each image's options are drawn with numpy's
  default_rng([seed, image row]): an item does not depend on which other items are built.
- Retrieval (`RoCOCO-I2T-<file>`, `RoCOCO-T2I-<method>`): one row per gallery/query item in protocol order;
  `kind` = image | text. Image rows carry the COCO file's bytes unchanged (base64); text rows carry the
  normalised caption in `question`. Columns `item`, `image_row`, `ground_truth`, `seed` rebuild the protocol from
  the predictions file alone.
Every option and caption goes through the official pre_caption, so the twin cannot be spotted by case or
punctuation. Parameters: dataset_specs/rococo.yaml.
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from vlmeval_ext.dataset.utils.rococo_mcq import LETTERS, QUESTION
from vlmeval_ext.io import DataError, tsv_path, write_kit_tsv
# The caption normalisation, the annotation's reading, the MCQ items and the TSV writing are the exported build
# script's (scripts/build_rococo_mcq_tsv.py in the RoCOCO-MCQ pull request), so the TSV the plugin builds and the
# one a maintainer builds are the same bytes.
from vlmeval_ext.scripts import build_rococo_mcq_tsv as build_script
from vlmeval_ext.scripts.build_rococo_mcq_tsv import Annotation
from vlmeval_ext.spec import load_spec

SPEC = load_spec('rococo')
N_ADVERSARIAL = SPEC['annotation_rules']['n_adversarial_per_entry']
# entry length -> number of ground-truth captions (the rest are adversarial twins), as the official loader decides
GROUND_TRUTH_COUNT = {int(k): int(v) for k, v in SPEC['annotation_rules']['ground_truth_count_by_entry_length'].items()}
MAX_WORDS = SPEC['pre_caption']['max_words']
ATTACKS = tuple(SPEC['attacks'])
MCQ_SEED = SPEC['mcq_recast']['seed']


# ------------------------------------------------------------------------------------------ annotations
def parse_annotation(entries, source: str = '<memory>', max_words: int = MAX_WORDS) -> Annotation:
    """Flatten a list of {"image", "caption": [...]} entries; raise naming the source and entry on bad input."""
    if not isinstance(entries, list):
        raise DataError(f'{source}: expected a JSON list of entries, got {type(entries).__name__}')
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or 'image' not in entry or 'caption' not in entry:
            raise DataError(f'{source}: entry {i} must be an object with "image" and "caption" keys')
        image, captions = entry['image'], entry['caption']
        if not isinstance(image, str) or not image:
            raise DataError(f'{source}: entry {i} column "image" must be a non-empty string, got {image!r}')
        if not isinstance(captions, list) or not all(isinstance(c, str) for c in captions):
            raise DataError(f'{source}: entry {i} ({image}) column "caption" must be a list of strings')
        if len(captions) not in GROUND_TRUTH_COUNT:
            raise DataError(f'{source}: entry {i} ({image}) has {len(captions)} captions; RoCOCO entries have '
                            f'{sorted(GROUND_TRUTH_COUNT)} (5/6 ground truth, then {N_ADVERSARIAL} adversarial)')
    return build_script.flatten(entries, source, max_words)


def load_annotation(path: str | Path, max_words: int = MAX_WORDS) -> Annotation:
    path = Path(path)
    with open(path, encoding='utf-8') as f:
        try:
            entries = json.load(f)
        except json.JSONDecodeError as err:
            raise DataError(f'{path}: not valid JSON ({err})') from err
    return parse_annotation(entries, source=str(path), max_words=max_words)


# ----------------------------------------------------------------------------------------------------- galleries
def mixed_image_path(image: str, mixed_dir: str) -> str:
    """Where the official t2i loader looks for the mixed twin of `image`: <mixed_dir>/<basename>."""
    return f'{mixed_dir.rstrip("/")}/{image.split("/")[-1]}'


def i2t_gallery(ann: Annotation) -> tuple[list[str], list[str]]:
    """Row order for i2t: queries = images in annotation order, gallery = every caption in file order."""
    return list(ann.images), list(ann.texts)


def t2i_gallery(ann: Annotation, mixed_dir: str) -> tuple[list[str], list[str]]:
    """Row order for t2i: gallery = originals then mixed images in the same order; queries = every caption."""
    if ann.has_adversarial:
        raise DataError(f'{ann.path}: text-to-image uses the clean annotation file (coco_karpathy_test.json); '
                         f'this one has adversarial captions')
    return list(ann.images) + [mixed_image_path(p, mixed_dir) for p in ann.images], list(ann.texts)


def i2t_positives(ann: Annotation) -> np.ndarray:
    """(n_images, max ground truth) gallery indices of each image's ground-truth captions, padded with -1."""
    width = max(len(g) for g in ann.ground_truth)
    out = np.full((ann.n_images, width), -1, dtype=np.int64)
    for i, g in enumerate(ann.ground_truth):
        out[i, :len(g)] = g
    return out


def t2i_positives(ann: Annotation) -> np.ndarray:
    """(n_texts, 1): the original image of each caption (the mixed twins are never positives)."""
    return ann.text_image.reshape(-1, 1).copy()



# ------------------------------------------------------------------------------------------ MCQ items
def build_items(ann: Annotation, attack: str, seed: int = MCQ_SEED, n_options: int = 4,
                rows: Iterable[int] | None = None) -> list[dict]:
    """The MCQ items of an attack file (build_script.build_items), its arguments checked first."""
    if not ann.has_adversarial:
        raise DataError(f'{ann.path}: the MCQ recast needs an attack file (ground truth + adversarial captions)')
    if not 3 <= n_options <= len(LETTERS):
        raise ValueError(f'n_options must be 3..{len(LETTERS)}, got {n_options}')
    return build_script.build_items(ann, attack, QUESTION, LETTERS[:n_options], seed, n_options, rows)


# ------------------------------------------------------------------------------------------ TSVs
ANNOTATION_FILES = {'clean': 'coco_karpathy_test.json', **{a: f'{a}.json' for a in ATTACKS}}
MIX_METHODS = tuple(SPEC['mixing']['methods'])
MIX_SEEDS = tuple(SPEC['mixing']['seeds'])
MIX_LAM = SPEC['mixing']['lam']
MCQ_NAMES = [f'RoCOCO-MCQ-{a}' for a in ATTACKS]
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
    return base64.b64encode(image_file(path, where).read_bytes()).decode('ascii')


def image_file(path: Path, where: str) -> Path:
    """The image file, checked to decode whole (an error page saved as .jpg, a header only, a bomb: one line),
    not kept in memory: write_tsv_streaming reads it again per row."""
    from vlmeval_ext.prepare.common import check_image_bytes
    if not path.is_file():
        raise DataError(f'{where}: image {path} not found')
    if path.stat().st_size == 0:
        raise DataError(f'{where}: image {path} is empty (0 bytes)')
    check_image_bytes(path.read_bytes(), f'{where}: {path}')
    return path


write_tsv = write_kit_tsv   # the kit's TSV + .md5 sidecar (vlmeval_ext.io)


def write_tsv_streaming(frame: pd.DataFrame, path: str | os.PathLike) -> str:
    """write_tsv for a frame whose image cells may hold file paths (frame_for(..., lazy_images=True)): each
    file is read and base64-encoded as its row is written, so memory holds one image, not the gallery. Same
    format as write_tsv (tab separated, every cell quoted), written atomically, plus the `.md5` sidecar."""
    from vlmeval_ext.io import file_md5
    path = str(path)
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    tmp = path + '.partial'
    with open(tmp, 'w', encoding='utf-8', newline='') as f:
        build_script.write_rows(list(frame.columns), frame.itertuples(index=False, name=None), f)
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
def mcq_frame(ann: Annotation, attack: str, image_b64: Callable[[int], str], rows: Sequence[int] | None = None,
              seed: int = MCQ_SEED, n_options: int = 4) -> pd.DataFrame:
    """One MCQ row per image; image_b64(image row) gives the encoded image."""
    return pd.DataFrame.from_records([
        build_script.tsv_record(item, image_b64(item['index']), LETTERS[:n_options])
        for item in build_items(ann, attack, seed=seed, n_options=n_options, rows=rows)])


# ------------------------------------------------------------------------------------------ retrieval frames
def _image_rows(paths: Sequence[str], image_row: Sequence[int], seed: int, image_b64: Callable[[str, str], str],
                start_item: int) -> list[dict]:
    return [{'kind': 'image', 'item': start_item + k, 'image_row': int(r), 'ground_truth': '', 'seed': seed,
             'source': p, 'question': '', 'image': image_b64(p, f'gallery item {start_item + k}')}
            for k, (p, r) in enumerate(zip(paths, image_row))]


def _text_rows(ann: Annotation) -> list[dict]:
    return [{'kind': 'text', 'item': t, 'image_row': int(ann.text_image[t]),
             'ground_truth': 'yes' if ann.is_ground_truth[t] else 'no', 'seed': 0, 'source': '',
             'question': ann.texts[t], 'image': ''} for t in range(ann.n_texts)]


def _finish(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(rows)
    df.insert(0, 'index', np.arange(len(df)))
    return df


def i2t_frame(ann: Annotation, image_b64: Callable[[str, str], str]) -> pd.DataFrame:
    """Rows: the images in annotation order (queries), then every caption in file order (gallery)."""
    return _finish(_image_rows(ann.images, range(ann.n_images), 0, image_b64, 0) + _text_rows(ann))


def t2i_frame(ann: Annotation, mixed_dirs: dict[int, str], image_b64: Callable[[str, str], str]) -> pd.DataFrame:
    """Rows: the originals, then the mixed twins of each seed (same order), then the clean captions (queries)."""
    if ann.has_adversarial:
        raise DataError(f'{ann.path}: text-to-image uses the clean annotation file (coco_karpathy_test.json)')
    rows = _image_rows(ann.images, range(ann.n_images), 0, image_b64, 0)
    for seed, folder in sorted(mixed_dirs.items()):
        paths = [mixed_image_path(p, folder) for p in ann.images]
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
        ann = load_annotation(annotation_path(ann_dir, key))
        return mcq_frame(ann, key, lambda i: image_b64(ann.images[i], f'annotation row {i}'))
    if task == 'I2T':
        return i2t_frame(load_annotation(annotation_path(ann_dir, key)), image_b64)
    ann = load_annotation(annotation_path(ann_dir, 'clean'))
    folders = {}
    for seed in MIX_SEEDS:
        folder = mixed_folder_name(key, seed)
        if not all((mixed_root / mixed_image_path(p, folder)).is_file() for p in ann.images):
            from vlmeval_ext.prepare.rococo_mixed import make_mixed
            print(f'[rococo] writing {key} images, seed {seed}, to {mixed_root / folder}')
            make_mixed(ann.images, coco_root, mixed_root / folder, key, seed, lam=MIX_LAM, progress=progress)
        folders[seed] = folder
    return t2i_frame(ann, folders, image_b64)



def prepare(name: str, source_dir=None, coco_root=None, mixed_root=None) -> str:
    """`vlmeval-ext prepare RoCOCO-...`: the registry's entry point (see prepare_tsv)."""
    return prepare_tsv(name, source_dir, coco_root, mixed_root)


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
