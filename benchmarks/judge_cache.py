"""R-Bench judging through the kit path, and what the verdict cache saves: throughput, re-runs, one change.

LLaVA-1.5's real outputs on all 1,485 R-Bench items (2,970 prediction rows) evaluated by R-Bench-Full's evaluate
(the plugin class: the kit's build_judge behind CachedJudge, the kit's track_progress_rich), with the loopback
server in its own process as the judge (the deterministic prompt-only judge of rbench_judge_calls.py, `--latency`
seconds per reply), `--api-nproc` calls at once. Per mode, with a fresh verdict cache:

1. first run: every call paid; judge requests counted at the server, calls/s against the ideal nproc / latency;
2. the same predictions in a new work dir: 0 calls expected, identical tables and per-item scores;
3. one VQA prediction of the distorted image changed: only that item's dis and com calls expected.

    python benchmarks/judge_cache.py [--modes efficient official] [--latency 0.1] [--nproc 32]
                                     [--out benchmarks/judge_cache.md]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'tests'))

from rbench_judge_calls import deterministic_judge  # noqa: E402

from helpers.fixtures import llava15_items, unpacked_fixtures  # noqa: E402
from helpers.loopback_server import LoopbackServer  # noqa: E402

RB_MARK = 'Please only provide the result in the following format: Score:'


def _judge_reply(body) -> str:
    text = body['messages'][-1]['content']
    text = text if isinstance(text, str) else ' '.join(p.get('text', '') for p in text)
    return deterministic_judge(text) if RB_MARK in text else 'ready'


def _serve(port_queue, stop_event, count_queue, port: int, latency: float) -> None:
    """The judge in its own process, as a real endpoint is; reports how many R-Bench requests it answered."""
    with LoopbackServer(port=port) as server:
        server.default = _judge_reply
        server.latency = latency
        port_queue.put(server.port)
        stop_event.wait()
        count_queue.put(server.count(RB_MARK))


def free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def with_judge(fn, port: int, latency: float):
    """(fn(), judge requests it caused) against a fresh judge process on `port` (verdicts are cached per
    endpoint: runs that must share verdicts use the same port)."""
    ctx = mp.get_context('fork')
    ports, counts, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve, args=(ports, stop, counts, port, latency), daemon=True)
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
    rows = []
    for it in llava15_items(fixtures):
        for variant in ('ref', 'dis'):
            rows.append({'index': 2 * it['pair_id'] + (variant == 'dis'), 'pair_id': it['pair_id'],
                         'variant': variant, **{k: it[k] for k in ('name', 'question', 'choice', 'answer', 'type',
                                                                   'distortion', 'strength')},
                         'prediction': it[f'pred_{variant}']})
    data = pd.DataFrame(rows)
    if change_one:
        row = data.index[(data['type'] == 'VQA') & (data['variant'] == 'dis')][0]
        data.loc[row, 'prediction'] = 'an answer nobody gave before'
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / 'llava_v1.5_7b_R-Bench-Full.tsv'
    data.to_csv(path, sep='\t', index=False)
    return path


def evaluate(path: Path, mode: str, nproc: int) -> tuple[dict, float]:
    from vlmeval_ext.registry import plugin_class
    start = time.perf_counter()
    # efficient mode draws the captions it judges with a seed: a fixed one, so the runs ask the same prompts
    seed = {'caption_seed': 2024} if mode == 'efficient' else {}
    plugin_class('R-Bench-Full').for_predictions('R-Bench-Full', str(path)).evaluate(
        str(path), model='loopback-judge', nproc=nproc, judge_mode=mode, **seed)
    wall = time.perf_counter() - start
    tag = '_efficient' if mode == 'efficient' else ''
    return json.loads(path.with_name(f'{path.stem}{tag}_score.json').read_text()), wall


def mode_rows(fixtures: Path, mode: str, root: Path, latency: float, nproc: int) -> list[str]:
    os.environ['VLMEVAL_EXT_CACHE'] = str(root / f'cache-{mode}')
    port = free_port()                    # the same judge endpoint for the three runs, as a user's would be
    tag = '_efficient' if mode == 'efficient' else ''
    first = write_predictions(root / mode / 'run1', fixtures)
    (s1, w1), n1 = with_judge(lambda: evaluate(first, mode, nproc), port, latency)
    second = root / mode / 'run2' / first.name
    second.parent.mkdir(parents=True)
    shutil.copyfile(first, second)
    (s2, w2), n2 = with_judge(lambda: evaluate(second, mode, nproc), port, latency)
    (s4, w4), n4 = with_judge(lambda: evaluate(second, mode, nproc), port, latency)
    changed = write_predictions(root / mode / 'run3', fixtures, change_one=True)
    (s3, w3), n3 = with_judge(lambda: evaluate(changed, mode, nproc), port, latency)
    same = s2['absolute'] == s1['absolute'] and s2['relative'] == s1['relative']
    items1 = first.with_name(f'{first.stem}{tag}_scores.csv').read_text()
    items2 = second.with_name(f'{second.stem}{tag}_scores.csv').read_text()
    ideal = nproc / latency

    def row(label, score, wall, served, note):
        calls = score['judge_calls']
        rate = f'{calls["made"] / wall:.0f} ({100 * calls["made"] / wall / ideal:.0f} %)' if calls['made'] > 50 \
            else '-'
        return (f'| {mode} | {label} | {served} | {calls["made"]} | {calls["reused_from_cache"]} | {wall:.1f} | '
                f'{rate} | {score["absolute"]["Overall"]:.4f} / {score["relative"]["Overall"]:.4f} | {note} |')
    lookup = lookup_line(mode, w1)
    return [row('first run', s1, w1, n1, ''),
            row('same predictions, new work dir', s2, w2, n2,
                f'tables {"identical" if same else "DIFFER"}, per-item scores '
                f'{"identical" if items1 == items2 else "DIFFER"}; {100 * w2 / w1:.1f} % of the first run\'s time'),
            row('same work dir again (every verdict in the progress file: no judging at all)', s4, w4, n4,
                f'the floor: the new work dir\'s rerun takes {w2 / w4:.2f}x this'),
            row('one VQA dis prediction changed', s3, w3, n3, "that item's dis and com only"), lookup]


def lookup_line(mode: str, judging_wall: float) -> str:
    """Every stored verdict looked up once by its key (one SELECT each), timed against the first run's wall."""
    from vlmeval_ext.judging import STORE_FILE, VerdictStore, cache_dir
    store = VerdictStore(cache_dir() / STORE_FILE)
    keys = store._db.execute('SELECT judge, endpoint, params, prompt_sha256, slot FROM verdicts').fetchall()
    start = time.perf_counter()
    found = sum(store.get(tuple(k)) is not None for k in keys)
    wall = time.perf_counter() - start
    size = sum(p.stat().st_size for p in store.path.parent.glob(store.path.name + '*')) / 1e6
    store.close()
    return (f'| {mode} | the lookups alone ({found} of {len(keys)} stored verdicts found) | - | 0 | {found} | '
            f'{wall:.2f} | - | - | {1e6 * wall / max(len(keys), 1):.0f} us per lookup, '
            f'{100 * wall / judging_wall:.1f} % of the first run; store {size:.1f} MB |')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--fixtures', default=None, help='default: tests/fixtures unpacked')
    ap.add_argument('--modes', nargs='+', default=['efficient', 'official'])
    ap.add_argument('--latency', type=float, default=0.1)
    ap.add_argument('--nproc', type=int, default=32)
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    fixtures = Path(args.fixtures) if args.fixtures else unpacked_fixtures() / 'rbench'
    os.environ.setdefault('OPENAI_API_KEY', 'sk-benchmark-fake')
    os.environ['LMUData'] = tempfile.mkdtemp(prefix='lmu-')
    import vlmeval.dataset  # noqa: F401  (the kit, imported once before timing)
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [line for mode in args.modes for line in mode_rows(fixtures, mode, Path(tmp), args.latency,
                                                                   args.nproc)]
    lines = ['# R-Bench judging: throughput and the verdict cache', '',
             f'LLaVA-1.5\'s real outputs on all 1,485 R-Bench items, evaluated by R-Bench-Full\'s evaluate (the '
             f'kit\'s build_judge behind CachedJudge, the kit\'s track_progress_rich); the judge is the loopback '
             f'server in its own process answering after {args.latency * 1000:.0f} ms, `--api-nproc {args.nproc}` '
             f'(ideal {args.nproc / args.latency:.0f} calls/s); a fresh verdict cache per mode. Judge requests are '
             f'counted at the server.', '',
             '| mode | run | judge requests | calls made | verdicts reused | wall (s) | calls/s (% of ideal) | '
             'Overall abs / rel | |',
             '|---|---|---|---|---|---|---|---|---|', *rows, '',
             'Goals: the same predictions evaluated again in a new work dir make 0 judge calls with identical '
             'scores; one prediction changed makes only that item\'s calls (its dis and com verdicts; x5 repeats in '
             'official mode, until the majority is decided in efficient mode). The client (kit judge, cache, thread '
             'pool) and the judge server share this machine\'s CPUs, so calls/s is a floor for a remote judge.', '',
             'A re-run in a new work dir (every verdict cached, no progress file): the prompts whose every '
             'verdict is cached are settled from the cache before the kit\'s judging loop and written to the '
             'progress file in one write (`RBenchFull.settle_cached_prompts`); the kit\'s '
             '`track_progress_rich(..., save=...)` rewrites its whole progress pickle after every finished item, '
             'so handing it every cached prompt made such a re-run grow with the square of the items (before: '
             'efficient 6.5 s, official 32.1 s, 5.4 of 7.1 s in 3,505 dumps of that file under cProfile). The '
             '"lookups alone" rows are the cache\'s own share.', '',
             f'Command: `python benchmarks/judge_cache.py --modes {" ".join(args.modes)} --latency {args.latency} '
             f'--nproc {args.nproc}` ({os.cpu_count()} CPUs, Python {platform.python_version()}, '
             f'{time.time() - start:.0f} s in all).']
    Path(args.out).write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
