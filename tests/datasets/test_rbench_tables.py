"""Robustness tables (the dataset's rbench_table / robustness_table), the plots and the `report` CLI, on the
official GPT-3.5 verdicts."""
import csv
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from vlmeval_ext.dataset.utils.rbench_full import rbench_table, robustness_table
from vlmeval_ext.cli.rbench import main as cli_main
from vlmeval_ext.cli.rbench import paper_tables, read_scores_csv


@pytest.fixture(scope='module')
def official_rows(fixtures_dir):
    """Per-item rows from the official GPT-3.5 verdicts (score_dis); ref/com derived so relative is testable."""
    df = pd.read_csv(fixtures_dir / 'rbench' / 'Result_dis_llava15.csv')
    rows = []
    for i, r in df.iterrows():
        rows.append({'name': r['name'], 'type': r['type'], 'distortion': int(r['distortion']),
                     'strength': int(r['strength']), 'score_dis': float(r['result']),
                     'score_ref': 1.0 if i % 3 else 0.5, 'score_com': float(r['result'])})
    return rows


def test_absolute_matches_notebook_arithmetic(official_rows, fixtures_dir):
    df = pd.read_csv(fixtures_dir / 'rbench' / 'Result_dis_llava15.csv')
    table = rbench_table(official_rows)
    # the notebook's own index lists (cell "Show final result")
    assert table['absolute']['MCQ'] == pytest.approx(df[df.type == 'MCQ'].result.mean())
    assert table['absolute']['high'] == pytest.approx(df[df.strength == 3].result.mean())
    assert table['absolute']['Analog'] == pytest.approx(df[df.distortion.isin([9, 10, 11, 12, 13])].result.mean())
    assert table['absolute']['Chrominance'] == pytest.approx(
        df[df.distortion.isin([14, 23, 24, 29, 30, 32, 33])].result.mean())
    assert table['absolute']['CAP-mid'] == pytest.approx(df[(df.type == 'CAP') & (df.strength == 2)].result.mean())
    assert table['absolute']['Overall'] == pytest.approx(df.result.mean())
    ref = np.array([r['score_ref'] for r in official_rows])
    assert table['relative']['Overall'] == pytest.approx(float(np.mean(df.result.values * ref)))


def test_failed_scores_are_excluded_not_zero(official_rows):
    rows = [dict(r) for r in official_rows]
    base = rbench_table(rows)['absolute']['MCQ']
    mcq = [r for r in rows if r['type'] == 'MCQ']
    for r in mcq[:50]:
        r['score_dis'] = None
    expected = np.mean([r['score_dis'] for r in mcq[50:]])
    got = rbench_table(rows)['absolute']['MCQ']
    assert got == pytest.approx(expected) and got != pytest.approx(base * 445 / 495)


def test_reusable_for_other_metrics():
    rows = [{'distortion': d, 'strength': s, 'acc': float(d % 2)} for d in range(1, 34) for s in (1, 2, 3)]
    table = robustness_table(rows, {'acc': lambda r: r['acc']}, task_field=None)
    assert 'MCQ' not in table['acc'] and table['acc']['Blur'] == pytest.approx(2 / 3)  # 1, 5 odd; 28 even
    assert table['acc']['Overall'] == pytest.approx(17 / 33)


def test_plots_and_the_report_cli(official_rows, tmp_path, capsys):
    from vlmeval_ext.plugin.rbench import REPORT as RBENCH
    rows = [dict(r) for r in official_rows]
    rows[0]['score_com'] = None
    scores_csv = tmp_path / 'LLaVA_R-Bench-Full_scores.csv'
    pd.DataFrame(rows).to_csv(scores_csv, index=False)
    back = read_scores_csv(scores_csv)
    assert back[0]['score_com'] is None and len(back) == 1485
    table = rbench_table(back)
    assert cli_main(['report', str(scores_csv)]) == 0
    printed = capsys.readouterr().out
    out = list(csv.DictReader(printed.splitlines()))
    # what evaluate leaves beside the predictions before the plugin adds its intervals and plots
    (tmp_path / 'LLaVA_R-Bench-Full_robustness.csv').write_text(printed, encoding='utf-8')
    assert [r['dimension'] for r in out][:4] == ['Overall', 'MCQ', 'VQA', 'CAP'] and len(out) == 30
    assert float(out[0]['absolute (0-1)']) == pytest.approx(table['absolute']['Overall'], abs=5e-5)
    assert float(out[0]['relative (0-1)']) == pytest.approx(table['relative']['Overall'], abs=5e-5)
    score = {**table, 'judge': {'name': 'gpt-3.5-turbo', 'mode': 'official'}, 'counts': {'items': 1485,
                                                                                          'scored': 1484}}
    RBENCH.write_extras('R-Bench-Full', str(tmp_path / 'LLaVA_R-Bench-Full.xlsx'), score)
    for png in ('_radar.png', '_task_strength.png'):
        assert (tmp_path / f'LLaVA_R-Bench-Full{png}').stat().st_size > 10_000
    tables = paper_tables(table, 'LLaVA1.5')
    assert '| Absolute | MCQ low | MCQ mid | MCQ high | VQA low' in tables and '| Relative |' in tables


def test_report_cli_rejects_bad_file(tmp_path):
    bad = tmp_path / 's.csv'
    bad.write_text('name,type,distortion,strength,score_ref,score_dis,score_com\nx,MCQ,40,1,1,1,1\n')
    proc = subprocess.run([sys.executable, '-m', 'vlmeval_ext.cli.rbench', 'report', str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and 'line 2' in proc.stderr and 'distortion 40' in proc.stderr
