"""RoCOCO sources in the official formats for tests: annotation files holding real entries (tests/fixtures/rococo)
and a generated COCO root for their images (no COCO image can ship), and embedding predictions for a TSV."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
from PIL import Image

from vlmeval_ext.dataset.utils.rococo_retrieval import encode_vector
from vlmeval_ext.prepare.rococo import ANNOTATION_FILES

ROWS = [0, 1, 2, 3, 83]          # entry 83 is the first 11-caption entry (6 ground truth)


def write_sources(fixtures_dir, tmp_path, rows=ROWS):
    """Official-format annotation files holding real entries, and a generated COCO root for their images."""
    ann_dir, coco = tmp_path / 'annotations', tmp_path / 'coco'
    ann_dir.mkdir()
    for key in ('clean', 'same_concept'):
        entries = json.loads((fixtures_dir / 'rococo' / ANNOTATION_FILES[key]).read_text())
        (ann_dir / ANNOTATION_FILES[key]).write_text(json.dumps([entries[i] for i in rows]))
    images = [e['image'] for e in json.loads((ann_dir / 'coco_karpathy_test.json').read_text())]
    for k, rel in enumerate(images):
        (coco / rel).parent.mkdir(parents=True, exist_ok=True)
        arr = np.zeros((48 + 4 * k, 64, 3), np.uint8)
        arr[..., k % 3] = 50 + 40 * k
        arr[8:30, 4 * k:20 + 4 * k] = 255
        Image.fromarray(arr).save(coco / rel, quality=90)
    return ann_dir, coco


def fake_predictions(frame: pd.DataFrame, dim: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((len(frame), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    preds = frame.drop(columns=['image']).copy()
    preds['index'] = [int(i) for i in preds['index']]          # as load_predictions reads the kit's index
    preds['prediction'] = [encode_vector(v) for v in vectors]
    return preds, vectors
