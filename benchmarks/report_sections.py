"""The page written at the end of a run, on a work dir that already holds full-size results: every section built
again (no section cache) vs only the sections whose inputs changed.

The work dir is report_size.py's: full GRAB (2,170 items) and full R-Bench (1,485 pairs) of model M, with their
images in a temporary $LMUData. Then a new 85-item run, model N on GRAB_DEMO (`vlmeval-ext eval`), is added, as a
run.py run adds its files before writing the page. Each time is `vlmeval-ext report WORK` in a fresh interpreter.

    python benchmarks/report_sections.py [--runs 3]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report_size  # noqa: E402


def report(work: Path, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, '-m', 'vlmeval_ext', 'report', str(work)], env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--runs', type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env, work = report_size.full_work_dir(tmp), tmp / 'full'
        cache = work / '.vlmeval-ext-report'
        every = []
        for _ in range(args.runs):
            shutil.rmtree(cache, ignore_errors=True)
            every.append(report(work, env))
        unchanged = [report(work, env) for _ in range(args.runs)]
        (work / 'N').mkdir()
        report_size.evaluate_demo(work / 'N', 'GRAB_DEMO', [], env)        # the new run, as run.py adds it
        touched = []
        for _ in range(args.runs):
            for path in cache.glob('*.json'):                               # N's section is new each time
                if 'N_GRAB_DEMO' in path.read_text(encoding='utf-8')[:2000]:
                    path.unlink()
            touched.append(report(work, env))
    rows = [('every section built again (before)', every), ('nothing changed', unchanged),
            ("a new 85-item run: its section built, the others' reused", touched)]
    print('| page of the work dir | median (s) | runs (s) |\n|---|---|---|')
    for name, times in rows:
        print(f'| {name} | {statistics.median(times):.2f} | {", ".join(f"{t:.2f}" for t in times)} |')


if __name__ == '__main__':
    main()
