"""Build the embedded GRAB demo split: real grab.json rows with small generated plots (no official images here).

Where the answer pins the plot down, the plot is faithful: a line through the asked intercept, the asked
equation, a cubic with the asked stationary points. Other questions get a labelled stand-in plot, so the demo
exercises the pipeline, not the benchmark's difficulty.

Usage: python -m vlmeval_ext.grab.make_demo path/to/grab.json [--out vlmeval_ext/grab/demo/GRAB_DEMO.tsv]
"""
from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path

from vlmeval_ext.grab import data

DEMO_TSV = Path(__file__).resolve().parent / 'demo' / 'GRAB_DEMO.tsv'
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

    from vlmeval_ext.grab.score import extract_equation, extract_interval

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
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from PIL import Image

    xs, ys, faithful = _curve(record)
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    ax.plot(xs, ys, linewidth=1.2)
    ax.axhline(0, color='black', linewidth=0.6)
    ax.axvline(0, color='black', linewidth=0.6)
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=6)
    if not faithful:
        ax.set_title(f'stand-in plot (pid {record["pid"]})', fontsize=7)
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', transparent=True)
    plt.close(fig)
    buffer.seek(0)
    return Image.open(buffer)


def build_demo(grab_json: str | Path, out_path: str | Path = DEMO_TSV) -> Path:
    records = select_demo_rows(data.read_grab_json(grab_json))
    n = data.write_tsv(data.tsv_rows(records, render_plot, max_side=0, progress=False), out_path)
    print(f'wrote {n} demo questions to {out_path} ({Path(out_path).stat().st_size / 1024:.0f} KiB)')
    return Path(out_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m vlmeval_ext.grab.make_demo', description=__doc__.split('\n')[0])
    parser.add_argument('grab_json', help='the official grab.json')
    parser.add_argument('--out', default=str(DEMO_TSV))
    args = parser.parse_args(argv)
    build_demo(args.grab_json, args.out)
    return 0


if __name__ == '__main__':
    sys.exit(main())
