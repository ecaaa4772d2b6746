"""Build R-Bench-Full.tsv, VLMEvalKit's TSV of R-Bench (Li et al. 2024), from the official release.

The release (huggingface.co/datasets/lcysyzxdxc/R-Bench, All.parquet; the same rows on ModelScope)
holds one row per item: name, question, choice, answer, type (MCQ / VQA / CAP), distortion (1-33),
strength (1-3) and two images, ref_image and dis_image. Download All.parquet (or the snapshot's
parquet files) and run

    python scripts/build_rbench_full_tsv.py --release All.parquet --out R-Bench-Full.tsv

Each item becomes two rows sharing a pair_id: the reference image (variant ref, index 2k) then the
distorted one (variant dis, index 2k+1), each image its original bytes in base64. The script prints
the TSV's md5, the `DATASET_MD5` of vlmeval/dataset/rbench_full.py.
"""
import argparse
import base64
import csv
import math
import os
from pathlib import Path

COLUMNS = ['index', 'pair_id', 'variant', 'name', 'question', 'choice', 'answer', 'type',
           'distortion', 'strength', 'image']
TEXT_FIELDS = ('name', 'question', 'choice', 'answer', 'type')


def cell(value):
    """A text field as the TSV holds it: an empty cell for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ''
    return str(value)


def parquet_files(release):
    """The release's parquet files: the file given, or every one under the folder given (in name
    order; the Hub's hidden cache folders are not data)."""
    path = Path(release)
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob('*.parquet')
                  if not any(part.startswith('.') for part in p.relative_to(path).parts))


def parquet_rows(path, batch_rows=32):
    """The rows of a parquet file, one row group at a time (memory holds one group's images)."""
    import pyarrow.parquet as pq  # only to read the release: the rest of the script needs none
    with pq.ParquetFile(path) as parquet:
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group)
            for batch in table.to_batches(max_chunksize=batch_rows):
                yield from batch.to_pylist()
            del table


def tsv_rows(records):
    """(item, reference image bytes, distorted image bytes) per item -> the item's two rows."""
    for pair_id, (item, ref_bytes, dis_bytes) in enumerate(records):
        for offset, (variant, data) in enumerate((('ref', ref_bytes), ('dis', dis_bytes))):
            yield {'index': 2 * pair_id + offset, 'pair_id': pair_id, 'variant': variant,
                   **{k: item[k] for k in COLUMNS[3:-1]},
                   'image': base64.b64encode(data).decode('ascii')}


def write_rows(rows, f):
    """The rows, tab-separated in COLUMNS order, to an open text file (newline=''); their count."""
    writer = csv.DictWriter(f, fieldnames=COLUMNS, delimiter='\t', quoting=csv.QUOTE_MINIMAL,
                            lineterminator='\n')
    writer.writeheader()
    count = 0
    for row in rows:
        writer.writerow(row)
        count += 1
    return count


def release_records(release):
    """(item, ref bytes, dis bytes) of every release row, in order."""
    for path in parquet_files(release):
        for raw in parquet_rows(path):
            item = {k: cell(raw[k]) for k in TEXT_FIELDS}
            item.update(distortion=int(float(raw['distortion'])),
                        strength=int(float(raw['strength'])))
            images = [raw[k]['bytes'] if isinstance(raw[k], dict) else raw[k]
                      for k in ('ref_image', 'dis_image')]
            yield (item, *map(bytes, images))


def build(release, out):
    """R-Bench-Full.tsv from the release."""
    tmp = str(out) + '.part'
    with open(tmp, 'w', encoding='utf-8', newline='') as f:
        count = write_rows(tsv_rows(release_records(release)), f)
    os.replace(tmp, out)
    print(f'wrote {count // 2} R-Bench items ({count} rows) to {out}')


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Build R-Bench-Full.tsv from the official release.')
    parser.add_argument('--release', required=True,
                        help='All.parquet, or a folder holding the release parquet files')
    parser.add_argument('--out', default='R-Bench-Full.tsv',
                        help='the TSV to write (default: R-Bench-Full.tsv)')
    args = parser.parse_args(argv)
    from vlmeval.smp import md5    # the kit's, as DATASET_MD5 is checked
    build(args.release, args.out)
    print(f'md5 {md5(args.out)}')


if __name__ == '__main__':
    main()
