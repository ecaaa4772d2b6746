"""`vlmeval-ext eval` of R-Bench-Full with every verdict in the verdict cache: with and without the kit's import.

LLaVA-1.5's real outputs on all 1,485 R-Bench items (tests/fixtures/rbench), the deterministic loopback judge of
rbench_judge_calls.py in its own process. One evaluation pays every call (and keeps the kit's resolution of the
judge); then, `--runs` times each, in a new work dir every time (no progress file: every verdict from the cache):

- `eval` as it runs now (no kit: the kit's judge rebuilt from what the first evaluation kept);
- `eval` with that kept resolution removed first (what `eval` did before: the kit imported to build the judge);
- `eval` again in the work dir of the first of these (every verdict in its progress file, no judging: the floor);
- `eval --judge offline` (the offline approximation of the judge, a model of its own: for reference);
- `vlmeval-ext list`.

    python benchmarks/rbench_cached_eval.py [--runs 3] [--mode official]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'tests'))

from judge_cache import free_port, with_judge, write_predictions  # noqa: E402

from helpers.fixtures import unpacked_fixtures  # noqa: E402

PROBE = ('import json, sys, time\nfrom vlmeval_ext.cli.main import main\ncode = 0\ntry:\n    main(sys.argv[1:])\n'
         'except SystemExit as e:\n    code = e.code or 0\n'
         'print(json.dumps({"code": code, "vlmeval": "vlmeval" in sys.modules}), file=sys.stderr)\n')


def run(argv: list[str], env: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, '-c', PROBE, *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=900)
    wall = time.perf_counter() - start
    said = [line for line in proc.stderr.splitlines() if line.startswith('{"code"')]
    if not said or json.loads(said[-1])['code'] != 0:
        raise SystemExit(f'{argv}: failed\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}')
    return wall, json.loads(said[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--mode', default='official', choices=('official', 'efficient'))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix='rbench-cached-eval-'))
    fixtures = unpacked_fixtures(root / 'fixtures')
    (root / 'lmu').mkdir()
    env = {**os.environ, 'VLMEVAL_EXT_CACHE': str(root / 'cache'), 'LMUData': str(root / 'lmu'),
           'OPENAI_API_KEY': 'sk-benchmark-not-a-real-key', 'PYTHONDONTWRITEBYTECODE': ''}
    seed = {'caption_seed': 2024} if args.mode == 'efficient' else {}
    judge_args = json.dumps({'judge_mode': args.mode, **seed})
    counter = iter(range(10 ** 6))

    def evaluate(extra=('--judge', 'loopback-judge', '--api-nproc', '32', '--judge-args', judge_args), pred=None):
        pred = pred or write_predictions(root / f'run{next(counter)}', fixtures)
        return (*run(['eval', '--data', 'R-Bench-Full', '--pred', str(pred), *extra], env), pred)

    def forget():
        for path in (root / 'cache').glob('kit-judges-*.json'):
            path.unlink()

    def timings():
        env['OPENAI_API_BASE'] = os.environ['OPENAI_API_BASE']     # the judge process's address
        first = evaluate()
        rows = {'list': [], 'eval, every verdict cached (no kit)': [],
                'eval, every verdict cached, the kit imported (as before)': [],
                'eval again in the same work dir (the floor: every verdict in its progress file, no judging)': [],
                'eval --judge offline (the offline approximation, for reference)': []}
        kits = {}

        def timed(label, *a, **k):
            wall, said, pred = evaluate(*a, **k)
            rows[label].append(wall)
            kits[label] = said['vlmeval']
            return pred
        labels = list(rows)
        for _ in range(args.runs):
            rows['list'].append(run(['list'], env)[0])
            pred = timed(labels[1])
            forget()
            timed(labels[2])
            timed(labels[3], pred=pred)
            timed(labels[4], ('--judge', 'offline'))
        return first, rows, kits, labels[3]

    (first, rows, kits, labels_floor), served = with_judge(timings, free_port(), 0.0)
    floor = statistics.median(rows[labels_floor])
    base = statistics.median(rows['list'])
    print(f'R-Bench-Full, {args.mode} mode, 2,970 rows; first evaluation {first[0]:.1f} s; judge requests '
          f'{served}; {args.runs} runs each, medians')
    print('| command | median (s) | x `list` | x floor | imports vlmeval |')
    print('|---|---|---|---|---|')
    for label, walls in rows.items():
        median = statistics.median(walls)
        kit = '' if label == 'list' else ('yes' if kits[label] else 'no')
        print(f'| {label} | {median:.2f} | {median / base:.1f} | {median / floor:.2f} | {kit or "no"} |')
    shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
