"""The report page at full size: its size, the time to build it, and the time to first render and to filter in a
headless Chromium.

Full-size work dir in the evaluations' own formats: the demo splits of GRAB and R-Bench are evaluated by
`vlmeval-ext eval` (the answers as predictions; R-Bench with `--judge offline`), then their predictions, per-item
files and image cells are repeated under new indices up to the benchmarks' full sizes: GRAB 2,170 items, R-Bench
1,485 pairs (2,970 predictions), every row with its own embedded thumbnail(s). The dataset TSVs (index + image)
go to a temporary $LMUData, where the report finds the images.

    python benchmarks/report_size.py [--out benchmarks/report_size.md]    (needs Chromium and Playwright, as the
                                                                           test suite installs them)
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / 'vlmeval_ext' / 'demo'
FULL = {'GRAB': ('GRAB_DEMO', 2170, []), 'R-Bench-Full': ('R-Bench-Full_DEMO', 1485, ['--judge', 'offline'])}


def read(path) -> pd.DataFrame:
    path = Path(path)
    return pd.read_csv(path, sep='\t' if path.suffix == '.tsv' else ',', dtype=str, keep_default_na=False)


def write(frame: pd.DataFrame, path) -> None:
    path = Path(path)
    frame.to_csv(path, sep='\t' if path.suffix == '.tsv' else ',', index=False)


def evaluate_demo(work: Path, demo: str, extra: list, env: dict) -> Path:
    data = read(DEMO / f'{demo}.tsv').drop(columns=['image'])
    data['prediction'] = data['answer']
    pred = work / f'M_{demo}.tsv'
    write(data, pred)
    subprocess.run([sys.executable, '-m', 'vlmeval_ext', 'eval', '--data', demo, '--pred', str(pred), *extra],
                   env=env, check=True, capture_output=True)
    return pred


def tiled(frame: pd.DataFrame, copies: int, steps: dict) -> pd.DataFrame:
    """`copies` copies of `frame`, each column of `steps` shifted by its step per copy."""
    parts = []
    for k in range(copies):
        part = frame.copy()
        for key, step in steps.items():
            part[key] = [str(int(v) + k * step) for v in part[key]]
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def full_size(demo_dir: Path, full_dir: Path, lmu: Path) -> None:
    # GRAB: predictions, _items.tsv and the image cells, one row per item
    demo, n, _ = FULL['GRAB']
    pred, items, images = read(demo_dir / f'M_{demo}.tsv'), read(demo_dir / f'M_{demo}_items.tsv'), read(
        DEMO / f'{demo}.tsv')[['index', 'image']]
    step = {'index': max(int(v) for v in images['index']) + 1}
    copies = -(-n // len(pred))
    write(tiled(pred, copies, step).head(n), full_dir / 'M_GRAB.tsv')
    write(tiled(items, copies, step).head(n), full_dir / 'M_GRAB_items.tsv')
    write(tiled(images, copies, step).head(n), lmu / 'GRAB.tsv')
    shutil.copyfile(demo_dir / f'M_{demo}_score.json', full_dir / 'M_GRAB_score.json')
    # R-Bench: two predictions per pair (ref, dis), one _scores.csv row per pair
    demo, n, _ = FULL['R-Bench-Full']
    pred, scores = read(demo_dir / f'M_{demo}.tsv'), read(demo_dir / f'M_{demo}_scores.csv')
    images = read(DEMO / f'{demo}.tsv')[['index', 'image']]
    pair_step = max(int(v) for v in pred['pair_id']) + 1
    index_step = max(int(v) for v in images['index']) + 1
    copies = -(-n // len(scores))
    full_scores = tiled(scores, copies, {'pair_id': pair_step}).head(n)
    full_pred = tiled(pred, copies, {'pair_id': pair_step, 'index': index_step})
    full_pred = full_pred[full_pred['pair_id'].isin(set(full_scores['pair_id']))]
    write(full_pred, full_dir / 'M_R-Bench-Full.tsv')
    write(full_scores, full_dir / 'M_R-Bench-Full_scores.csv')
    write(tiled(images, copies, {'index': index_step}), lmu / 'R-Bench-Full.tsv')
    shutil.copyfile(demo_dir / f'M_{demo}_score.json', full_dir / 'M_R-Bench-Full_score.json')


def browser_times(html: Path) -> dict:
    from playwright.sync_api import sync_playwright
    chromium = next(shutil.which(n) for n in ('chromium', 'chromium-browser', 'google-chrome') if shutil.which(n))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=['--no-sandbox'])
        page = browser.new_page(viewport={'width': 1400, 'height': 900})
        start = time.perf_counter()
        page.goto(html.as_uri())
        page.wait_for_selector('section.items tr.item')
        first = time.perf_counter() - start
        out = {'first render (s)': first}
        sections = page.locator('section.items')
        for i in range(sections.count()):
            section = sections.nth(i)
            title = section.locator('h2').inner_text()
            total = int(section.locator('.total').inner_text())
            select = section.locator('select[data-filter="task"]')
            value = select.locator('option').nth(1).get_attribute('value')
            # the page filters and renders inside the input event; the next animation frame comes after that
            frame = '() => new Promise(done => requestAnimationFrame(() => done()))'
            out[f'{title}: items'] = total
            start = time.perf_counter()
            select.select_option(value)
            page.evaluate(frame)
            out[f'{title}: filter by task (s)'] = time.perf_counter() - start
            select.select_option('')
            start = time.perf_counter()
            section.locator('input[data-search]').fill('the')
            page.evaluate(frame)
            out[f'{title}: search "the" (s)'] = time.perf_counter() - start
            assert section.locator('.shown').inner_text().endswith('matching')
        browser.close()
    return out


def full_work_dir(tmp: Path) -> dict:
    """tmp/full: model M's full-size GRAB and R-Bench results, their images in tmp/lmu; the environment to run
    vlmeval-ext in (its LMUData that folder)."""
    env = dict(os.environ, LMUData=str(tmp / 'lmu-demo'), VLMEVAL_EXT_CACHE=str(tmp / 'cache'),
               HF_HUB_OFFLINE='1', MPLBACKEND='Agg')
    (tmp / 'lmu-demo').mkdir()
    demo_dir, full_dir, lmu = tmp / 'demo' / 'M', tmp / 'full' / 'M', tmp / 'lmu'
    for folder in (demo_dir, full_dir, lmu):
        folder.mkdir(parents=True)
    for demo, _, extra in FULL.values():
        evaluate_demo(demo_dir, demo, extra, env)
    full_size(demo_dir, full_dir, lmu)
    env['LMUData'] = str(lmu)
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default=str(Path(__file__).with_suffix('.md')))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = full_work_dir(tmp)
        start = time.perf_counter()
        subprocess.run([sys.executable, '-m', 'vlmeval_ext', 'report', str(tmp / 'full')], env=env, check=True,
                       capture_output=True)
        build = time.perf_counter() - start
        html = tmp / 'full' / 'report.html'
        size = html.stat().st_size / 1e6
        times = browser_times(html)
    rows = [f'| report build (`vlmeval-ext report`, thumbnails included) | {build:.1f} s |',
            f'| page size | {size:.1f} MB |',
            *(f'| {k} | {v:.2f} |' if isinstance(v, float) else f'| {k} | {v} |' for k, v in times.items())]
    lines = ['# The report page at full size', '', __doc__.split('\n\n')[1].replace('\n', ' '), '',
             '| measure | value |', '|---|---|', *rows, '',
             'Goals: full R-Bench and full GRAB pages under 25 MB with thumbnails; they open and filter without '
             'freezing (the page shows 100 rows at a time; filters and search run over the rows held as JSON).',
             '', f'Command: `python benchmarks/report_size.py` ({os.cpu_count()} CPUs, Python '
             f'{platform.python_version()}, headless Chromium).']
    Path(args.out).write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
