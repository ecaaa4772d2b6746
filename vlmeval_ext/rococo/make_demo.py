"""Build the embedded RoCOCO-MCQ-same_concept_DEMO split: real same_concept.json entries, generated images.

No COCO image may ship, so each item shows a generated stand-in picture (colour blocks, the COCO file's id): the
demo exercises the pipeline (prompt, letters, twin accounting), not the benchmark's difficulty.
Items: the first 23 images of the file and its first 11-caption entry (6 ground truth + 5 adversarial).

Usage: python -m vlmeval_ext.rococo.make_demo path/to/same_concept.json [--out .../RoCOCO-MCQ-same_concept_DEMO.tsv]
"""
from __future__ import annotations

import argparse
import base64
from pathlib import Path

from vlmeval_ext.core.io import file_md5
from vlmeval_ext.rococo import data as D
from vlmeval_ext.rococo import protocol as P

DEMO_NAME = 'RoCOCO-MCQ-same_concept_DEMO'
DEMO_TSV = Path(__file__).resolve().parent / 'demo' / f'{DEMO_NAME}.tsv'
N_FIRST = 23


def demo_rows(ann: P.Annotation) -> list[int]:
    eleven = next(i for i, g in enumerate(ann.ground_truth) if len(g) == 6)
    return list(range(N_FIRST)) + ([eleven] if eleven >= N_FIRST else [])


def build(ann_path: str | Path, out: str | Path = DEMO_TSV) -> str:
    ann = P.load_annotation(ann_path)
    frame = D.mcq_frame(ann, 'same_concept',
                        lambda i: base64.b64encode(D.demo_image_png(ann.images[i], i)).decode('ascii'),
                        rows=demo_rows(ann))
    frame['coco_image'] = 'stand-in for ' + frame['coco_image']
    path = D.write_tsv(frame, out)
    Path(f'{path}.md5').unlink()              # the md5 lives in RoCOCOMCQ.DATASET_MD5 for the shipped file
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('ann', help='same_concept.json from github.com/pseulki/rococo annotations/')
    ap.add_argument('--out', default=str(DEMO_TSV))
    args = ap.parse_args(argv)
    path = build(args.ann, args.out)
    print(f'{path}: md5 {file_md5(path)}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
