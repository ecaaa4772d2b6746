"""RoCOCO retrieval protocol (pure numpy): annotations, caption normalisation, galleries, blockwise ranking, metrics.

The official scripts (pseulki/rococo eval_*_i2t.py / eval_*_t2i.py) materialise the whole similarity matrix and
argsort every row (50,010 columns). Here each block of query rows is scored with one GEMM and the rank of the best
positive is obtained by counting the gallery items that beat it -- exact, O(rows x gallery) per block, bounded
memory. Ties: descending score, then lower gallery index first (the official unstable argsort orders ties
arbitrarily, so any tie rule is "official"; ours is deterministic).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from vlmeval_ext.core.spec import load_spec

# The protocol's parameters: dataset_specs/rococo.yaml is their one source.
SPEC = load_spec('rococo')

N_ADVERSARIAL = SPEC['annotation_rules']['n_adversarial_per_entry']
# entry length -> number of ground-truth captions (the rest are adversarial twins), as the official loader decides
GROUND_TRUTH_COUNT = {int(k): int(v) for k, v in
                      SPEC['annotation_rules']['ground_truth_count_by_entry_length'].items()}
MAX_WORDS = SPEC['pre_caption']['max_words']
ATTACKS = tuple(SPEC['attacks'])
RECALL_AT = tuple(SPEC['protocol']['recall_at'])
BLOCK_ROWS = SPEC['protocol']['topk_block_rows']

_PUNCT = re.compile(r'([.!"()*#:;~])')
_SPACES = re.compile(r'\s{2,}')


def pre_caption(caption: str, max_words: int = MAX_WORDS) -> str:
    """Official BLIP/RoCOCO normalisation: lowercase, punctuation .!"()*#:;~ -> space, collapse spaces, <= max_words."""
    text = _PUNCT.sub(' ', caption.lower())
    text = _SPACES.sub(' ', text)
    text = text.rstrip('\n').strip(' ')
    words = text.split(' ')
    if len(words) > max_words:
        text = ' '.join(words[:max_words])
    return text


@dataclass
class Annotation:
    """One RoCOCO annotation file flattened in file order.

    texts[t] belongs to image text_image[t]; is_ground_truth[t] says whether it is an original caption;
    twin_of[t] is, for an adversarial caption, the index of the ground-truth caption it was made from (else -1).
    """
    path: str
    images: list[str]
    texts: list[str]
    raw_texts: list[str]
    text_image: np.ndarray
    is_ground_truth: np.ndarray
    twin_of: np.ndarray
    ground_truth: list[list[int]] = field(repr=False)

    @property
    def n_images(self) -> int:
        return len(self.images)

    @property
    def n_texts(self) -> int:
        return len(self.texts)

    @property
    def has_adversarial(self) -> bool:
        return bool((~self.is_ground_truth).any())


def parse_annotation(entries, source: str = '<memory>', max_words: int = MAX_WORDS) -> Annotation:
    """Flatten a list of {"image", "caption": [...]} entries; raise naming the source and entry on bad input."""
    if not isinstance(entries, list):
        raise ValueError(f'{source}: expected a JSON list of entries, got {type(entries).__name__}')
    images, texts, raw, text_image, is_gt, twin_of, gts = [], [], [], [], [], [], []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or 'image' not in entry or 'caption' not in entry:
            raise ValueError(f'{source}: entry {i} must be an object with "image" and "caption" keys')
        image, captions = entry['image'], entry['caption']
        if not isinstance(image, str) or not image:
            raise ValueError(f'{source}: entry {i} column "image" must be a non-empty string, got {image!r}')
        if not isinstance(captions, list) or not all(isinstance(c, str) for c in captions):
            raise ValueError(f'{source}: entry {i} ({image}) column "caption" must be a list of strings')
        n_gt = GROUND_TRUTH_COUNT.get(len(captions))
        if n_gt is None:
            raise ValueError(f'{source}: entry {i} ({image}) has {len(captions)} captions; RoCOCO entries have '
                             f'{sorted(GROUND_TRUTH_COUNT)} (5/6 ground truth, then {N_ADVERSARIAL} adversarial)')
        first = len(texts)
        gts.append(list(range(first, first + n_gt)))
        for k, caption in enumerate(captions):
            raw.append(caption)
            texts.append(pre_caption(caption, max_words))
            text_image.append(i)
            is_gt.append(k < n_gt)
            # adversarial caption j (0..4) is ground-truth caption j with one word replaced
            twin_of.append(first + (k - n_gt) if k >= n_gt else -1)
        images.append(image)
    return Annotation(path=source, images=images, texts=texts, raw_texts=raw,
                      text_image=np.asarray(text_image, dtype=np.int64),
                      is_ground_truth=np.asarray(is_gt, dtype=bool),
                      twin_of=np.asarray(twin_of, dtype=np.int64), ground_truth=gts)


def load_annotation(path: str | Path, max_words: int = MAX_WORDS) -> Annotation:
    path = Path(path)
    with open(path, encoding='utf-8') as f:
        try:
            entries = json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f'{path}: not valid JSON ({err})') from err
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
        raise ValueError(f'{ann.path}: text-to-image uses the clean annotation file (coco_karpathy_test.json); '
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


# ------------------------------------------------------------------------------------------------------- ranking
def check_embeddings(emb: np.ndarray, name: str, n_rows: int | None = None, dim: int | None = None) -> np.ndarray:
    """Validate a (rows, dim) embedding array; errors name the file/array and the first bad row."""
    emb = np.asarray(emb)
    if emb.ndim != 2:
        raise ValueError(f'{name}: expected a 2-D (rows, dim) array, got shape {emb.shape}')
    if n_rows is not None and emb.shape[0] != n_rows:
        raise ValueError(f'{name}: expected {n_rows} rows, got {emb.shape[0]} (shape {emb.shape})')
    if dim is not None and emb.shape[1] != dim:
        raise ValueError(f'{name}: embedding dim {emb.shape[1]} does not match the other side ({dim})')
    if not np.issubdtype(emb.dtype, np.number):
        raise ValueError(f'{name}: embeddings must be numeric, got dtype {emb.dtype}')
    finite = np.isfinite(emb)
    if not finite.all():
        row, col = map(int, np.argwhere(~finite)[0])
        n_bad = int((~finite.all(axis=1)).sum())
        raise ValueError(f'{name}: row {row} column {col} is {emb[row, col]} ({n_bad} rows hold NaN/inf)')
    return emb


def l2_normalise(emb: np.ndarray, name: str) -> np.ndarray:
    emb = emb.astype(np.float32, copy=False)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    zero = np.flatnonzero(norms[:, 0] == 0)
    if zero.size:
        raise ValueError(f'{name}: row {int(zero[0])} is an all-zero embedding ({zero.size} such rows); '
                         f'cosine similarity is undefined')
    return emb / norms


@dataclass
class RankResult:
    rank: np.ndarray      # 0-based rank of the best positive per query
    best: np.ndarray      # gallery index of that positive
    topk: np.ndarray      # (n_queries, k) gallery indices, best first (score desc, index asc)


def _chunked(scores: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """(main, tail): scores[:, :full] as a (rows, n_chunks, chunk) view (no copy) and the ragged last columns."""
    n_rows, n = scores.shape
    full = n // chunk * chunk
    main = np.lib.stride_tricks.as_strided(scores, shape=(n_rows, full // chunk, chunk),
                                           strides=(scores.strides[0], chunk * scores.strides[1], scores.strides[1]),
                                           writeable=False)
    return main, scores[:, full:]


def _sorted_top_k(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, n_rows: int, k: int) -> np.ndarray:
    """The first k candidates of every row by (score desc, column asc); every row must have >= k candidates."""
    order = np.lexsort((cols, -vals, rows))
    rows, cols = rows[order], cols[order]
    starts = np.searchsorted(rows, np.arange(n_rows))
    return cols[starts[:, None] + np.arange(k)[None, :]].astype(np.int64)


def _select_block(scores: np.ndarray, b_score: np.ndarray, b_index: np.ndarray, k: int,
                  chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """(rank of the best positive, top-k columns) of every row of a score block, exactly, without sorting rows.

    rank = entries above the positive's score + equal entries at a lower column (ties go to the lower index).
    One pass takes the maximum of each `chunk` columns; only chunks whose maximum reaches the positive's score
    can hold entries ahead of it, and only chunks whose maximum reaches the k-th largest chunk maximum can hold
    top-k entries (those k maxima are k distinct entries, so the k-th largest score is at least that). Those
    chunks are gathered and compared exactly; a block where most chunks qualify is compared in full instead.
    """
    n_rows, n = scores.shape
    k = min(k, n)
    b = b_score.reshape(-1, 1)
    if n < 4 * chunk:                                                  # small galleries: direct
        ahead = np.count_nonzero(scores > b, axis=1)
        before = np.arange(n)[None, :] < b_index[:, None]
        ahead += np.count_nonzero((scores == b) & before, axis=1)
        kth = np.partition(scores, n - k, axis=1)[:, n - k:n - k + 1]
        r, c = np.nonzero(scores >= kth)
        return ahead, _sorted_top_k(r, c, scores[r, c], n_rows, k)
    main, tail = _chunked(scores, chunk)
    full = main.shape[1] * chunk
    maxima = main.max(axis=2)                                          # (rows, n_chunks)
    # --- rank: chunks that can hold an entry >= the positive's score
    tail_cols = np.arange(full, n)[None, :]
    ahead = np.count_nonzero(tail > b, axis=1) + np.count_nonzero((tail == b) & (tail_cols < b_index[:, None]),
                                                                  axis=1)
    r, c = np.nonzero(maxima >= b)
    if len(r) > maxima.size // 2:
        ahead += np.count_nonzero(main.reshape(n_rows, full) > b, axis=1)
        ahead += np.count_nonzero((main.reshape(n_rows, full) == b)
                                  & (np.arange(full)[None, :] < b_index[:, None]), axis=1)
    elif len(r):
        vals = main[r, c]                                              # (m, chunk) copy of the few chunks
        cols = c[:, None] * chunk + np.arange(chunk)[None, :]
        hits = np.count_nonzero(vals > b[r], axis=1) + np.count_nonzero(
            (vals == b[r]) & (cols < b_index[r][:, None]), axis=1)
        ahead += np.bincount(r, weights=hits, minlength=n_rows).astype(np.int64)
    # --- top k: chunks whose maximum reaches the k-th largest chunk maximum
    all_max = np.concatenate([maxima, tail.max(axis=1, keepdims=True)], axis=1) if tail.shape[1] else maxima
    m = all_max.shape[1]
    if k > m:
        kth = np.partition(scores, n - k, axis=1)[:, n - k:n - k + 1]
        r, c = np.nonzero(scores >= kth)
        return ahead, _sorted_top_k(r, c, scores[r, c], n_rows, k)
    kth = np.partition(all_max, m - k, axis=1)[:, m - k:m - k + 1]
    r, c = np.nonzero(maxima >= kth)
    vals = main[r, c]
    flat = np.flatnonzero(vals >= kth[r])                              # 1-D: far faster than a 2-D nonzero
    vi, vj = flat // chunk, flat % chunk
    rows, cols, picked = r[vi], c[vi] * chunk + vj, vals[vi, vj]
    if tail.shape[1]:
        ti, tj = np.nonzero(tail >= kth)
        rows = np.concatenate([rows, ti])
        cols = np.concatenate([cols, full + tj])
        picked = np.concatenate([picked, tail[ti, tj]])
    return ahead, _sorted_top_k(rows, cols, picked, n_rows, k)


def rank_blockwise(queries: np.ndarray, gallery: np.ndarray, positives: np.ndarray, k: int = 10,
                   block_rows: int = BLOCK_ROWS, chunk: int = 1024) -> RankResult:
    """Exact rank of the best positive of every query, scoring `block_rows` queries at a time.

    positives: (n_queries, p) gallery indices, -1 = padding. Similarity = dot product (normalise beforehand for
    cosine). Peak extra memory ~ block_rows x n_gallery x 4 bytes (x2 for temporaries). After each block's
    GEMM, _select_block finds the rank and the top k from per-chunk maxima (one pass) and a few gathered chunks.
    """
    n_q, n_g = queries.shape[0], gallery.shape[0]
    if positives.shape[0] != n_q:
        raise ValueError(f'positives has {positives.shape[0]} rows, queries {n_q}')
    if ((positives >= n_g) | (positives < -1)).any() or (positives[:, 0] < 0).any():
        raise ValueError(f'positives must index the gallery of {n_g} items and every query needs one')
    gallery_t = np.ascontiguousarray(gallery.T)
    rank = np.empty(n_q, dtype=np.int64)
    best = np.empty(n_q, dtype=np.int64)
    topk = np.empty((n_q, min(k, n_g)), dtype=np.int64)
    for start in range(0, n_q, block_rows):
        stop = min(start + block_rows, n_q)
        scores = queries[start:stop] @ gallery_t                       # (b, n_g)
        pos = positives[start:stop]
        pos_scores = np.where(pos >= 0, np.take_along_axis(scores, np.maximum(pos, 0), axis=1), -np.inf)
        # best positive: highest score, then lowest gallery index (pad -1 sorts last via +inf index)
        pos_index = np.where(pos >= 0, pos, np.iinfo(np.int64).max)
        pick = np.lexsort((pos_index, -pos_scores), axis=1)[:, 0] if pos.shape[1] > 1 else np.zeros(len(pos), int)
        b_score = pos_scores[np.arange(len(pos)), pick].astype(scores.dtype)
        b_index = pos[np.arange(len(pos)), pick]
        rank[start:stop], topk[start:stop] = _select_block(scores, b_score, b_index, k, chunk)
        best[start:stop] = b_index
    return RankResult(rank=rank, best=best, topk=topk)


def recall_metrics(rank: np.ndarray, top1_false: np.ndarray) -> dict:
    """R@1/5/10, R_mean and false rate, all in percent as in the paper."""
    n = len(rank)
    out = {f'R@{k}': 100.0 * float((rank < k).sum()) / n for k in RECALL_AT}
    out['R_mean'] = sum(out[f'R@{k}'] for k in RECALL_AT) / len(RECALL_AT)
    out['false_rate'] = 100.0 * float(np.asarray(top1_false).sum()) / n
    return out


def score_i2t(ann: Annotation, image_emb: np.ndarray, text_emb: np.ndarray, normalise: bool = True,
              block_rows: int = BLOCK_ROWS, names: tuple[str, str] = ('image embeddings', 'text embeddings')) -> dict:
    """Image-to-text: images query every caption of the file; false = top-1 caption is adversarial (any image's)."""
    image_emb = check_embeddings(image_emb, names[0], ann.n_images)
    text_emb = check_embeddings(text_emb, names[1], ann.n_texts, image_emb.shape[1])
    q, g = (l2_normalise(image_emb, names[0]), l2_normalise(text_emb, names[1])) if normalise else \
        (image_emb.astype(np.float32), text_emb.astype(np.float32))
    res = rank_blockwise(q, g, i2t_positives(ann), block_rows=block_rows)
    return recall_metrics(res.rank, ~ann.is_ground_truth[res.topk[:, 0]])


def score_t2i(ann: Annotation, image_emb: np.ndarray, text_emb: np.ndarray, normalise: bool = True,
              block_rows: int = BLOCK_ROWS, names: tuple[str, str] = ('image embeddings', 'text embeddings')) -> dict:
    """Text-to-image: clean captions query originals + mixed images; false = top-1 image is a mixed one."""
    if ann.has_adversarial:
        raise ValueError(f'{ann.path}: text-to-image uses the clean annotation file; this one has adversarial captions')
    image_emb = check_embeddings(image_emb, names[0], 2 * ann.n_images)
    text_emb = check_embeddings(text_emb, names[1], ann.n_texts, image_emb.shape[1])
    g, q = (l2_normalise(image_emb, names[0]), l2_normalise(text_emb, names[1])) if normalise else \
        (image_emb.astype(np.float32), text_emb.astype(np.float32))
    res = rank_blockwise(q, g, t2i_positives(ann), block_rows=block_rows)
    return recall_metrics(res.rank, res.topk[:, 0] >= ann.n_images)


def average_seeds(per_seed: Sequence[dict]) -> dict:
    """Mean of each metric over the mixing seeds (the paper averages seeds 1, 10, 100)."""
    keys = per_seed[0].keys()
    return {k: float(np.mean([r[k] for r in per_seed])) for k in keys}
