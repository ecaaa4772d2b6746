"""Build ReMI.tsv, VLMEvalKit's TSV of ReMI (Kazemi et al. 2024), from the official release.

The release (huggingface.co/datasets/mehrankazemi/ReMI) is the test split as parquet: columns
question, label, task and image_1 .. image_6, each slot an image ({'bytes', 'path'} struct or raw
bytes) or null. Download it (`test.parquet`, or shards under `test/`) and run

    python scripts/build_remi_tsv.py --release DIR --out ReMI.tsv

Each row holds index (the position in the split), question, answer (the label), task, the images
as a JSON list of base64 strings in slot order (the original bytes, not re-encoded; the list is
also the Python literal the kit's `toliststr` reads) and image_count. The script prints the TSV's
md5, the `DATASET_MD5` of vlmeval/dataset/remi.py.
"""
import argparse
import base64
import csv
import json
import os
from pathlib import Path

import pandas as pd

COLUMNS = ['index', 'question', 'answer', 'task', 'image', 'image_count']
IMAGE_SLOTS = [f'image_{i}' for i in range(1, 7)]


def split_files(release, split='test'):
    """The split's parquet files in order: <split>.parquet, <split>-0000x-of-0000y.parquet or
    <split>/*.parquet, anywhere under the release folder."""
    root = Path(release)
    files = sorted(p for p in root.rglob('*.parquet')
                   if p.stem == split or p.stem.startswith(f'{split}-') or p.parent.name == split)
    if not files:
        raise FileNotFoundError(f'no {split!r} parquet file under {root}')
    return files


def slot_bytes(cell):
    """The image bytes of one slot, None for an unused one."""
    if isinstance(cell, dict):
        cell = cell.get('bytes')
    if cell is None or (isinstance(cell, float) and pd.isna(cell)):
        return None
    return bytes(cell) or None


def encode_images(images):
    """The kit's multi-image cell: a JSON list of base64 strings."""
    return json.dumps([base64.b64encode(b).decode('ascii') for b in images])


def tsv_row(index, question, label, task, images):
    return {'index': index, 'question': str(question), 'answer': str(label), 'task': str(task),
            'image': encode_images(images), 'image_count': len(images)}


def write_tsv(frame, out):
    """Tab-separated, every cell quoted, written through <out>.partial."""
    tmp = str(out) + '.partial'
    frame.to_csv(tmp, sep='\t', index=False, encoding='utf-8', quoting=csv.QUOTE_ALL)
    os.replace(tmp, out)


def build(release, out):
    """ReMI.tsv from the release folder."""
    rows, offset = [], 0
    for path in split_files(release):
        table = pd.read_parquet(path)
        slots = [c for c in IMAGE_SLOTS if c in table.columns]
        for row_no, record in enumerate(table.to_dict('records')):
            images = [b for b in (slot_bytes(record[c]) for c in slots) if b is not None]
            rows.append(tsv_row(offset + row_no, record['question'], record['label'],
                                record['task'], images))
        offset += len(table)
    write_tsv(pd.DataFrame(rows, columns=COLUMNS), out)
    print(f'wrote {len(rows)} ReMI questions to {out}')


def main(argv=None):
    parser = argparse.ArgumentParser(description='Build ReMI.tsv from the official release.')
    parser.add_argument('--release', required=True,
                        help="folder with the test split's parquet files")
    parser.add_argument('--out', default='ReMI.tsv', help='the TSV to write (default: ReMI.tsv)')
    args = parser.parse_args(argv)
    from vlmeval.smp import md5    # the kit's, as DATASET_MD5 is checked
    build(args.release, args.out)
    print(f'md5 {md5(args.out)}')


if __name__ == '__main__':
    main()
