"""The demo splits that ship in vlmeval_ext/demo/ (no official image may ship, so their images are generated), and
how each is rebuilt from the official questions. Each build is deterministic: the same inputs give the same
file (the shipped md5s are in the registry).

    python -m vlmeval_ext.prepare.demos grab grab.json          GRAB_DEMO: real rows, small generated plots
    python -m vlmeval_ext.prepare.demos rbench Ref_Release.csv   R-Bench-Full_DEMO: real items, photo crops
                                                                 distorted by the corruption engine
    python -m vlmeval_ext.prepare.demos remi                     ReMI_DEMO: one synthetic item per task
    python -m vlmeval_ext.prepare.demos rococo same_concept.json RoCOCO-MCQ-same_concept_DEMO
    python -m vlmeval_ext.prepare.demos gallery OUT_DIR          the tiny RoCOCO retrieval gallery

Each demo exercises the pipeline (prompts, scoring, reports), not the benchmark's difficulty.
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import math
import re
import shutil
import sys
from importlib import resources
from pathlib import Path

import pandas as pd

DEMO_DIR = Path(__file__).resolve().parents[1] / 'demo'


# ---------------------------------------------------------------------------------------------------- GRAB
GRAB_DEMO_TSV = DEMO_DIR / 'GRAB_DEMO.tsv'
FIGSIZE, DPI = (3.0, 2.25), 80         # 240x180 px: keeps the whole demo well under 1 MB


def select_demo_rows(records: list[dict], per_group: int = 1) -> list[dict]:
    """Every properties category once, and function/series/transform at complexity 0 and 9 per category."""
    chosen, seen = [], {}
    for record in records:
        complexity_bucket = record['complexity'] if record['task'] != 'properties' else 0
        if record['task'] != 'properties' and complexity_bucket not in (0, 9):
            continue
        group = (record['task'], record['category'], complexity_bucket)
        if seen.get(group, 0) < per_group:
            seen[group] = seen.get(group, 0) + 1
            chosen.append(record)
    # The rare answer forms must be present: intervals and equations.
    for form in (r'^\[', r'^y ='):
        if not any(re.match(form, r['answer']) for r in chosen):
            chosen.append(next(r for r in records if re.match(form, r['answer'])))
    return sorted(chosen, key=lambda r: r['pid'])


def _curve(record):
    """(xs, ys, faithful) for the plot of one record."""
    import numpy as np

    from vlmeval_ext.dataset.utils.grab import extract_equation, extract_interval

    xs = np.linspace(-10, 10, 400)
    answer, question = record['answer'], record['question']
    if answer.startswith('y'):
        kind, values = extract_equation(answer)
        if kind == 'sin':
            a, b, c, d = (float(v) for v in values)
            return xs, a * np.sin(b * xs + c) + d, True
        return xs, sum(float(coef) * xs ** power for power, coef in values.items()), True
    if answer.startswith('['):
        lo, hi = (float(v) for v in extract_interval(answer))   # f'(x) = 3(x - lo)(x - hi)
        xs = np.linspace(lo - 4, hi + 4, 400)                     # both stationary points well inside
        return xs, xs ** 3 - 1.5 * (lo + hi) * xs ** 2 + 3 * lo * hi * xs, True
    value = float(answer)
    if 'y-intercept' in question:
        return xs, 0.5 * xs + value, True
    if 'x-intercept' in question:
        return xs, 0.5 * (xs - value), True
    rng = np.random.default_rng(record['pid'])
    return xs, np.cumsum(rng.normal(0, 0.5, xs.size)) + value, False


def render_plot(record):
    """A small RGBA PNG plot (the official images are RGBA too), opened as a PIL image."""
    from PIL import Image

    from vlmeval_ext.records.plots import new_figure

    xs, ys, faithful = _curve(record)
    fig = new_figure(figsize=FIGSIZE, dpi=DPI)
    ax = fig.subplots()
    ax.plot(xs, ys, linewidth=1.2)
    ax.axhline(0, color='black', linewidth=0.6)
    ax.axvline(0, color='black', linewidth=0.6)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=6)
    if not faithful:
        ax.set_title(f'stand-in plot (pid {record["pid"]})', fontsize=7)
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', transparent=True)
    buffer.seek(0)
    return Image.open(buffer)


def build_grab(grab_json: str | Path, out_path: str | Path = GRAB_DEMO_TSV) -> Path:
    from vlmeval_ext.prepare import grab as data
    records = select_demo_rows(data.read_grab_json(grab_json))
    n = data.write_tsv(data.tsv_rows(records, render_plot, max_side=0, progress=False), out_path)
    print(f'wrote {n} demo questions to {out_path} ({Path(out_path).stat().st_size / 1024:.0f} KiB)')
    return Path(out_path)



# -------------------------------------------------------------------------------------------------- R-Bench
RBENCH_DEMO_TSV = DEMO_DIR / 'R-Bench-Full_DEMO.tsv'
PER_TASK = 8
WIDTH0, HEIGHT = 128, 104          # >= 100 px: the kit's API wrappers upscale smaller images
PHOTOS = ('astronaut', 'chelsea', 'coffee', 'rocket', 'immunohistochemistry', 'hubble_deep_field', 'colorwheel',
          'retina')
SEED = 2024


def select_rbench_items(bank: list[dict], per_task: int = PER_TASK) -> list[int]:
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

    from vlmeval_ext.distortions import corrupt
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


def rbench_records(bank_csv: str | Path):
    from vlmeval_ext.prepare.rbench import read_question_bank
    bank = read_question_bank(bank_csv)
    for pair_id, row in enumerate(select_rbench_items(bank)):
        item = dict(bank[row])
        ref, dis = demo_images(pair_id, item['distortion'], item['strength'])
        yield item, ref, dis


def build_rbench(bank_csv: str | Path, out: str | Path = RBENCH_DEMO_TSV) -> int:
    from vlmeval_ext.prepare.rbench import write_tsv
    n = write_tsv(rbench_records(bank_csv), out)
    size = Path(out).stat().st_size
    if size >= 1 << 20:
        raise ValueError(f'{out}: {size} bytes, the demo must stay under 1 MB')
    return n



# ----------------------------------------------------------------------------------------------------- ReMI
REMI_DEMO_TSV = DEMO_DIR / 'ReMI_DEMO.tsv'
REMI_IMAGE_SLOTS = [f'image_{i}' for i in range(1, 7)]


def card(text: str, size=(220, 120), color=(255, 255, 255)) -> bytes:
    """A PNG card with `text` written on a coloured background."""
    from PIL import Image, ImageDraw
    im = Image.new('RGB', size, color)
    ImageDraw.Draw(im).multiline_text((10, 10), text, fill=(0, 0, 0))
    buf = io.BytesIO()
    im.save(buf, format='PNG')
    return buf.getvalue()


def clock(hour: int, minute: int, size: int = 120) -> bytes:
    from PIL import Image, ImageDraw
    im = Image.new('RGB', (size, size), 'white')
    draw = ImageDraw.Draw(im)
    c, r = size / 2, size / 2 - 6
    draw.ellipse([c - r, c - r, c + r, c + r], outline='black', width=3)
    for angle, length, width in (((hour % 12 + minute / 60) * 30, 0.5 * r, 4), (minute * 6, 0.85 * r, 2)):
        rad = math.radians(angle - 90)
        draw.line([c, c, c + length * math.cos(rad), c + length * math.sin(rad)], fill='black', width=width)
    buf = io.BytesIO()
    im.save(buf, format='PNG')
    return buf.getvalue()


# One (question, label, images) per task; colours differ per image so their order can be checked.
PALETTE = [(255, 230, 230), (230, 255, 230), (230, 230, 255), (255, 255, 210), (230, 255, 255), (255, 230, 255)]


def _cards(*texts):
    # widths differ per slot so that a received request shows which image sits where
    return [card(t, size=(200 + 24 * i, 120), color=PALETTE[i % len(PALETTE)]) for i, t in enumerate(texts)]


def remi_items() -> list[dict]:
    return [
        dict(task='EmojiAlgebra', label='17',
             question='Compute the value of the expression in <image1> using the equations in <image2> <image3>.',
             images=_cards('2*A + B = ?', 'A = 5', 'B = A + 2')),
        dict(task='FuncRead', label='g',
             question='<image1> <image2> <image3> Which function, f, g or h, has the largest value at x = 2?',
             images=_cards('f(x) = x', 'g(x) = x^2 + 1', 'h(x) = 3')),
        dict(task='GeomShape', label='12.5',
             question='The triangle in <image1> has the height in <image3> and the base in <image2>. Find its area.',
             images=_cards('triangle', 'base = 5', 'height = 5')),
        dict(task='GeomCost', label='-40',
             question='Fencing costs the price in <image1> per metre; the perimeter is in <image2>. Refunds are '
                      'negative. What is the refund?',
             images=_cards('price = -2 per m', 'perimeter = 20 m')),
        dict(task='Collisions', label='1',
             question='Ball A moves as in <image1>, ball B as in <image2>. Will they collide?',
             images=_cards('A: x = t, y = 0', 'B: x = 4 - t, y = 0')),
        dict(task='Clocks', label='135',
             question='How many minutes passed between the time in <image1> and the time in <image2>?',
             images=[clock(2, 15, size=120), clock(4, 30, size=144)]),
        dict(task='Schedule', label='room b',
             question='Meetings in <image1>, rooms in <image2>, free slots in <image3> and <image4>. Which room '
                      'is free at 10:00?',
             images=_cards('meeting at 10:00', 'rooms: A, B', 'A busy 10:00', 'Room B free 10:00')),
        dict(task='Charts', label='(3, 4)',
             question='<image1><image2>Give the (x, y) point that appears in both charts.',
             images=_cards('points: (1,2) (3,4)', 'points: (3,4) (5,6)')),
        dict(task='CodeEdit', label='return a + b',
             question='The code in <image1> should print the output in <image2>. Which line fixes it?',
             images=_cards('def add(a, b):\n    return a - b', 'add(2, 3) -> 5')),
        dict(task='Isomorphism', label='1',
             question='Are the graphs in <image1> and <image2> isomorphic?',
             images=_cards('edges: 1-2 2-3 3-1', 'edges: a-b b-c c-a')),
        dict(task='Maps', label='north',
             question='Starting from the square in <image1>, follow the directions in <image2> and <image3>. '
                      'Which way are you facing?',
             images=_cards('start facing east', 'turn left', 'go straight')),
        dict(task='RefCoco', label='2, 4',
             question='Which images show the red object? <image1> <image2> <image3> <image4> <image5>',
             images=[card(f'{k}', size=(200 + 24 * k, 120), color=c) for k, c in
                     enumerate([(0, 0, 255), (255, 0, 0), (0, 255, 0), (255, 0, 0), (128, 128, 128)])]),
        dict(task='IQ', label='c',
             question='Which option completes the pattern in <image1>? a: <image2> b: <image3> c: <image4> '
                      'd: <image5> e: <image6>',
             images=_cards('1 2 3 ?', '7', '8', '4', '9', '5')),
    ]


def remi_official_frame(rows: list[dict] | None = None, struct_images: bool = True) -> pd.DataFrame:
    """Rows in the official parquet layout: question, label, task, image_1..image_6 (nulls for unused slots).

    struct_images=True stores each slot as the Hugging Face Image struct {'bytes', 'path'} (what the Hub's
    parquet holds); False stores raw bytes.
    """
    records = []
    for item in rows or remi_items():
        record = {'question': item['question'], 'label': item['label'], 'task': item['task']}
        for k, slot in enumerate(REMI_IMAGE_SLOTS):
            raw = item['images'][k] if k < len(item['images']) else None
            record[slot] = ({'bytes': raw, 'path': None} if struct_images else raw) if raw is not None else None
        records.append(record)
    return pd.DataFrame(records)


def write_remi_parquet(path: str | Path, rows: list[dict] | None = None, struct_images: bool = True) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq
    frame = remi_official_frame(rows, struct_images)
    image_type = pa.struct([('bytes', pa.binary()), ('path', pa.string())]) if struct_images else pa.binary()
    schema = pa.schema([('question', pa.string()), ('label', pa.string()), ('task', pa.string())]
                       + [(slot, image_type) for slot in REMI_IMAGE_SLOTS])
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), out)
    return out


def build_remi(path: str | Path) -> Path:
    """The embedded demo split: every task once, converted exactly as the real split is."""
    from vlmeval_ext.prepare.remi import parquet_rows_to_frame, write_tsv
    return write_tsv(parquet_rows_to_frame(remi_official_frame(), 'generated ReMI demo items'), path)


# --------------------------------------------------------------------------------------------------- RoCOCO
ROCOCO_DEMO_NAME = 'RoCOCO-MCQ-same_concept_DEMO'
ROCOCO_DEMO_TSV = DEMO_DIR / f'{ROCOCO_DEMO_NAME}.tsv'
N_FIRST = 23


def rococo_demo_rows(ann) -> list[int]:
    eleven = next(i for i, g in enumerate(ann.ground_truth) if len(g) == 6)
    return list(range(N_FIRST)) + ([eleven] if eleven >= N_FIRST else [])


def build_rococo(ann_path: str | Path, out: str | Path = ROCOCO_DEMO_TSV) -> str:
    from vlmeval_ext.prepare import rococo as D
    ann = D.load_annotation(ann_path)
    frame = D.mcq_frame(ann, 'same_concept',
                        lambda i: base64.b64encode(D.demo_image_png(ann.images[i], i)).decode('ascii'),
                        rows=rococo_demo_rows(ann))
    frame['coco_image'] = 'stand-in for ' + frame['coco_image']
    path = D.write_tsv(frame, out)
    Path(f'{path}.md5').unlink()              # the md5 of the shipped file is in the registry
    return path



# ----------------------------------------------------------------------------------- the retrieval gallery
def gallery_files() -> list[Path]:
    root = Path(str(resources.files('vlmeval_ext'))) / 'demo' / 'rococo_gallery'
    return sorted(root.glob('*.json'))


def write_gallery(out_dir: str | Path) -> tuple[Path, Path]:
    """(annotation folder, COCO root) of the tiny gallery under out_dir (existing files are kept)."""
    from PIL import Image

    from vlmeval_ext.prepare import rococo as D
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
    from vlmeval_ext.io import file_md5
    ap = argparse.ArgumentParser(prog='python -m vlmeval_ext.prepare.demos', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('demo', choices=('grab', 'rbench', 'remi', 'rococo', 'gallery'))
    ap.add_argument('source', nargs='?', help='the official file the demo takes its rows from (gallery: OUT_DIR)')
    ap.add_argument('--out', default=None)
    args = ap.parse_args(argv)
    if args.demo == 'gallery':
        ann_dir, coco = write_gallery(args.source)
        print(f'annotations: {ann_dir}\ncoco root: {coco}')
        return 0
    build = {'grab': (build_grab, GRAB_DEMO_TSV), 'rbench': (build_rbench, RBENCH_DEMO_TSV),
             'rococo': (build_rococo, ROCOCO_DEMO_TSV)}
    if args.demo == 'remi':
        path = build_remi(args.out or REMI_DEMO_TSV)
    else:
        fn, default = build[args.demo]
        fn(args.source, args.out or default)
        path = args.out or default
    print(f'{path}: md5 {file_md5(path)} (the registry records it)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
