"""GRAB TSV preparation at the official image size: the previous pipeline vs the current one, side by side.

Images: synthetic matplotlib plots rendered at the official size (5836x4842 RGBA with a transparent background,
as the official PNGs), written as a manual-download layout (grab.json + images/) under a temporary folder.

- before: the pipeline as it was (alpha_composite + convert('RGB') + LANCZOS to 2048 px + PNG at Pillow's
  default zlib level 6, a thread pool of min(8, CPUs) threads, the same window), reproduced below;
- after: `vlmeval_ext.prepare.grab.build_tsv()` (paste through alpha, the same LANCZOS resize and PNG encoding, one
  worker process per CPU).
Both run alternately `--rounds` times over the same images, each run in a fresh subprocess (its own peak RSS,
its CPU time including worker processes); the table gives medians. Every prepared image of both is decoded and
compared array by array.

Usage: PYTHONPATH=. python benchmarks/grab_prepare.py [--images 8] [--rounds 3] [--grab-json grab.json]
(writes benchmarks/grab_prepare.md)
"""
from __future__ import annotations

import argparse
import base64
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PIL import Image  # noqa: E402

from vlmeval_ext.prepare import grab as data  # noqa: E402
from vlmeval_ext.scripts import build_grab_tsv as build_script  # noqa: E402
from vlmeval_ext.dataset.utils.grab import normalized_score, official_correct  # noqa: E402

OFFICIAL_SIZE = (5836, 4842)


def official_size_plot(seed: int) -> Image.Image:
    """A transparent RGBA plot at the official size (several curves, grid, ticks)."""
    fig, ax = plt.subplots(figsize=(OFFICIAL_SIZE[0] / 400, OFFICIAL_SIZE[1] / 400), dpi=400)
    xs = np.linspace(-10, 10, 2000)
    for k in range(1 + seed % 5):
        ax.plot(xs, np.sin((k + 1 + seed) * xs / 3) * (k + 2) + k, linewidth=1.5)
    ax.grid(alpha=0.3)
    ax.set_title(f'plot {seed}')
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', transparent=True)
    plt.close(fig)
    buffer.seek(0)
    image = Image.open(buffer)
    image.load()
    return image


# ------------------------------------------------------------------------------ the previous pipeline

def before_encode(image: Image.Image, max_side: int = 2048) -> str:
    if image.mode in ('RGBA', 'LA') or (image.mode == 'P' and 'transparency' in image.info):
        rgba = image.convert('RGBA')
        background = Image.new('RGBA', rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(background, rgba)
    image = image.convert('RGB')
    if max_side and max(image.size) > max_side:
        scale = max_side / max(image.size)
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                             Image.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format='PNG', optimize=False)
    return base64.b64encode(buffer.getvalue()).decode('ascii')


def before_prepare(out_path: Path, root: Path) -> None:
    records = data.read_grab_json(root / 'grab.json')
    workers = min(8, os.cpu_count() or 1)

    def build(record):
        with Image.open(root / record['image']) as img:
            img.load()
            row = {k: record[k] for k in ('pid', 'question', 'answer', 'task', 'category', 'complexity')}
            return {'index': record['pid'], **row, 'image': before_encode(img)}

    def rows():
        with ThreadPoolExecutor(max_workers=workers) as pool:
            window: deque = deque()
            for record in records:
                window.append(pool.submit(build, record))
                if len(window) >= 2 * workers:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
    data.write_tsv(rows(), out_path)


# ------------------------------------------------------------------------------------------------ main

def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children (the worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def decoded(tsv: Path) -> list[np.ndarray]:
    table = pd.read_csv(tsv, sep='\t')
    return [np.asarray(Image.open(io.BytesIO(base64.b64decode(cell))).convert('RGB')) for cell in table['image']]


def stage_table(image: Image.Image) -> list[str]:
    """One image, one process: the cost of each step at 2048 px."""
    def best(fn, n=3):
        times = []
        for _ in range(n):
            start = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - start)
        return min(times), result

    buffer = io.BytesIO()
    image.save(buffer, format='PNG')
    source = buffer.getvalue()
    t_decode, _ = best(lambda: data.open_source(source))
    t_before, _ = best(lambda: before_encode(image))
    prepared = build_script.prepare_image(image, 2048)
    t_prep, _ = best(lambda: build_script.prepare_image(image, 2048))
    lines = ['| step (one image, one process, best of 3) | seconds | base64 KiB |', '|---|---|---|',
             f'| decode the official-size PNG ({len(source) / 2 ** 20:.1f} MiB) | {t_decode:.2f} | |',
             f'| before: composite + convert + resize + PNG level 6 (no decode) | {t_before:.2f} | '
             f'{len(before_encode(image)) / 1024:.0f} |',
             f'| after: paste through alpha + resize (no decode, no encode) | {t_prep:.2f} | |']
    for level in (6, 3, 1):
        out = io.BytesIO()
        t_enc, _ = best(lambda: (out.seek(0), out.truncate(), prepared.save(out, format='PNG', optimize=False,
                                                                             compress_level=level)))
        kib = len(base64.b64encode(out.getvalue())) / 1024
        mark = ' (used)' if level == build_script.PNG_COMPRESS_LEVEL else ''
        lines.append(f'| PNG encode at 2048 px, zlib level {level}{mark} | {t_enc:.3f} | {kib:.0f} '
                     f'(full TSV ~{kib * 2170 / 2 ** 20:.2f} GiB) |')
    return lines


def child(name: str, root: Path, out: Path) -> None:
    """One prepare run in this fresh process: wall, CPU (with workers) and the peak RSS of the process tree."""
    from _memory import TreePeakRSS

    start, cpu_start = time.perf_counter(), cpu_seconds()
    with TreePeakRSS() as memory:
        if name == 'before':
            before_prepare(out, root)
        else:
            data.build_tsv(out, root, progress=False)
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    print(json.dumps({'wall': wall, 'cpu': cpu, 'rss_gb': memory.peak_gb}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--images', type=int, default=8)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--grab-json', help='grab.json (default: tests/fixtures/grab/grab.json.xz)')
    parser.add_argument('--child', choices=('before', 'after'), help=argparse.SUPPRESS)
    parser.add_argument('--root', help=argparse.SUPPRESS)
    parser.add_argument('--out', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, Path(args.root), Path(args.out))
    if args.grab_json:
        questions = json.loads(Path(args.grab_json).read_text(encoding='utf-8'))
    else:
        import lzma
        fixture = Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'grab' / 'grab.json.xz'
        questions = json.loads(lzma.decompress(fixture.read_bytes()))
    started = time.perf_counter()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    lines = ['# GRAB preparation: previous vs current pipeline at the official image size', '',
             f'Command: `python benchmarks/grab_prepare.py --images {args.images} --rounds {args.rounds}` '
             f'({time.strftime("%Y-%m-%d")}; {platform.machine()}, {cpus} CPUs, load average before the run '
             f'{os.getloadavg()[0]:.2f})', '']
    with tempfile.TemporaryDirectory(dir='/tmp') as tmp:
        root = Path(tmp) / 'src'
        (root / 'images').mkdir(parents=True)
        subset = {str(i): questions[str(i)] for i in range(args.images)}
        (root / 'grab.json').write_text(json.dumps(subset))
        first = None
        for i, record in subset.items():
            image = official_size_plot(int(i))
            image.save(root / record['image'])
            first = first or image
        lines += [f'{args.images} images of {first.size[0]}x{first.size[1]} {first.mode} (transparent background), '
                  f'long side capped at 2048 px.', '']
        times: dict[str, list[float]] = {'before': [], 'after': []}
        cpu: dict[str, list[float]] = {'before': [], 'after': []}
        rss: dict[str, list[float]] = {'before': [], 'after': []}
        for _ in range(args.rounds):
            for name in ('before', 'after'):
                proc = subprocess.run([sys.executable, __file__, '--child', name, '--root', str(root),
                                       '--out', str(Path(tmp) / f'{name}.tsv')], capture_output=True, text=True,
                                      check=True)
                result = json.loads(proc.stdout.strip().splitlines()[-1])
                times[name].append(result['wall'])
                cpu[name].append(result['cpu'])
                rss[name].append(result['rss_gb'])
        old, new = decoded(Path(tmp) / 'before.tsv'), decoded(Path(tmp) / 'after.tsv')
        identical = len(old) == len(new) == args.images and all(
            a.shape == b.shape and np.array_equal(a, b) for a, b in zip(old, new))
        max_diff = max(int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in zip(old, new))
        sizes = {n: (Path(tmp) / f'{n}.tsv').stat().st_size for n in ('before', 'after')}
        med = {n: statistics.median(t) / args.images for n, t in times.items()}
        med_cpu = {n: statistics.median(t) / args.images for n, t in cpu.items()}
        lines += ['| prepare(), whole TSV | workers | wall s/image (median) | all rounds, wall s/image | '
                  'CPU s/image (median) | peak RSS GB (process tree) | TSV MiB |',
                  '|---|---|---|---|---|---|---|',
                  f'| before | {min(8, os.cpu_count() or 1)} threads | {med["before"]:.2f} | '
                  f'{", ".join(f"{t / args.images:.2f}" for t in times["before"])} | {med_cpu["before"]:.2f} | '
                  f'{max(rss["before"]):.2f} | {sizes["before"] / 2 ** 20:.1f} |',
                  f'| after | {data.default_workers()} processes | {med["after"]:.2f} | '
                  f'{", ".join(f"{t / args.images:.2f}" for t in times["after"])} | {med_cpu["after"]:.2f} | '
                  f'{max(rss["after"]):.2f} | {sizes["after"] / 2 ** 20:.1f} |',
                  '', f'- wall speed-up (before / after): **{med["before"] / med["after"]:.2f}x**; CPU per image '
                  f'{med_cpu["before"]:.2f} s before, {med_cpu["after"]:.2f} s after '
                  f'({med_cpu["before"] / med_cpu["after"]:.2f}x); after = {med["after"]:.2f} s/image wall, '
                  f'~{med["after"] * 2170 / 60:.0f} min for the 2,170 images; on {cpus} unshared cores the CPU time '
                  f'bounds it at {med_cpu["after"] / cpus:.2f} s/image.',
                  f'- goal <= 0.7 s/image on 2 cores: **{"met" if med["after"] <= 0.7 else "not met"}** '
                  f'({med["after"]:.2f} s/image). Goal >= 4x the previous pipeline measured side by side: '
                  f'**{"met" if med["before"] / med["after"] >= 4 else "not met"}** '
                  f'({med["before"] / med["after"]:.2f}x). The 2.8 s/image that a 4x goal starts from was the '
                  f'previous pipeline timed with one thread on a loaded machine; side by side, on the same machine '
                  f'and load, the previous pipeline takes {med["before"]:.2f} s/image (first row), so no exact '
                  f'pipeline can be 4x faster than it (see what bounds it, below).',
                  f'- prepared images pixel-identical to the previous pipeline\'s (decoded, compared as arrays): '
                  f'**{identical}** (largest difference {max_diff}).',
                  f'- TSV {sizes["after"] / sizes["before"]:.3f}x the previous size (PNG zlib level '
                  f'{build_script.PNG_COMPRESS_LEVEL}, as before).', '']
        lines += stage_table(first)
        lines += ['', 'What bounds it: the previous pipeline already used both cores (Pillow releases the GIL while it '
                  'decodes, resizes and encodes), so worker processes add little on 2 cores. What the exact output '
                  'requires per image is the full-size PNG decode and the LANCZOS resize (rows 1 and 3 of the step '
                  'table); the rest (alpha compositing, PNG encoding) is what can be saved. Pasting through alpha '
                  'removes two full-size RGBA copies (about 0.45 GB of the ~0.56 GB a full-size image took in '
                  'flight; see the RSS column). Not taken: PNG zlib level 1 (about 0.04 s CPU less per image, a '
                  '30-40 % larger TSV, which the kit loads whole into memory); Pillow\'s `reducing_gap=1.0` (the '
                  'resize about 0.2 s CPU faster, but pixels differ by up to 24 levels on ~6 % of values).']
    variants = ['{a}', ' The answer is {a}.', 'Looking at the plot carefully, I estimate {a} units.']
    start = time.perf_counter()
    n = 0
    for item in questions.values():
        for v in variants:
            response = v.format(a=item['answer']).replace('-', '\u2212')
            official_correct(response, item['answer'])
            normalized_score(response, item['answer'], item['question'])
            n += 1
    seconds = time.perf_counter() - start
    lines += ['', f'Scoring (official + normalized): {n} responses in {seconds:.2f} s '
              f'({n / seconds:,.0f} responses/s)', '', f'Benchmark wall time {time.perf_counter() - started:.0f} s.']
    out = Path(__file__).with_suffix('.md')
    out.write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
