"""The shared verdict cache (vlmeval_ext.core.judge.VerdictCache): what it saves and what it costs.

1. Re-run: LLaVA-1.5's real R-Bench outputs (1,485 items, 2,970 prediction rows) evaluated through the kit's
   evaluate() with the loopback server as the judge (its own process, the deterministic prompt-only judge of
   rbench_judge_calls.py), then the same predictions again in a new work dir, then with one prediction changed.
   Judge requests are counted at the server.
2. Lookup overhead: 25,000 verdicts judged by a judge that takes 100 ms per call at --api-nproc 32 (the runner
   with an empty cache), then the very same tasks again with all 25,000 verdicts in the cache; side by side in one
   run. The tasks are R-Bench's official ones for the 1,485 items plus the first 182 items once more (a second
   run's items: their repeats are numbered on, so every call is a distinct verdict), 25,007 calls in all.

    python benchmarks/judge_cache.py [--modes official efficient] [--out benchmarks/judge_cache.md]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rbench_judge_calls import deterministic_judge  # noqa: E402

from vlmeval_ext.core.judge import STORE_FILE, VerdictCache, VerdictStore, prompt_sha256, run_tasks  # noqa: E402
from vlmeval_ext.rbench.fixtures import llava15_items  # noqa: E402
from vlmeval_ext.rbench.score import make_tasks, plan_tasks  # noqa: E402
from vlmeval_ext.testing.fixtures import unpacked_fixtures  # noqa: E402
from vlmeval_ext.testing.loopback_server import LoopbackServer  # noqa: E402

RB_MARK = 'Please only provide the result in the following format: Score:'


def _judge_reply(body) -> str:
    text = body['messages'][-1]['content']
    text = text if isinstance(text, str) else ' '.join(p.get('text', '') for p in text)
    return deterministic_judge(text) if RB_MARK in text else 'ready'


def _serve(port_queue, stop_event, count_queue, port: int = 0) -> None:
    """The judge in its own process, as a real endpoint is; reports how many R-Bench requests it answered."""
    with LoopbackServer(port=port) as server:
        server.default = _judge_reply
        port_queue.put(server.port)
        stop_event.wait()
        count_queue.put(server.count(RB_MARK))


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def with_judge(fn, port: int = 0):
    """(fn(), judge requests it caused): fn runs against a fresh judge process (OPENAI_API_BASE points at it).
    Verdicts are cached per endpoint (host:port/path): runs that must share verdicts pass the same port."""
    ctx = mp.get_context('fork')
    ports, counts, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve, args=(ports, stop, counts, port), daemon=True)
    proc.start()
    try:
        os.environ['OPENAI_API_BASE'] = f'http://127.0.0.1:{ports.get(timeout=60)}/v1/chat/completions'
        result = fn()
    finally:
        stop.set()
    served = counts.get(timeout=60)
    proc.join(timeout=30)
    return result, served


def write_predictions(folder: Path, fixtures: Path, change_one: bool = False) -> Path:
    """The kit's predictions file for R-Bench-Full: the TSV columns without image, plus `prediction`."""
    import pandas as pd
    items = llava15_items(fixtures)
    rows = []
    for it in items:
        for variant, pred in (('ref', it.pred_ref), ('dis', it.pred_dis)):
            rows.append({'index': 2 * it.pair_id + (variant == 'dis'), 'pair_id': it.pair_id, 'variant': variant,
                         'name': it.name, 'question': it.question, 'choice': it.choice, 'answer': it.answer,
                         'type': it.type, 'distortion': it.distortion, 'strength': it.strength,
                         'prediction': pred})
    data = pd.DataFrame(rows)
    if change_one:
        row = data.index[(data['type'] == 'VQA') & (data['variant'] == 'dis')][0]
        data.loc[row, 'prediction'] = 'an answer nobody gave before'
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / 'llava_v1.5_7b_R-Bench-Full.tsv'
    data.to_csv(path, sep='\t', index=False)
    return path


def evaluate(path: Path, mode: str) -> tuple[dict, float]:
    from vlmeval_ext.rbench.dataset import RBenchFull
    start = time.perf_counter()
    RBenchFull.for_evaluation('R-Bench-Full').evaluate(str(path), model='loopback-judge', nproc=32,
                                                       judge_mode=mode, judge_backoff=0.05, preflight=False)
    wall = time.perf_counter() - start
    return json.loads(path.with_name(path.stem + '_score.json').read_text()), wall


def rerun_figures(fixtures: Path, mode: str, root: Path) -> list[str]:
    os.environ['VLMEVAL_EXT_CACHE'] = str(root / f'cache-{mode}')
    port = free_port()                    # the same judge endpoint for the three runs, as a user's would be
    first = write_predictions(root / mode / 'run1', fixtures)
    (s1, w1), n1 = with_judge(lambda: evaluate(first, mode), port)
    second = root / mode / 'run2' / first.name
    second.parent.mkdir(parents=True)
    shutil.copyfile(first, second)
    (s2, w2), n2 = with_judge(lambda: evaluate(second, mode), port)
    changed = write_predictions(root / mode / 'run3', fixtures, change_one=True)
    (s3, w3), n3 = with_judge(lambda: evaluate(changed, mode), port)
    same = s2['absolute'] == s1['absolute'] and s2['relative'] == s1['relative']
    csv1 = first.with_name(first.stem + '_scores.csv').read_text()
    csv2 = second.with_name(second.stem + '_scores.csv').read_text()
    return [f'| {mode} | first run | {n1} | {s1["judge"]["calls_made"]} | {s1["judge"]["calls_cached"]} | '
            f'{w1:.1f} | {s1["absolute"]["Overall"]:.4f} / {s1["relative"]["Overall"]:.4f} | |',
            f'| {mode} | same predictions, new work dir | {n2} | {s2["judge"]["calls_made"]} | '
            f'{s2["judge"]["calls_cached"]} | {w2:.1f} | {s2["absolute"]["Overall"]:.4f} / '
            f'{s2["relative"]["Overall"]:.4f} | tables {"identical" if same else "DIFFER"}, per-item scores '
            f'{"identical" if csv1 == csv2 else "DIFFER"} |',
            f'| {mode} | one VQA dis prediction changed | {n3} | {s3["judge"]["calls_made"]} | '
            f'{s3["judge"]["calls_cached"]} | {w3:.1f} | {s3["absolute"]["Overall"]:.4f} / '
            f'{s3["relative"]["Overall"]:.4f} | that item\'s dis and com only |']


def overhead_figures(fixtures: Path, root: Path, latency: float, nproc: int) -> list[str]:
    items = llava15_items(fixtures)
    extra = [replace(it, pair_id=10_000 + it.pair_id) for it in items[:182]]
    tasks, _ = plan_tasks([t for it in items + extra for t in make_tasks(it)])
    store_path = root / 'overhead' / STORE_FILE

    def judge(prompt: str) -> str:
        time.sleep(latency)
        return deterministic_judge(prompt)

    def run(label):
        cache = VerdictCache(store_path, 'sleep-judge', 'http://127.0.0.1:1/v1/chat/completions')
        planned, _ = plan_tasks([t for it in items + extra for t in make_tasks(it)])
        start = time.perf_counter()
        results, stats = run_tasks(planned, judge, cache, nproc=nproc, retries=0, backoff=0, desc=label)
        return time.perf_counter() - start, stats, results

    judging, s1, r1 = run('judging, empty cache')
    cached, s2, r2 = run('same tasks, all cached')
    assert s1.calls_made == s2.calls_cached and s2.calls_made == 0
    assert {k: v.score for k, v in r1.items()} == {k: v.score for k, v in r2.items()}
    # The lookups alone: one SELECT per verdict.
    store = VerdictStore(store_path)
    keys = [(prompt_sha256(t.prompt(c)), c) for t in tasks for c in t.step({}).need]
    start = time.perf_counter()
    found = sum(store.get('sleep-judge', '127.0.0.1:1/v1/chat/completions', sha, call) is not None
                for sha, call in keys)
    lookups = time.perf_counter() - start
    size_mb = sum(p.stat().st_size for p in store_path.parent.glob(STORE_FILE + '*')) / 1e6
    ideal = s1.calls_made * latency / nproc
    return [f'| judging {s1.calls_made} calls, empty cache (stores each verdict) | {judging:.1f} | 100 % | '
            f'ideal {ideal:.1f} s ({s1.calls_made} x {latency * 1000:.0f} ms / {nproc}) |',
            f'| the same tasks, {s2.calls_cached} verdicts cached (whole run: lookups + protocol steps) | '
            f'{cached:.2f} | {100 * cached / judging:.2f} % | 0 calls, same scores |',
            f'| the lookups alone ({found} of {len(keys)} first-round calls found) | {lookups:.2f} | '
            f'{100 * lookups / judging:.2f} % | {1e6 * lookups / len(keys):.0f} us per lookup; store '
            f'{store.count()} verdicts, {size_mb:.1f} MB |']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--fixtures', default=str(unpacked_fixtures() / 'rbench'))
    ap.add_argument('--modes', nargs='+', default=['efficient', 'official'])
    ap.add_argument('--latency', type=float, default=0.1)
    ap.add_argument('--nproc', type=int, default=32)
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    fixtures = Path(args.fixtures)
    os.environ.setdefault('OPENAI_API_KEY', 'sk-benchmark-fake')
    import vlmeval.dataset  # noqa: F401  (the kit, imported once before timing)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        overhead = overhead_figures(fixtures, root, args.latency, args.nproc)
        rerun = [line for mode in args.modes for line in rerun_figures(fixtures, mode, root)]
    lines = ['# Verdict cache: re-runs and lookup overhead', '',
             '## Re-runs through the kit\'s evaluate() (loopback judge in its own process, requests counted there)',
             '', 'LLaVA-1.5\'s real outputs on all 1,485 R-Bench items; `--api-nproc 32`; a fresh verdict cache per '
             'mode.', '',
             '| mode | run | judge requests | calls made | verdicts reused | wall (s) | Overall abs / rel | |',
             '|---|---|---|---|---|---|---|---|', *rerun, '',
             'Goals: the same predictions evaluated again in a new work dir make 0 judge calls with identical '
             'scores (rows "same predictions, new work dir": judge requests, tables, per-item scores); one '
             'prediction changed makes only that item\'s calls (rows "one VQA dis prediction changed": its dis and '
             'com verdicts, x5 repeats in official mode). Command below.', '',
             f'## Lookup overhead at 25,000 cached verdicts (judge {args.latency * 1000:.0f} ms per call, '
             f'--api-nproc {args.nproc})', '',
             '| run | wall (s) | share of the judging run | |', '|---|---|---|---|', *overhead, '',
             f'Goal: lookup overhead at 25,000 cached verdicts under 5 % of the judging time: see the second and '
             f'third rows. Command: `python benchmarks/judge_cache.py --modes {" ".join(args.modes)}` '
             f'({os.cpu_count()} CPUs, {time.time() - t0:.0f} s in all).']
    Path(args.out).write_text('\n'.join(lines) + '\n', encoding='utf-8')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
