"""Build the embedded R-Bench-Full demo split: real Ref_Release.csv items with small generated images.

No R-Bench images are available offline, so each demo item gets a reference image cut from one of
scikit-image's bundled photos and its distorted version made by our own corruption engine
(`vlmeval_ext.corrupt.distortions.corrupt`) with the item's official distortion id and strength. Questions,
choices, answers, distortion and strength are the real release's. The demo exercises the pipeline (both images
per item, the three judged scores, the robustness table), not the benchmark's difficulty: the images do not
show what the questions ask about.

Every pair gets a unique image width (WIDTH0 + pair_id), so tests can tell which item a request carries.

Usage: python -m vlmeval_ext.rbench.make_demo path/to/Ref_Release.csv [--out vlmeval_ext/rbench/demo/R-Bench-Full_DEMO.tsv]
"""
from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from vlmeval_ext.rbench.data import read_question_bank, write_tsv

DEMO_TSV = Path(__file__).resolve().parent / 'demo' / 'R-Bench-Full_DEMO.tsv'
PER_TASK = 8
WIDTH0, HEIGHT = 128, 104          # >= 100 px: the kit's API wrappers upscale smaller images
PHOTOS = ('astronaut', 'chelsea', 'coffee', 'rocket', 'immunohistochemistry', 'hubble_deep_field', 'colorwheel',
          'retina')
SEED = 2024
# md5 of the shipped demo TSV (RBenchFull.DATASET_MD5); rebuilding with the same inputs gives the same file
DEMO_MD5 = '965a45d85589a3720f607f1295f9b4b4'


def select_demo_items(bank: list[dict], per_task: int = PER_TASK) -> list[int]:
    """Release rows (0-based): per task, the first item of each of `per_task` distortion ids spread over the
    33 (every step represented), cycling strengths 1-3 so all nine task x strength cells are filled."""
    # one distortion per step and per group in the first seven (Blur, Wild, Noise, Compression, Spatial,
    # Luminance, Chrominance), then more for spare
    wanted_ids = [1, 7, 10, 16, 20, 25, 29, 3, 13, 18, 22, 27, 31, 5, 33, 8]
    chosen = []
    for task in ('MCQ', 'VQA', 'CAP'):
        picked = []
        for k, did in enumerate(wanted_ids):
            if len(picked) == per_task:
                break
            strength = k % 3 + 1
            rows = [i for i, it in enumerate(bank) if it['type'] == task and it['distortion'] == did]
            exact = [i for i in rows if bank[i]['strength'] == strength]
            if exact or rows:
                picked.append((exact or rows)[0])
        if len(picked) < per_task:
            raise ValueError(f'R-Bench demo: only {len(picked)} {task} items found for the chosen distortions')
        chosen.extend(picked)
    return chosen


def _jpeg(image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format='JPEG', quality=82)
    return buf.getvalue()


def demo_images(pair_id: int, distortion: int, strength: int) -> tuple[bytes, bytes]:
    """(reference JPEG, distorted JPEG) for one demo item: a crop of a bundled photo, then corrupt()."""
    import skimage.data
    from PIL import Image

    from vlmeval_ext.corrupt.distortions import corrupt
    photo = getattr(skimage.data, PHOTOS[pair_id % len(PHOTOS)])()
    image = Image.fromarray(photo[..., :3]).convert('RGB')
    width = WIDTH0 + pair_id
    # different crops of the same photo for items sharing it
    scale = max(width / image.width, HEIGHT / image.height) * (1.6 + 0.2 * (pair_id // len(PHOTOS)))
    image = image.resize((max(width, round(image.width * scale)), max(HEIGHT, round(image.height * scale))))
    left, top = (image.width - width) // 2, (image.height - HEIGHT) // 2
    ref = image.crop((left, top, left + width, top + HEIGHT))
    dis = corrupt(ref, distortion, strength, seed=SEED + pair_id)
    return _jpeg(ref), _jpeg(dis)


def demo_records(bank_csv: str | Path):
    bank = read_question_bank(bank_csv)
    for pair_id, row in enumerate(select_demo_items(bank)):
        item = dict(bank[row])
        ref, dis = demo_images(pair_id, item['distortion'], item['strength'])
        yield item, ref, dis


def build(bank_csv: str | Path, out: str | Path = DEMO_TSV) -> int:
    n = write_tsv(demo_records(bank_csv), out)
    size = Path(out).stat().st_size
    if size >= 1 << 20:
        raise ValueError(f'{out}: {size} bytes, the demo must stay under 1 MB')
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog='python -m vlmeval_ext.rbench.make_demo')
    ap.add_argument('bank_csv', help='the official Ref_Release.csv (latin-1)')
    ap.add_argument('--out', default=str(DEMO_TSV))
    args = ap.parse_args(argv)
    n = build(args.bank_csv, args.out)
    from vlmeval_ext.core.io import file_md5
    print(f'wrote {n} rows to {args.out} (md5 {file_md5(args.out)}; put it in RBenchFull.DATASET_MD5)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
