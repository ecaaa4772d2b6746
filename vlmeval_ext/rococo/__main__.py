"""`python -m vlmeval_ext.rococo score | gallery | make-mixed | embed | prepare`.

score      scores embeddings computed anywhere; prints the metrics JSON object as the LAST line of stdout.
gallery    exports the normalised texts and the image list in the row order `score` expects.
make-mixed writes the official-style mixed/patched images for one seed.
embed      computes (and caches) embeddings with a model of this package, in `score`'s row order.
prepare    builds the kit TSV of RoCOCO-MCQ-<attack>, RoCOCO-I2T-<file> or RoCOCO-T2I-<method> under $LMUData
           (what `vlmeval-ext prepare NAME --from ANN_DIR` does, with --coco-root / --mixed-root added).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from . import protocol as P


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise SystemExit(f'error: cannot read embeddings {path}: {err}') from err


def _coco_root(arg: str | None) -> Path:
    root = arg or os.environ.get('COCO_ROOT')
    if not root:
        raise SystemExit('error: give --coco-root DIR or set COCO_ROOT (the folder holding val2014/)')
    if not Path(root).is_dir():
        raise SystemExit(f'error: COCO root {root} is not a directory')
    return Path(root)


def cmd_score(args) -> dict:
    ann = P.load_annotation(args.ann)
    image_emb, text_emb = _load_npy(args.image_emb), _load_npy(args.text_emb)
    fn = P.score_i2t if args.direction == 'i2t' else P.score_t2i
    try:
        result = fn(ann, image_emb, text_emb, normalise=not args.no_normalise, block_rows=args.block_rows,
                    names=(args.image_emb, args.text_emb))
    except ValueError as err:
        raise SystemExit(f'error: {err}') from err
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
    from .mixed import make_mixed
    root = _coco_root(args.coco_root)
    ann = P.load_annotation(args.ann)
    if ann.has_adversarial:
        raise SystemExit(f'error: {args.ann}: mixed images are made from the clean file coco_karpathy_test.json')
    out = Path(args.out) if args.out else root / f'{args.method}_{args.lam}_seed{args.seed}'
    written = make_mixed(ann.images, root, out, args.method, args.seed, lam=args.lam)
    return {'method': args.method, 'seed': args.seed, 'lam': args.lam, 'written': len(written), 'out': str(out)}


def cmd_embed(args) -> dict:
    from . import embed as E
    E.init_distributed_from_env()
    rank, _ = E.dist_info()
    ann = P.load_annotation(args.ann)
    embedder = E.load_embedder(args.model, device=args.device)
    file_key = Path(args.ann).name
    out = Path(args.out)
    result = {'model': args.model, 'ann': args.ann}
    if args.direction == 'i2t':
        root = _coco_root(args.coco_root)
        images = [root / p for p in ann.images]
    else:
        root = _coco_root(args.coco_root)
        images = [root / p for p in P.t2i_gallery(ann, args.mixed_dir)[0]]
    img = E.embed_images(embedder, images, args.cache_dir, file_key, batch_size=args.batch_size)
    txt = E.embed_texts(embedder, ann.texts, args.cache_dir, file_key, batch_size=args.batch_size)
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / 'image_emb.npy', img)
        np.save(out / 'text_emb.npy', txt)
        result.update(image_emb=str(out / 'image_emb.npy'), text_emb=str(out / 'text_emb.npy'))
        result.update((P.score_i2t if args.direction == 'i2t' else P.score_t2i)(ann, img, txt))
    return result


def cmd_prepare(args) -> dict:
    from . import data as D
    root = D.resolve_coco_root(args.coco_root, args.ann_dir)
    out_dir = Path(args.out_dir or os.environ.get('LMUData') or Path.home() / 'LMUData')
    frame = D.frame_for(args.name, args.ann_dir, root, args.mixed_root, lazy_images=True)
    path = D.write_tsv_streaming(frame, out_dir / f'{args.name}.tsv')
    return {'name': args.name, 'tsv': path, 'rows': len(frame), 'md5': open(f'{path}.md5').read().strip()}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog='python -m vlmeval_ext.rococo', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='command', required=True)

    s = sub.add_parser('score', help='score precomputed embeddings (.npy)')
    s.add_argument('--direction', choices=['i2t', 't2i'], required=True)
    s.add_argument('--ann', required=True, help='annotation JSON (attack file for i2t, the clean file for t2i)')
    s.add_argument('--image-emb', required=True, help='i2t: images in annotation order; t2i: originals then mixed')
    s.add_argument('--text-emb', required=True, help='every caption of --ann in file order')
    s.add_argument('--no-normalise', action='store_true', help='rank by raw dot product instead of cosine')
    s.add_argument('--block-rows', type=int, default=P.BLOCK_ROWS, help='query rows scored per block (memory bound)')
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
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.func(args)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f'error: {err}') from err
    print(json.dumps(result))
    return 0


if __name__ == '__main__':
    sys.exit(main())
