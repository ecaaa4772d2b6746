"""Measure GRAB TSV preparation (per-image encode time and size) and scoring throughput.

Images: a synthetic matplotlib plot rendered at the official size (5836x4842 RGBA), encoded at several
long-side caps. Scoring: all 2,170 real grab.json answers against realistic response variants.
Usage: python benchmarks/grab_prepare.py path/to/grab.json   (writes benchmarks/grab_prepare.md)
"""
from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from vlmeval_ext.grab.data import encode_image  # noqa: E402
from vlmeval_ext.grab.score import normalized_score, official_correct  # noqa: E402


def official_size_plot() -> Image.Image:
    fig, ax = plt.subplots(figsize=(5836 / 400, 4842 / 400), dpi=400)
    xs = np.linspace(-10, 10, 2000)
    for k in range(5):
        ax.plot(xs, np.sin((k + 1) * xs / 3) * (k + 2) + k, linewidth=1.5)
    ax.grid(alpha=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', transparent=True)
    plt.close(fig)
    buffer.seek(0)
    return Image.open(buffer)


def main(grab_json: str) -> None:
    lines = ['# GRAB preparation and scoring measurements', '',
             f'Command: `python benchmarks/grab_prepare.py grab.json` ({time.strftime("%Y-%m-%d")})', '']
    image = official_size_plot()
    lines += [f'Source image: {image.size[0]}x{image.size[1]} {image.mode} (matplotlib, like the official plots)',
              '', '| long-side cap | encode s/image | base64 KiB/image | est. full TSV (2,170) GiB |', '|---|---|---|---|']
    for cap in (0, 2048, 1024):
        start = time.perf_counter()
        encoded = encode_image(image, max_side=cap)
        seconds = time.perf_counter() - start
        kib = len(encoded) / 1024
        lines.append(f'| {cap or "none (full size)"} | {seconds:.2f} | {kib:.0f} | {kib * 2170 / 1024 ** 2:.2f} |')
    with open(grab_json, encoding='utf-8') as f:
        items = list(json.load(f).values())
    # End to end: prepare() on a manual-download layout of 8 official-size images, 1 thread vs several.
    import os
    import tempfile

    from vlmeval_ext.grab.data import prepare
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / 'src'
        (root / 'images').mkdir(parents=True)
        with open(grab_json, encoding='utf-8') as f:
            subset = {str(i): v for i, v in enumerate(list(json.load(f).values())[:8])}
        (root / 'grab.json').write_text(json.dumps(subset))
        for v in subset.values():
            image.save(root / v['image'])
        lines += ['', '| prepare(), 8 official-size images, cap 2048 | wall s | s/image |', '|---|---|---|']
        for workers in sorted({1, min(8, os.cpu_count() or 1)}):
            start = time.perf_counter()
            prepare(Path(tmp) / 'GRAB.tsv', root, progress=False, workers=workers)
            seconds = time.perf_counter() - start
            lines.append(f'| {workers} thread(s) ({os.cpu_count()} CPUs) | {seconds:.1f} | {seconds / 8:.2f} |')
    variants = ['{a}', ' The answer is {a}.', 'Looking at the plot carefully, I estimate {a} units.']
    start = time.perf_counter()
    n = 0
    for item in items:
        for v in variants:
            response = v.format(a=item['answer']).replace('-', '\u2212')
            official_correct(response, item['answer'])
            normalized_score(response, item['answer'], item['question'])
            n += 1
    seconds = time.perf_counter() - start
    lines += ['', f'Scoring (official + normalized): {n} responses in {seconds:.2f} s '
              f'({n / seconds:,.0f} responses/s)']
    out = Path(__file__).with_suffix('.md')
    out.write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main(sys.argv[1])
