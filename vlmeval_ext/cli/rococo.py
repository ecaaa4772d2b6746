"""`vlmeval-ext rococo score | gallery | make-mixed | embed | prepare | demo-gallery` (also `python -m
vlmeval_ext.cli.rococo ...`): RoCOCO tools beside the kit datasets.

score        scores embeddings computed anywhere; prints the metrics JSON object as the LAST line of stdout.
gallery      exports the normalised texts and the image list in the row order `score` expects.
make-mixed   writes the official-style mixed/patched images for one seed.
embed        computes (and caches) embeddings with an embedding model, in `score`'s row order; sharded across
             torchrun ranks (every batch holds the same items whatever the world size, so one process and N
             processes produce the same arrays).
prepare      builds the kit TSV of RoCOCO-MCQ-<attack>, RoCOCO-I2T-<file> or RoCOCO-T2I-<method> under $LMUData
             (what `vlmeval-ext prepare NAME --from ANN_DIR` does, with --coco-root / --mixed-root added).
demo-gallery writes the tiny demo gallery (8 real annotation entries per file, generated stand-in pictures).
Ranking and metrics are the kit dataset's own (vlmeval_ext.dataset.utils.rococo_retrieval).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from vlmeval_ext.dataset.utils.rococo_retrieval import BLOCK_ROWS, rank_blockwise, recall_metrics
from vlmeval_ext.errors import ExtError
from vlmeval_ext.prepare import rococo as P


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
        raise ValueError(f'{name}: row {int(zero[0])} is an all-zero embedding ({zero.size} such rows); cosine '
                         'similarity is undefined')
    return emb / norms


def score_embeddings(ann, image_emb, text_emb, direction: str, normalise: bool = True, block_rows: int = BLOCK_ROWS,
                     names: tuple[str, str] = ('image embeddings', 'text embeddings')) -> dict:
    """i2t: images query every caption of the file, false = top-1 caption adversarial; t2i: clean captions query
    originals + mixed images, false = top-1 image mixed."""
    if direction == 't2i' and ann.has_adversarial:
        raise ValueError(f'{ann.path}: text-to-image uses the clean annotation file; this one has adversarial captions')
    n_images = ann.n_images if direction == 'i2t' else 2 * ann.n_images
    image_emb = check_embeddings(image_emb, names[0], n_images)
    text_emb = check_embeddings(text_emb, names[1], ann.n_texts, image_emb.shape[1])
    if normalise:
        image_emb, text_emb = l2_normalise(image_emb, names[0]), l2_normalise(text_emb, names[1])
    else:
        image_emb, text_emb = image_emb.astype(np.float32), text_emb.astype(np.float32)
    if direction == 'i2t':
        rank, _, top = rank_blockwise(image_emb, text_emb, P.i2t_positives(ann), block_rows=block_rows)
        return recall_metrics(rank, ~ann.is_ground_truth[top[:, 0]])
    rank, _, top = rank_blockwise(text_emb, image_emb, P.t2i_positives(ann), block_rows=block_rows)
    return recall_metrics(rank, top[:, 0] >= ann.n_images)


# ------------------------------------------------------------------------------------------------------ cache
def _slug(text: str, n: int = 40) -> str:
    digest = hashlib.sha1(text.encode('utf-8')).hexdigest()[:12]
    return f'{re.sub(r"[^A-Za-z0-9._-]+", "_", text)[-n:]}-{digest}'


class EmbeddingCache:
    """<root>/<model>/<file>/<kind>/part-*.npz, each part holding item keys and their rows; resumable by item."""

    def __init__(self, root: str | Path, model: str, file: str, kind: str):
        self.dir = Path(root) / _slug(model) / _slug(file) / kind

    def load(self) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for part in sorted(self.dir.glob('part-*.npz')):
            with np.load(part, allow_pickle=False) as z:
                keys, rows = z['keys'], z['emb']
                if len(keys) != len(rows):
                    raise ValueError(f'{part}: {len(keys)} keys but {len(rows)} rows; delete the file')
                found.update(zip(keys.tolist(), rows))
        return found

    def save(self, keys: Sequence[str], rows: np.ndarray) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        n = len(list(self.dir.glob('part-*.npz')))
        path = self.dir / f'part-{n:05d}.npz'
        tmp = path.with_suffix('.tmp.npz')
        np.savez(tmp, keys=np.asarray(list(keys), dtype=str), emb=rows)
        os.replace(tmp, path)
        return path


def item_key_for_image(path: str | Path) -> str:
    """Images are keyed by path, size and mtime so an edited file is re-embedded."""
    st = os.stat(path)
    return f'{path}|{st.st_size}|{int(st.st_mtime_ns)}'


# ---------------------------------------------------------------------------------------------- distribution
def dist_info() -> tuple[int, int]:
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed_from_env() -> bool:
    """Under torchrun (WORLD_SIZE > 1) join the process group: nccl on GPU, gloo on CPU."""
    import torch
    import torch.distributed as dist
    if int(os.environ.get('WORLD_SIZE', '1')) <= 1 or dist.is_initialized():
        return dist.is_initialized()
    dist.init_process_group(backend='nccl' if torch.cuda.is_available() else 'gloo')
    return True


def batches_for_rank(n_items: int, batch_size: int, rank: int, world: int) -> list[tuple[int, int]]:
    starts = range(0, n_items, batch_size)
    return [(s, min(s + batch_size, n_items)) for b, s in enumerate(starts) if b % world == rank]


def embed_items(keys: Sequence[str], load: Callable[[int], object], embed: Callable[[list], np.ndarray],
                cache: EmbeddingCache | None = None, batch_size: int = 64, progress: bool = True,
                desc: str = 'embed') -> np.ndarray:
    """Embed items (keyed for the cache; `load(i)` gives the model input) with cache reuse and rank sharding."""
    rank, world = dist_info()
    cached = cache.load() if cache is not None else {}
    todo = [i for i, k in enumerate(keys) if k not in cached]
    mine = batches_for_rank(len(todo), batch_size, rank, world)
    iterator = mine
    if progress and rank == 0:
        from tqdm import tqdm
        iterator = tqdm(mine, desc=f'{desc} (rank 0 of {world})', unit='batch')
    computed = {}
    for s, e in iterator:
        rows = embed([load(todo[j]) for j in range(s, e)])
        if rows.shape[0] != e - s or not np.isfinite(rows).all():
            raise ValueError(f'{desc}: model returned {rows.shape} / non-finite rows for items '
                             f'{todo[s]}..{todo[e - 1]}')
        computed[s] = rows
    if world > 1:
        import torch.distributed as dist
        gathered = [None] * world
        dist.all_gather_object(gathered, computed)
        computed = {s: r for part in gathered for s, r in part.items()}
    new = np.concatenate([computed[s] for s in sorted(computed)]) if computed else None
    if new is not None and cache is not None and rank == 0:
        cache.save([keys[i] for i in todo], new)
    if world > 1:
        import torch.distributed as dist
        dist.barrier()
    dim = new.shape[1] if new is not None else next(iter(cached.values())).shape[0]
    out = np.empty((len(keys), dim), dtype=np.float32)
    fresh = dict(zip(todo, new)) if new is not None else {}
    for i, k in enumerate(keys):
        out[i] = fresh[i] if i in fresh else cached[k]
    return out


def embed_texts(embedder, texts: Sequence[str], cache_root: str | Path | None, file_key: str,
                batch_size: int = 128, progress: bool = True) -> np.ndarray:
    cache = EmbeddingCache(cache_root, embedder.name, file_key, 'text') if cache_root else None
    return embed_items(list(texts), lambda i: texts[i], embedder.embed_texts, cache, batch_size, progress,
                       desc=f'texts {file_key}')


def embed_images(embedder, paths: Sequence[str | Path], cache_root: str | Path | None, file_key: str,
                 batch_size: int = 64, progress: bool = True) -> np.ndarray:
    from PIL import Image

    def load(i):
        with Image.open(paths[i]) as im:
            return im.convert('RGB')

    missing = [str(p) for p in paths if not Path(p).is_file()]
    if missing:
        raise FileNotFoundError(f'{len(missing)} gallery images missing; first: {missing[0]}')
    cache = EmbeddingCache(cache_root, embedder.name, file_key, 'image') if cache_root else None
    keys = [item_key_for_image(p) for p in paths]
    return embed_items(keys, load, embedder.embed_images, cache, batch_size, progress, desc=f'images {file_key}')


def load_embedder(spec: str, device: str = 'cpu'):
    """hf-clip:<name|path>, open_clip:<arch>[/<tag>], hf-blip:<name|path> (the kit model's backends), or
    smoke-hash:<dim> (the weight-free smoke test)."""
    backend, sep, target = spec.partition(':')
    if backend == 'smoke-hash' and sep:
        from vlmeval_ext.offline.models import SmokeHashEmbedder
        return SmokeHashEmbedder(int(target))
    from vlmeval_ext.vlm.rococo_embedding import RoCOCOEmbedding
    if not sep or backend not in RoCOCOEmbedding.BACKENDS or not target:
        raise ValueError(f'model spec {spec!r}: expected one of hf-clip:<name|path>, open_clip:<arch>/<tag>, '
                         'hf-blip:<name|path>, smoke-hash:<dim>')
    return RoCOCOEmbedding.BACKENDS[backend](target, device)


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ExtError(f'cannot read embeddings {path}: {err}') from err


def _coco_root(arg: str | None) -> Path:
    root = arg or os.environ.get('COCO_ROOT')
    if not root:
        raise ExtError('give --coco-root DIR or set COCO_ROOT (the folder holding val2014/)')
    if not Path(root).is_dir():
        raise ExtError(f'COCO root {root} is not a directory')
    return Path(root)


def cmd_score(args) -> dict:
    ann = P.load_annotation(args.ann)
    image_emb, text_emb = _load_npy(args.image_emb), _load_npy(args.text_emb)
    try:
        result = score_embeddings(ann, image_emb, text_emb, args.direction, normalise=not args.no_normalise,
                                  block_rows=args.block_rows, names=(args.image_emb, args.text_emb))
    except ValueError as err:
        raise ExtError(f'{err}') from err
    print(f'{args.direction} on {args.ann}: {ann.n_images} images, {ann.n_texts} captions', file=sys.stderr)
    return result


def cmd_gallery(args) -> dict:
    ann = P.load_annotation(args.ann)
    if args.direction == 'i2t':
        images, texts = P.i2t_gallery(ann)
    else:
        images, texts = P.t2i_gallery(ann, args.mixed_dir)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / 'texts.jsonl', 'w', encoding='utf-8') as f:
        for t, text in enumerate(texts):
            f.write(json.dumps({'row': t, 'text': text, 'image_row': int(ann.text_image[t]),
                                'ground_truth': bool(ann.is_ground_truth[t])}) + '\n')
    with open(out / 'images.jsonl', 'w', encoding='utf-8') as f:
        for i, image in enumerate(images):
            f.write(json.dumps({'row': i, 'image': image, 'mixed': i >= ann.n_images}) + '\n')
    return {'direction': args.direction, 'n_images': len(images), 'n_texts': len(texts),
            'texts': str(out / 'texts.jsonl'), 'images': str(out / 'images.jsonl')}


def cmd_make_mixed(args) -> dict:
    from vlmeval_ext.prepare.rococo_mixed import make_mixed
    root = _coco_root(args.coco_root)
    ann = P.load_annotation(args.ann)
    if ann.has_adversarial:
        raise ExtError(f'{args.ann}: mixed images are made from the clean file coco_karpathy_test.json')
    out = Path(args.out) if args.out else root / f'{args.method}_{args.lam}_seed{args.seed}'
    written = make_mixed(ann.images, root, out, args.method, args.seed, lam=args.lam)
    return {'method': args.method, 'seed': args.seed, 'lam': args.lam, 'written': len(written), 'out': str(out)}


def cmd_embed(args) -> dict:
    init_distributed_from_env()
    rank, _ = dist_info()
    ann = P.load_annotation(args.ann)
    embedder = load_embedder(args.model, device=args.device)
    file_key = Path(args.ann).name
    out = Path(args.out)
    result = {'model': args.model, 'ann': args.ann}
    if args.direction == 'i2t':
        root = _coco_root(args.coco_root)
        images = [root / p for p in ann.images]
    else:
        root = _coco_root(args.coco_root)
        images = [root / p for p in P.t2i_gallery(ann, args.mixed_dir)[0]]
    img = embed_images(embedder, images, args.cache_dir, file_key, batch_size=args.batch_size)
    txt = embed_texts(embedder, ann.texts, args.cache_dir, file_key, batch_size=args.batch_size)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / 'image_emb.npy', img)
        np.save(out / 'text_emb.npy', txt)
        result.update(image_emb=str(out / 'image_emb.npy'), text_emb=str(out / 'text_emb.npy'))
        result.update(score_embeddings(ann, img, txt, args.direction))
    return result


def cmd_prepare(args) -> dict:
    root = P.resolve_coco_root(args.coco_root, args.ann_dir)
    out_dir = Path(args.out_dir or os.environ.get('LMUData') or Path.home() / 'LMUData')
    frame = P.frame_for(args.name, args.ann_dir, root, args.mixed_root, lazy_images=True)
    path = P.write_tsv_streaming(frame, out_dir / f'{args.name}.tsv')
    return {'name': args.name, 'tsv': path, 'rows': len(frame), 'md5': open(f'{path}.md5').read().strip()}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog='vlmeval-ext rococo', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='command', required=True)

    s = sub.add_parser('score', help='score precomputed embeddings (.npy)')
    s.add_argument('--direction', choices=['i2t', 't2i'], required=True)
    s.add_argument('--ann', required=True, help='annotation JSON (attack file for i2t, the clean file for t2i)')
    s.add_argument('--image-emb', required=True, help='i2t: images in annotation order; t2i: originals then mixed')
    s.add_argument('--text-emb', required=True, help='every caption of --ann in file order')
    s.add_argument('--no-normalise', action='store_true', help='rank by raw dot product instead of cosine')
    s.add_argument('--block-rows', type=int, default=BLOCK_ROWS, help='query rows scored per block (memory bound)')
    s.set_defaults(func=cmd_score)

    g = sub.add_parser('gallery', help='export the normalised texts and image list in row order')
    g.add_argument('--ann', required=True)
    g.add_argument('--direction', choices=['i2t', 't2i'], default='i2t')
    g.add_argument('--mixed-dir', default='mix_0.9', help='t2i: folder of the mixed images, relative to the root')
    g.add_argument('--out', default='rococo_gallery')
    g.set_defaults(func=cmd_gallery)

    m = sub.add_parser('make-mixed', help='write the official-style mixed images for one seed')
    m.add_argument('--coco-root', default=None, help='folder holding val2014/ (default: $COCO_ROOT)')
    m.add_argument('--ann', required=True, help='the clean coco_karpathy_test.json')
    m.add_argument('--method', choices=['mix', 'patch'], default='mix')
    m.add_argument('--seed', type=int, default=1, help='the paper averages seeds 1, 10, 100')
    m.add_argument('--lam', type=float, default=0.9)
    m.add_argument('--out', default=None, help='default: <coco-root>/<method>_<lam>_seed<seed>')
    m.set_defaults(func=cmd_make_mixed)

    e = sub.add_parser('embed', help='embed a gallery with a model of this package, then score it')
    e.add_argument('--model', required=True, help='hf-clip:<name|path>, open_clip:<arch>/<tag>, hf-blip:<name|path>')
    e.add_argument('--ann', required=True)
    e.add_argument('--direction', choices=['i2t', 't2i'], default='i2t')
    e.add_argument('--coco-root', default=None)
    e.add_argument('--mixed-dir', default='mix_0.9_seed1', help='t2i: mixed images folder relative to the root')
    e.add_argument('--cache-dir', default=os.path.join(os.path.expanduser('~'), '.cache', 'vlmeval_ext', 'rococo'))
    e.add_argument('--batch-size', type=int, default=64)
    e.add_argument('--device', default='cpu')
    e.add_argument('--out', default='rococo_embeddings')
    e.set_defaults(func=cmd_embed)

    p = sub.add_parser('prepare', help='build a RoCOCO kit TSV (MCQ, I2T or T2I) under $LMUData')
    p.add_argument('name', help='RoCOCO-MCQ-<attack>, RoCOCO-I2T-<clean|attack>, RoCOCO-T2I-<mix|patch>')
    p.add_argument('--ann-dir', required=True, help='folder holding the official annotation JSONs')
    p.add_argument('--coco-root', default=None, help='folder holding val2014/ (default: $COCO_ROOT)')
    p.add_argument('--mixed-root', default=None, help='T2I: where <method>_0.9_seed<S>/ live or are written '
                                                      '(default: the COCO root)')
    p.add_argument('--out-dir', default=None, help='default: $LMUData, else ~/LMUData')
    p.set_defaults(func=cmd_prepare)

    d = sub.add_parser('demo-gallery', help='write the tiny demo gallery (real annotations, stand-in pictures)')
    d.add_argument('out_dir')
    d.set_defaults(func=cmd_demo_gallery)
    return ap


def cmd_demo_gallery(args) -> dict:
    from vlmeval_ext.prepare.demos import write_gallery
    ann_dir, coco = write_gallery(args.out_dir)
    return {'annotations': str(ann_dir), 'coco_root': str(coco)}


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.func(args)
    except (ExtError, ValueError, FileNotFoundError) as err:
        from vlmeval_ext.errors import report
        return report(err)
    print(json.dumps(result))
    return 0


if __name__ == '__main__':
    sys.exit(main())
