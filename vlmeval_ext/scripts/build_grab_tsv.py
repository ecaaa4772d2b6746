"""Build GRAB.tsv, VLMEvalKit's TSV of GRAB (Roberts et al. 2024), from the official release.

The release (github.com/jonathan-roberts1/GRAB, MIT licence) is `data/grab.json`, an object keyed
"0".."2169", and `images.zip`, one PNG per question. Unzip the images beside grab.json and run

    python scripts/build_grab_tsv.py --release DIR --out GRAB.tsv

Each row holds index (the pid), pid, question, answer, task, category, complexity and the plot as
a base64 PNG. An RGBA plot is composited onto white, a 16-bit grey one is scaled to 8 bits, and
the long side is capped at 2048 px (LANCZOS, never upscaled), losslessly (PNG, zlib level 6). The
script prints the TSV's md5, the `DATASET_MD5` of vlmeval/dataset/grab.py.
"""
import argparse
import base64
import csv
import io
import json
import os
import os.path as osp

import numpy as np
from PIL import Image

COLUMNS = ['index', 'pid', 'question', 'answer', 'task', 'category', 'complexity', 'image']
BACKGROUND = (255, 255, 255)
MAX_LONG_SIDE = 2048
# Every zlib level is lossless; Pillow's default keeps the TSV (the kit holds it in memory) small.
PNG_COMPRESS_LEVEL = 6
SIXTEEN_BIT_MODES = ('I;16', 'I;16L', 'I;16B', 'I;16N', 'I')


def to_8bit(image):
    """A 16-bit grey plot (mode I;16*, or I as 16-bit PNGs open) as 8-bit L, scaled (v / 257):
    Pillow's own convert clips every value above 255, which turns such a plot all white."""
    if image.mode not in SIXTEEN_BIT_MODES:
        return image
    values = np.asarray(image).astype(np.float64)
    return Image.fromarray(np.rint(np.clip(values, 0, 65535) / 257).astype(np.uint8), mode='L')


def prepare_image(image, max_side=MAX_LONG_SIDE):
    """RGB copy of a plot: alpha composited onto the background, long side capped at max_side
    (0: kept). Pasting through the alpha gives the pixels of `alpha_composite` + `convert('RGB')`
    on an opaque background, with one full-size copy instead of three."""
    image = to_8bit(image)
    if image.mode in ('RGBA', 'LA') or (image.mode == 'P' and 'transparency' in image.info):
        rgba = image if image.mode == 'RGBA' else image.convert('RGBA')
        canvas = Image.new('RGB', rgba.size, BACKGROUND)
        canvas.paste(rgba, mask=rgba)
        image = canvas
        del rgba
    elif image.mode != 'RGB':
        image = image.convert('RGB')
    if max_side and max(image.size) > max_side:
        scale = max_side / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.LANCZOS)
    return image


def encode_image(image, max_side=MAX_LONG_SIDE, compress_level=PNG_COMPRESS_LEVEL):
    """Base64 PNG of the prepared plot (lossless: thin lines and tick labels must survive)."""
    buffer = io.BytesIO()
    prepare_image(image, max_side).save(buffer, format='PNG', optimize=False,
                                        compress_level=compress_level)
    return base64.b64encode(buffer.getvalue()).decode('ascii')


def tsv_row(record, image):
    """One TSV row of a grab.json record and its encoded plot; the index is the pid."""
    return {'index': record['pid'], **{c: record[c] for c in COLUMNS[1:-1]}, 'image': image}


def write_rows(rows, f):
    """The rows, tab-separated in COLUMNS order, to an open text file (newline=''); their count."""
    writer = csv.DictWriter(f, fieldnames=COLUMNS, delimiter='\t', quoting=csv.QUOTE_MINIMAL)
    writer.writeheader()
    count = 0
    for row in rows:
        writer.writerow(row)
        count += 1
    return count


def release_records(release):
    """grab.json's records in key order ("0", "1", ..., as numbers)."""
    with open(osp.join(release, 'grab.json'), encoding='utf-8') as f:
        raw = json.load(f)
    return [raw[key] for key in sorted(raw, key=int)]


def build(release, out, max_side=MAX_LONG_SIDE):
    """GRAB.tsv from the release folder."""
    def rows():
        for record in release_records(release):
            with Image.open(osp.join(release, record['image'])) as image:
                image.load()
                yield tsv_row(record, encode_image(image, max_side))
    tmp = out + '.part'
    with open(tmp, 'w', encoding='utf-8', newline='') as f:
        count = write_rows(rows(), f)
    os.replace(tmp, out)
    print(f'wrote {count} GRAB questions to {out}')


def main(argv=None):
    parser = argparse.ArgumentParser(description='Build GRAB.tsv from the official release.')
    parser.add_argument('--release', required=True,
                        help='folder with grab.json and the unzipped images it names')
    parser.add_argument('--out', default='GRAB.tsv', help='the TSV to write (default: GRAB.tsv)')
    args = parser.parse_args(argv)
    from vlmeval.smp import md5    # the kit's, as DATASET_MD5 is checked
    build(args.release, args.out)
    print(f'md5 {md5(args.out)}')


if __name__ == '__main__':
    main()
