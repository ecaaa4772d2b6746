"""Images per second for each of the 33 distortions at 512x512 and 1024x1024, beside PyPI `imagecorruptions`.

    python benchmarks/corrupt_speed.py [--sizes 512 1024] [--repeat 3] [--imagecorruptions-path DIR]
                                       [--out benchmarks/corrupt_speed_results.md]

Ours: every strength 1-3, `repeat` calls each; images/s = 1 / median seconds per call. imagecorruptions: the
counterpart function (where one exists) at severities 1, 3, 5 (its 1-5 scale spans our low/mid/high), same
timing. imagecorruptions is stale (2020); it is imported from --imagecorruptions-path (a throwaway
`pip install --target` dir) and every function that fails is reported with its error, not hidden.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vlmeval_ext.corrupt import DISTORTION_IDS, STRENGTHS, corrupt_array, distortion_info  # noqa: E402

# our id -> imagecorruptions function name (same physical effect)
COUNTERPARTS = {
    1: 'motion_blur', 5: 'defocus_blur', 6: 'pixelate', 7: 'spatter', 9: 'gaussian_noise', 11: 'impulse_noise',
    12: 'speckle_noise', 16: 'jpeg_compression', 23: 'saturate', 25: 'brightness', 28: 'gaussian_blur',
    33: 'contrast',
}
THEIR_SEVERITIES = (1, 3, 5)


def test_image(side: int) -> np.ndarray:
    from skimage import data
    return cv2.resize(data.astronaut(), (side, side), interpolation=cv2.INTER_AREA)


def median_rate(calls, repeat: int) -> float:
    """images/s from the median of `repeat` timed runs of each call (calls: one per strength)."""
    times = []
    for call in calls:
        call()  # warm-up (imports, caches)
        for _ in range(repeat):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
    return 1.0 / statistics.median(times)


def load_imagecorruptions(path: str | None):
    if path:
        sys.path.insert(0, path)
    try:
        import imagecorruptions
    except Exception as err:  # reported in the results table, never hidden
        return None, f'{type(err).__name__}: {err}'
    return imagecorruptions, None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--sizes', type=int, nargs='+', default=[512, 1024])
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--imagecorruptions-path', default=None)
    ap.add_argument('--out', default=str(REPO / 'benchmarks' / 'corrupt_speed_results.md'))
    args = ap.parse_args(argv)

    ic, import_error = load_imagecorruptions(args.imagecorruptions_path)
    from tqdm import tqdm

    lines = [
        '# Corruption engine speed (images per second, higher is better)', '',
        f'Command: `python benchmarks/corrupt_speed.py --sizes {" ".join(map(str, args.sizes))} '
        f'--repeat {args.repeat}' + (' --imagecorruptions-path DIR' if args.imagecorruptions_path else '') + '`', '',
        f'Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python '
        f'{platform.python_version()}, OpenCV {cv2.__version__}, numpy {np.__version__}'
        + (f', imagecorruptions {getattr(ic, "__version__", "1.1.2")}' if ic else ''), '',
        'Ours: all three strengths; imagecorruptions: severities 1, 3, 5; median of all timed calls, '
        'skimage.data.astronaut() resized to the size. "x" = ours / theirs.', '',
    ]
    if import_error:
        lines += [f'imagecorruptions could not be imported: `{import_error}`', '']

    failures = {}
    for side in args.sizes:
        img = test_image(side)
        rows = []
        for d in tqdm(DISTORTION_IDS, desc=f'{side}px'):
            ours = median_rate([lambda s=s: corrupt_array(img, d, s, seed=0) for s in STRENGTHS], args.repeat)
            theirs = ratio = ''
            name = COUNTERPARTS.get(d, '')
            if name and ic is not None:
                try:
                    rate = median_rate([lambda v=v: ic.corrupt(img, corruption_name=name, severity=v)
                                        for v in THEIR_SEVERITIES], args.repeat)
                    theirs, ratio = f'{rate:.1f}', f'{ours / rate:.1f}x'
                except Exception as err:  # a stale function that no longer runs: report the error
                    failures[name] = f'{type(err).__name__}: {err}'
                    theirs = 'fails (see below)'
            info = distortion_info(d)
            flag = ' (approx.)' if info['approximation'] else ''
            rows.append(f'| {d} | {info["name"]}{flag} | {ours:.1f} | {name} | {theirs} | {ratio} |')
        lines += [f'## {side}x{side}', '', '| id | distortion | ours img/s | imagecorruptions | theirs img/s | x |',
                  '|---|---|---|---|---|---|', *rows, '']
    if failures:
        lines += ['## imagecorruptions functions that fail here', '']
        lines += [f'- `{name}`: `{msg}`' for name, msg in failures.items()] + ['']
    Path(args.out).write_text('\n'.join(lines), encoding='utf-8')
    print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
