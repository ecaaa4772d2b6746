"""Small generated ReMI-format items for every task (the embedded demo split and the tests).

Each item follows the official layout: a question with <imageK> tags, a label string, a task name and 2-6 PNG
images whose content determines the answer (drawn with Pillow). These are NOT ReMI data: they exercise the
pipeline end to end (conversion, interleaving, scoring) when the real split is not reachable.
"""
from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd

from .data import IMAGE_SLOTS


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


def items() -> list[dict]:
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


def official_frame(rows: list[dict] | None = None, struct_images: bool = True) -> pd.DataFrame:
    """Rows in the official parquet layout: question, label, task, image_1..image_6 (nulls for unused slots).

    struct_images=True stores each slot as the Hugging Face Image struct {'bytes', 'path'} (what the Hub's
    parquet holds); False stores raw bytes.
    """
    records = []
    for item in rows or items():
        record = {'question': item['question'], 'label': item['label'], 'task': item['task']}
        for k, slot in enumerate(IMAGE_SLOTS):
            raw = item['images'][k] if k < len(item['images']) else None
            record[slot] = ({'bytes': raw, 'path': None} if struct_images else raw) if raw is not None else None
        records.append(record)
    return pd.DataFrame(records)


def write_official_parquet(path: str | Path, rows: list[dict] | None = None, struct_images: bool = True) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq
    frame = official_frame(rows, struct_images)
    image_type = pa.struct([('bytes', pa.binary()), ('path', pa.string())]) if struct_images else pa.binary()
    schema = pa.schema([('question', pa.string()), ('label', pa.string()), ('task', pa.string())]
                       + [(slot, image_type) for slot in IMAGE_SLOTS])
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), out)
    return out


def write_demo_tsv(path: str | Path) -> Path:
    """The embedded demo split: every task once, converted exactly as the real split is."""
    from .data import parquet_rows_to_frame, write_tsv
    return write_tsv(parquet_rows_to_frame(official_frame(), 'generated ReMI demo items'), path)
