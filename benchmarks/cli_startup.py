"""Start-up time of everyday commands: wall time of each in a fresh interpreter, and whether it imported torch or
VLMEvalKit (`vlmeval`).

    .venv/bin/python benchmarks/cli_startup.py [--runs 3] [--root REPO]

--root points at a checkout of vlmeval-ext (default: this one), so two revisions can be compared with the same
script. The GRAB_DEMO / ReMI_DEMO predictions are the demo splits with the answers as predictions.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = ('import json, sys, runpy\nsys.argv = {argv!r}\ncode = 0\ntry:\n    {call}\nexcept SystemExit as e:\n'
         '    code = e.code or 0\nprint(json.dumps({{"code": code, "torch": "torch" in sys.modules, '
         '"vlmeval": "vlmeval" in sys.modules}}), file=sys.stderr)\n')
CLI = 'runpy.run_module("vlmeval_ext", run_name="__main__")'
RUN_PY = 'runpy.run_path("run.py", run_name="__main__")'


def predictions(root: Path, out: Path, dataset: str, demo: str) -> str:
    import pandas as pd
    data = pd.read_csv(root / 'vlmeval_ext' / demo, sep='\t', dtype=str, keep_default_na=False)
    data = data.drop(columns=[c for c in ('image', 'image_path') if c in data])
    data['prediction'] = data['answer']
    path = out / f'mymodel_{dataset}.tsv'
    data.to_csv(path, sep='\t', index=False)
    return str(path)


def measure(root: Path, argv: list[str], call: str, env: dict) -> tuple[float, dict]:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, '-c', PROBE.format(argv=['prog', *argv], call=call)], cwd=root,
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    lines = [x for x in proc.stderr.splitlines() if x.startswith('{"code"')]
    return wall, (json.loads(lines[-1]) if lines else {'code': 'crashed'})


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--runs', type=int, default=3)
    p.add_argument('--root', default=str(Path(__file__).resolve().parents[1]))
    args = p.parse_args()
    root = Path(args.root).resolve()
    work = Path(tempfile.mkdtemp())
    env = {**os.environ, 'PYTHONPATH': str(root), 'LMUData': str(work / 'LMUData')}
    grab = predictions(root, work, 'GRAB_DEMO', 'demo/GRAB_DEMO.tsv')
    remi = predictions(root, work, 'ReMI_DEMO', 'demo/ReMI_DEMO.tsv')
    commands = [('vlmeval-ext --help', ['--help'], CLI), ('vlmeval-ext list', ['list'], CLI),
                ('python run.py --help', ['--help'], RUN_PY), ('vlmeval-ext run --help', ['run', '--help'], CLI),
                ('vlmeval-ext leaderboard --help', ['leaderboard', '--help'], CLI),
                ('vlmeval-ext eval --data GRAB_DEMO --pred ...', ['eval', '--data', 'GRAB_DEMO', '--pred', grab],
                 CLI),
                ('vlmeval-ext eval --data ReMI_DEMO --pred ...', ['eval', '--data', 'ReMI_DEMO', '--pred', remi],
                 CLI)]
    print('| command | median wall (s) | runs (s) | imports torch | imports vlmeval |')
    print('|---|---|---|---|---|')
    for label, argv, call in commands:
        measure(root, argv, call, env)   # warm the OS file cache
        runs = [measure(root, argv, call, env) for _ in range(args.runs)]
        walls = [w for w, _ in runs]
        info = runs[-1][1]
        print(f'| `{label}` | {statistics.median(walls):.2f} | {", ".join(f"{w:.2f}" for w in walls)} | '
              f'{info.get("torch")} | {info.get("vlmeval")} |', flush=True)


if __name__ == '__main__':
    main()
