"""Start-up time of everyday commands: wall time of each in a fresh interpreter, whether it imported torch or
VLMEvalKit (`vlmeval`), and its ratio to `vlmeval-ext list` measured in the same run.

    .venv/bin/python benchmarks/cli_startup.py [--runs 3] [--root REPO] [--work WORK_DIR]

--root points at a checkout of vlmeval-ext (default: this one), so two revisions can be compared with the same
script. The GRAB_DEMO / ReMI_DEMO predictions are the demo splits with the answers as predictions; the RoCOCO
retrieval predictions are an embedding model's answers for a 200-image gallery (5 captions each, random unit
vectors). --work adds `vlmeval-ext report WORK_DIR` (the work dir `bash run_examples.sh` leaves). The unknown
`--data` line is timed after its warm-up run, which keeps the kit's dataset names (the first run of a kit imports it).
PYTHONDONTWRITEBYTECODE is dropped for the commands, so they run as an installed package does, from cached bytecode.
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


def retrieval_predictions(out: Path, dataset: str, images: int = 200, captions: int = 5, dim: int = 64) -> str:
    import numpy as np
    import pandas as pd
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from vlmeval_ext.dataset.utils.rococo_retrieval import encode_vector
    rng = np.random.default_rng(0)
    rows = [{'kind': 'image', 'item': i, 'image_row': i, 'ground_truth': '', 'seed': 0, 'source': f'{i}.jpg',
             'question': ''} for i in range(images)]
    rows += [{'kind': 'text', 'item': k, 'image_row': k // captions, 'ground_truth': 'yes', 'seed': '',
              'source': '', 'question': f'caption {k}'} for k in range(images * captions)]
    vectors = rng.standard_normal((len(rows), dim))
    frame = pd.DataFrame(rows)
    frame.insert(0, 'index', range(len(frame)))
    frame['prediction'] = [encode_vector(v / np.linalg.norm(v)) for v in vectors]
    path = out / f'mymodel_{dataset}.tsv'
    frame.to_csv(path, sep='\t', index=False)
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
    p.add_argument('--work', default=None, help='a work dir for `vlmeval-ext report` (run_examples.sh leaves one)')
    args = p.parse_args()
    root = Path(args.root).resolve()
    work = Path(tempfile.mkdtemp())
    (work / 'LMUData').mkdir()
    # as an installed package runs: its bytecode cached (the warm-up run writes it where it is missing)
    env = {**{k: v for k, v in os.environ.items() if k != 'PYTHONDONTWRITEBYTECODE'}, 'PYTHONPATH': str(root),
           'LMUData': str(work / 'LMUData'), 'VLMEVAL_EXT_CACHE': str(work / 'cache')}
    grab = predictions(root, work, 'GRAB_DEMO', 'demo/GRAB_DEMO.tsv')
    remi = predictions(root, work, 'ReMI_DEMO', 'demo/ReMI_DEMO.tsv')
    retrieval = retrieval_predictions(work, 'RoCOCO-I2T-clean')
    commands = [('vlmeval-ext --help', ['--help'], CLI), ('vlmeval-ext list', ['list'], CLI),
                ('python run.py --help', ['--help'], RUN_PY), ('vlmeval-ext run --help', ['run', '--help'], CLI),
                ('vlmeval-ext leaderboard --help', ['leaderboard', '--help'], CLI),
                ('vlmeval-ext eval --data GRAB_DEMO --pred ...', ['eval', '--data', 'GRAB_DEMO', '--pred', grab],
                 CLI),
                ('vlmeval-ext eval --data ReMI_DEMO --pred ...', ['eval', '--data', 'ReMI_DEMO', '--pred', remi],
                 CLI),
                ('vlmeval-ext eval --data RoCOCO-I2T-clean --pred ... (1,200 rows)',
                 ['eval', '--data', 'RoCOCO-I2T-clean', '--pred', retrieval], CLI),
                ('python run.py --data GRAB_DEMOO --model Naive-Baseline (unknown name)',
                 ['--data', 'GRAB_DEMOO', '--model', 'Naive-Baseline', '--work-dir', str(work / 'runs')], RUN_PY)]
    if args.work:
        commands.append(('vlmeval-ext report WORK', ['report', str(Path(args.work).resolve()), '--out',
                                                     str(work / 'report.html')], CLI))
    print('| command | median wall (s) | runs (s) | x `list` | exit status | imports torch | imports vlmeval |')
    print('|---|---|---|---|---|---|---|')
    medians = {}
    for label, argv, call in commands:
        measure(root, argv, call, env)   # warm the OS file cache (and keep the kit's dataset names)
        runs = [measure(root, argv, call, env) for _ in range(args.runs)]
        walls = [w for w, _ in runs]
        info = runs[-1][1]
        medians[label] = statistics.median(walls)
        ratio = medians[label] / medians['vlmeval-ext list'] if 'vlmeval-ext list' in medians else float('nan')
        print(f'| `{label}` | {medians[label]:.2f} | {", ".join(f"{w:.2f}" for w in walls)} | {ratio:.1f} | '
              f'{info.get("code")} | {info.get("torch")} | {info.get("vlmeval")} |', flush=True)


if __name__ == '__main__':
    main()
