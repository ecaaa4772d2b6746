"""A tiny RoCOCO gallery for the demo and smoke tests: the first 8 entries of each official annotation file
(github.com/pseulki/rococo `annotations/`, MIT, shipped in rococo/demo/gallery/) and a generated stand-in picture
for each of their COCO images (no COCO image may ship).

    python -m vlmeval_ext.rococo.demo_gallery OUT_DIR

writes OUT_DIR/annotations/*.json and OUT_DIR/coco/val2014/*.jpg, and prints the two folders; then

    vlmeval-ext rococo prepare RoCOCO-I2T-same_concept --ann-dir OUT_DIR/annotations --coco-root OUT_DIR/coco

builds a kit TSV from them as from the real release. Retrieval on stand-in pictures says nothing about a model:
the demo runs it with the RoCOCO-Smoke-Hash smoke-test backend, to check the pipeline.
"""
from __future__ import annotations

import argparse
import io
import json
import shutil
from importlib import resources
from pathlib import Path

GALLERY = 'rococo/demo/gallery'


def gallery_files() -> list[Path]:
    root = Path(str(resources.files('vlmeval_ext'))) / GALLERY
    return sorted(root.glob('*.json'))


def write_gallery(out_dir: str | Path) -> tuple[Path, Path]:
    """(annotation folder, COCO root) of the tiny gallery under out_dir (existing files are kept)."""
    from PIL import Image

    from vlmeval_ext.rococo import data as D
    out = Path(out_dir)
    ann_dir, coco = out / 'annotations', out / 'coco'
    ann_dir.mkdir(parents=True, exist_ok=True)
    images: list[str] = []
    for path in gallery_files():
        shutil.copyfile(path, ann_dir / path.name)
        images += [entry['image'] for entry in json.loads(path.read_text(encoding='utf-8'))]
    for k, rel in enumerate(dict.fromkeys(images)):
        target = coco / rel
        if target.is_file():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with Image.open(io.BytesIO(D.demo_image_png(Path(rel).name, k))) as im:
            im.convert('RGB').save(target, format='JPEG', quality=90)
    return ann_dir, coco


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog='python -m vlmeval_ext.rococo.demo_gallery', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('out_dir')
    args = ap.parse_args(argv)
    ann_dir, coco = write_gallery(args.out_dir)
    print(f'annotations: {ann_dir}\ncoco root: {coco}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
