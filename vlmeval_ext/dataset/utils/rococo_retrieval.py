"""RoCOCO retrieval (Park et al. 2023, arXiv 2304.10727): ranking, recall at K and the false rate.

The TSV holds one row per gallery or query item in protocol order: `kind` image | text, `item` (its
position on its side), `image_row` (the image a row is or belongs to), `ground_truth` (text rows),
`seed` (image rows: 0 for a COCO original, else the seed of a mixed image). An embedding model
answers each row with its vector ("emb:f32:<dim>:<base64>"), so the whole protocol is rebuilt from
the predictions file:
  i2t  the images query every caption of the file; rank of the best ground-truth caption; false
       rate = the top-1 caption is an adversarial one.
  t2i  the clean captions query the originals plus the mixed images of one seed; false rate =
       the top-1 image is a mixed one; per seed and their mean (the paper's seeds 1, 10, 100).
Ranking is blockwise and exact (equal to a full sort; ties go to the lower gallery index), without
the similarity matrix. numpy and pandas only.
"""
import base64

import numpy as np
import pandas as pd

RECALL_AT, BLOCK_ROWS, TOP = (1, 5, 10), 256, 10
_DTYPES = {'f32': np.float32, 'f16': np.float16}


def encode_vector(vec, precision='f32'):
    """'emb:f32:<dim>:<base64 little-endian>': compact, exact at f32, self-describing."""
    vec = np.asarray(vec, dtype=_DTYPES[precision]).reshape(-1)
    raw = vec.astype(vec.dtype.newbyteorder('<')).tobytes()
    return f'emb:{precision}:{vec.size}:' + base64.b64encode(raw).decode()


def decode_vector(cell, where):
    if not isinstance(cell, str) or not cell.startswith('emb:'):
        raise ValueError(f"{where}, column 'prediction': not an embedding (expected "
                         '"emb:f32:<dim>:<base64>" from an embedding model, got '
                         f'{str(cell)[:60]!r})')
    parts = cell.split(':', 3)
    if len(parts) != 4 or parts[1] not in _DTYPES or not parts[2].isdigit():
        raise ValueError(f"{where}, column 'prediction': malformed embedding {cell[:40]!r}")
    dtype = np.dtype(_DTYPES[parts[1]]).newbyteorder('<')
    try:
        raw = base64.b64decode(parts[3], validate=True)
    except ValueError as err:
        raise ValueError(f"{where}, column 'prediction': not valid base64 ({err})") from None
    if len(raw) != int(parts[2]) * dtype.itemsize:
        raise ValueError(f"{where}, column 'prediction': {len(raw)} bytes for a {parts[2]}-dim "
                         f'{parts[1]} vector (truncated?)')
    vec = np.frombuffer(raw, dtype=dtype).astype(np.float32)
    if not np.isfinite(vec).all() or not vec.any():
        raise ValueError(f"{where}, column 'prediction': the embedding is zero or not finite")
    return vec


# ------------------------------------------------------------------------------------ ranking
def _top_k(rows, cols, vals, n_rows, k):
    """The first k candidates of every row by (score desc, column asc)."""
    order = np.lexsort((cols, -vals, rows))
    rows, cols = rows[order], cols[order]
    starts = np.searchsorted(rows, np.arange(n_rows))
    return cols[starts[:, None] + np.arange(k)[None, :]].astype(np.int64)


def _select_block(scores, b_score, b_index, k, chunk=1024):
    """(rank of the best positive, top-k columns) of every row, exactly, without sorting rows:
    rank = entries above the positive + equal entries at a lower column. Only chunks whose
    maximum reaches the positive (or the k-th largest chunk maximum) are compared in full."""
    n_rows, n = scores.shape
    k, b = min(k, n), b_score.reshape(-1, 1)
    if n < 4 * chunk:
        ahead = np.count_nonzero(scores > b, axis=1) + np.count_nonzero(
            (scores == b) & (np.arange(n)[None, :] < b_index[:, None]), axis=1)
        kth = np.partition(scores, n - k, axis=1)[:, n - k:n - k + 1]
        r, c = np.nonzero(scores >= kth)
        return ahead, _top_k(r, c, scores[r, c], n_rows, k)
    full = n // chunk * chunk
    main = np.lib.stride_tricks.as_strided(
        scores, shape=(n_rows, full // chunk, chunk), writeable=False,
        strides=(scores.strides[0], chunk * scores.strides[1], scores.strides[1]))
    tail, maxima = scores[:, full:], main.max(axis=2)
    ahead = np.count_nonzero(tail > b, axis=1) + np.count_nonzero(
        (tail == b) & (np.arange(full, n)[None, :] < b_index[:, None]), axis=1)
    r, c = np.nonzero(maxima >= b)
    if len(r) > maxima.size // 2:
        flat = main.reshape(n_rows, full)
        ahead += np.count_nonzero(flat > b, axis=1) + np.count_nonzero(
            (flat == b) & (np.arange(full)[None, :] < b_index[:, None]), axis=1)
    elif len(r):
        vals, cols = main[r, c], c[:, None] * chunk + np.arange(chunk)[None, :]
        hits = np.count_nonzero(vals > b[r], axis=1) + np.count_nonzero(
            (vals == b[r]) & (cols < b_index[r][:, None]), axis=1)
        ahead += np.bincount(r, weights=hits, minlength=n_rows).astype(np.int64)
    all_max = (np.concatenate([maxima, tail.max(axis=1, keepdims=True)], axis=1)
               if tail.shape[1] else maxima)
    m = all_max.shape[1]
    if k > m:
        kth = np.partition(scores, n - k, axis=1)[:, n - k:n - k + 1]
        r, c = np.nonzero(scores >= kth)
        return ahead, _top_k(r, c, scores[r, c], n_rows, k)
    kth = np.partition(all_max, m - k, axis=1)[:, m - k:m - k + 1]
    r, c = np.nonzero(maxima >= kth)
    vals = main[r, c]
    flat = np.flatnonzero(vals >= kth[r])
    vi, vj = flat // chunk, flat % chunk
    rows, cols, picked = r[vi], c[vi] * chunk + vj, vals[vi, vj]
    if tail.shape[1]:
        ti, tj = np.nonzero(tail >= kth)
        rows, cols = np.concatenate([rows, ti]), np.concatenate([cols, full + tj])
        picked = np.concatenate([picked, tail[ti, tj]])
    return ahead, _top_k(rows, cols, picked, n_rows, k)


def rank_blockwise(queries, gallery, positives, k=TOP, block_rows=BLOCK_ROWS):
    """(0-based rank of the best positive, its gallery index, the top k) of every query.
    positives: (n_queries, p) gallery indices, -1 = padding; similarity = dot product."""
    n_q, n_g = queries.shape[0], gallery.shape[0]
    gallery_t = np.ascontiguousarray(gallery.T)
    rank, best = np.empty(n_q, np.int64), np.empty(n_q, np.int64)
    topk = np.empty((n_q, min(k, n_g)), np.int64)
    for start in range(0, n_q, block_rows):
        stop = min(start + block_rows, n_q)
        scores, pos = queries[start:stop] @ gallery_t, positives[start:stop]
        pos_scores = np.where(pos >= 0, np.take_along_axis(scores, np.maximum(pos, 0), axis=1),
                              -np.inf)
        pos_index = np.where(pos >= 0, pos, np.iinfo(np.int64).max)
        pick = (np.lexsort((pos_index, -pos_scores), axis=1)[:, 0] if pos.shape[1] > 1
                else np.zeros(len(pos), int))
        b_score = pos_scores[np.arange(len(pos)), pick].astype(scores.dtype)
        best[start:stop] = pos[np.arange(len(pos)), pick]
        rank[start:stop], topk[start:stop] = _select_block(scores, b_score, best[start:stop], k)
    return rank, best, topk


def recall_metrics(rank, false):
    """R@1/5/10, R_mean and the false rate, in percent as in the paper."""
    out = {f'R@{k}': 100.0 * float((rank < k).sum()) / len(rank) for k in RECALL_AT}
    out['R_mean'] = sum(out[f'R@{k}'] for k in RECALL_AT) / len(RECALL_AT)
    out['false_rate'] = 100.0 * float(np.asarray(false).sum()) / len(rank)
    return out


# ------------------------------------------------------------------------------------ scoring
def _vectors(rows, source):
    where = [f'{source}: row {p + 2} (index {i})' for p, i in zip(rows['_pos'], rows['index'])]
    vecs = [decode_vector(c, w) for c, w in zip(rows['prediction'], where)]
    odd = next((k for k, v in enumerate(vecs) if v.size != vecs[0].size), None)
    if odd is not None:
        raise ValueError(f"{where[odd]}, column 'prediction': a {vecs[odd].size}-dim embedding, "
                         f'the others have {vecs[0].size} (two models in one file?)')
    emb = np.stack(vecs)
    return emb / np.linalg.norm(emb, axis=1, keepdims=True)  # cosine similarity


def _consecutive(rows, source, what):
    items = rows['item'].astype(int).tolist()
    if items != list(range(len(items))):
        raise ValueError(f'{source}: the {what} rows are not items 0..{len(items) - 1} '
                         '(missing or duplicated rows?)')


def score_predictions(data, direction, source):
    """(scores, per-query ranks) of a RoCOCO-I2T / T2I predictions table."""
    df = data.assign(_pos=np.arange(len(data)))
    df = df.iloc[np.argsort(df['index'].astype(int).to_numpy(), kind='stable')]
    images, texts = df[df['kind'] == 'image'], df[df['kind'] == 'text']
    if images.empty or texts.empty or len(images) + len(texts) != len(df):
        raise ValueError(f"{source}: column 'kind' must be image or text, and both must occur")
    _consecutive(texts, source, 'text')
    _consecutive(images, source, 'image')
    seeds = images['seed'].astype(int).to_numpy()
    originals = images[seeds == 0]
    image_emb, text_emb = _vectors(images, source), _vectors(texts, source)
    if image_emb.shape[1] != text_emb.shape[1]:
        raise ValueError(f'{source}: image embeddings have {image_emb.shape[1]} dimensions, text '
                         f'embeddings {text_emb.shape[1]}')
    n = len(originals)
    text_image = texts['image_row'].astype(int).to_numpy()
    flags = texts['ground_truth'].str.lower()
    if not flags.isin(['yes', 'no']).all():
        raise ValueError(f"{source}: column 'ground_truth' of the text rows must be yes or no")
    is_gt = flags.to_numpy() == 'yes'
    if text_image.min() < 0 or text_image.max() >= n or set(np.unique(text_image[is_gt])) != set(
            range(n)):
        raise ValueError(f"{source}: column 'image_row' of the text rows must give each of the "
                         f'{n} images a ground-truth caption')
    out = {'direction': direction, 'n_images': n, 'n_texts': len(texts),
           'dim': int(text_emb.shape[1])}
    if direction == 'i2t':
        if len(originals) != len(images):
            raise ValueError(f'{source}: image-to-text takes no mixed images')
        width = np.bincount(text_image[is_gt], minlength=n).max()
        positives = np.full((n, width), -1, np.int64)
        for i in range(n):
            gt = np.flatnonzero(is_gt & (text_image == i))
            positives[i, :len(gt)] = gt
        rank, best, top = rank_blockwise(image_emb[seeds == 0], text_emb, positives)
        false = ~is_gt[top[:, 0]]
        out['metrics'] = recall_metrics(rank, false)
        ranks = pd.DataFrame({'seed': '-', 'query': np.arange(n), 'cluster': np.arange(n),
                              'rank': rank, 'top1_false': false.astype(int),
                              'top5': [';'.join(map(str, t[:5])) for t in top]})
        return out, ranks
    if not is_gt.all():
        raise ValueError(f'{source}: text-to-image uses the clean captions only')
    per_seed, frames = {}, []
    for seed in sorted(set(seeds) - {0}):
        mixed = image_emb[seeds == seed]
        if len(mixed) != n:
            raise ValueError(f'{source}: seed {seed} has {len(mixed)} mixed images for {n} '
                             'originals')
        rank, best, top = rank_blockwise(text_emb, np.concatenate([image_emb[seeds == 0], mixed]),
                                         text_image.reshape(-1, 1))
        false = top[:, 0] >= n
        per_seed[str(seed)] = recall_metrics(rank, false)
        frames.append(pd.DataFrame({'seed': str(seed), 'query': np.arange(len(texts)),
                                    'cluster': text_image, 'rank': rank,
                                    'top1_false': false.astype(int),
                                    'top5': [';'.join(map(str, t[:5])) for t in top]}))
    if not per_seed:
        raise ValueError(f'{source}: text-to-image needs mixed images (rows with seed > 0)')
    out['metrics'] = {k: float(np.mean([m[k] for m in per_seed.values()]))
                      for k in next(iter(per_seed.values()))}
    out['per_seed'] = per_seed
    return out, pd.concat(frames, ignore_index=True)


def retrieval_table(result):
    """The paper's layout: a row per mixing seed (t2i) and their mean, in percent."""
    keys = ['R@1', 'R@5', 'R@10', 'R_mean', 'false_rate']
    rows = [{'seed': f'seed {s}', **{k: round(m[k], 2) for k in keys}}
            for s, m in result.get('per_seed', {}).items()]
    mean = {k: round(result['metrics'][k], 2) for k in keys}
    rows.append({'seed': 'mean' if rows else '-', **mean})
    return pd.DataFrame(rows)


def evaluation_files(data, dataset_name, eval_file):
    """What evaluate writes, by file suffix: the score file, the recall table (a row per mixing
    seed and their mean), the per-query ranks (rank of the first positive, whether the top-1 is a
    false match, the top 5)."""
    direction = 'i2t' if '-I2T-' in dataset_name else 't2i'
    result, ranks = score_predictions(data, direction, eval_file)
    table = retrieval_table(result)
    table.insert(0, 'dataset', dataset_name)
    return {'_score.json': {'dataset': dataset_name, **result}, '_acc.csv': table,
            '_ranks.tsv': ranks}


def result_table(dataset, table):
    """What evaluate returns and the kit prints: the mean (or only) row first, the headline."""
    labels = {'R@1': 'R@1 (%)', 'R@5': 'R@5 (%)', 'R@10': 'R@10 (%)', 'R_mean': 'R_mean (%)',
              'false_rate': 'false rate (%)'}
    records = table.to_dict('records')
    rows = [{dataset: 'this run' if r['seed'] == '-' else r['seed'],
             **{label: r[key] for key, label in labels.items()}}
            for r in records[-1:] + records[:-1]]
    return pd.DataFrame(rows)
