"""Every benchmark's reply parser on 1 MB hostile model outputs: the worst time of each parser.

The outputs are tests/helpers/adversarial_outputs.py's hostile_outputs (each a pattern that once made a parser slow or crash:
repeated 'answer:' without a digit, 'score' followed by spaces, 5,000 '[', 1 MB of ``` fences, ...). Each parser
reads each output once, in one process; the table lists each parser's slowest output.

    python benchmarks/parsers_1mb.py [--size 1048576] [--out benchmarks/parsers_1mb.md]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))

from helpers.adversarial_outputs import hostile_outputs, parsers  # noqa: E402


def measure(size: int) -> list[tuple[str, float, str, float]]:
    """[(parser, worst seconds, on which output, total seconds over all outputs)]."""
    outputs = hostile_outputs(size)
    rows = []
    for name, parse in parsers().items():
        times = {}
        for kind, text in outputs.items():
            start = time.perf_counter()
            parse(text)
            times[kind] = time.perf_counter() - start
        worst = max(times, key=times.get)
        rows.append((name, times[worst], worst, sum(times.values())))
        print(f'{name:28s} worst {times[worst]:6.3f} s ({worst}), '
              f'all {len(times)} outputs {sum(times.values()):6.2f} s',
              flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--size', type=int, default=1 << 20)
    ap.add_argument('--out', default=None, help='write the markdown table here')
    args = ap.parse_args()
    rows = measure(args.size)
    if args.out:
        n = len(hostile_outputs(64))
        lines = [f'# Reply parsers on {args.size:,}-character hostile outputs', '',
                 f'Each parser read each of {n} hostile outputs (tests/helpers/adversarial_outputs.py) once; '
                 f'{os.cpu_count()} CPUs, Python {platform.python_version()}.', '',
                 '| parser | slowest output | seconds | all outputs (s) |', '|---|---|---|---|']
        lines += [f'| {name} | {kind} | {worst:.3f} | {total:.2f} |' for name, worst, kind, total in rows]
        lines += ['', 'Goal: every parser under 5 s on any 1 MB output (linear time). '
                  '`tests/datasets/test_parsers_1mb.py` checks that each finishes on each output.', '',
                  f'Command: `python benchmarks/parsers_1mb.py --size {args.size} --out benchmarks/parsers_1mb.md`']
        Path(args.out).write_text('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
