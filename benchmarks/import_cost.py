"""Import cost of the plugin: `import vlmeval.dataset` alone vs with vlmeval-ext registered.

    .venv/bin/python benchmarks/import_cost.py [--runs 5]

Each measurement is a fresh interpreter (warm OS file cache: one unmeasured run first), timing inside the
process with perf_counter. Goal: registration adds <= 10 % to the kit's own import.
"""
import argparse
import statistics
import subprocess
import sys

KIT = 'import time; t=time.perf_counter(); import vlmeval.dataset; print(time.perf_counter()-t)'
PLUGIN = ('import time; t=time.perf_counter(); import vlmeval_ext; import vlmeval.dataset, vlmeval.config; '
          'assert "GRAB" in vlmeval.dataset.SUPPORTED_DATASETS; print(time.perf_counter()-t)')


def measure(code: str) -> float:
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--runs', type=int, default=5)
    args = p.parse_args()
    measure(KIT)
    kit, plugin = [], []
    for _ in range(args.runs):   # interleaved so drift in machine load hits both alike
        kit.append(measure(KIT))
        plugin.append(measure(PLUGIN))
    k, pl = statistics.median(kit), statistics.median(plugin)
    print(f'import vlmeval.dataset            median {k:.2f} s  (runs: {", ".join(f"{x:.2f}" for x in kit)})')
    print(f'import vlmeval_ext + kit (registered) median {pl:.2f} s  (runs: {", ".join(f"{x:.2f}" for x in plugin)})')
    print(f'extra: {100 * (pl - k) / k:+.1f} %  (goal <= 10 %)')


if __name__ == '__main__':
    main()
