"""docs/OUTPUTS.md names every column each evaluation writes and every top-level key of its _score.json (checked
on the real files the evaluators write for the demo splits), and the README's judge-call figures are the measured
ones of benchmarks/rbench_judge_calls.md."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from vlmeval_ext.registry import benchmark_of, plugin_class
from helpers.kit_run import REPO_ROOT

DOC = (REPO_ROOT / 'docs' / 'OUTPUTS.md').read_text(encoding='utf-8')
CASES = {'GRAB_DEMO': ({}, ['_items.tsv', '_acc.csv']), 'ReMI_DEMO': ({}, ['_items.tsv', '_tasks.csv']),
         'R-Bench-Full_DEMO': ({'model': 'offline'}, ['_scores.csv', '_robustness.csv'])}


def _section(dataset: str) -> str:
    title = {'GRAB_DEMO': '## GRAB', 'ReMI_DEMO': '## ReMI', 'R-Bench-Full_DEMO': '## R-Bench-Full'}[dataset]
    return DOC.split(title, 1)[1].split('\n## ', 1)[0]


@pytest.mark.parametrize('dataset', list(CASES))
def test_every_column_and_score_key_is_documented(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv('LMUData', str(tmp_path))
    judge, files = CASES[dataset]
    data = pd.read_csv(benchmark_of(dataset).demo_file(dataset), sep='\t', dtype=str,
                       keep_default_na=False).drop(columns=['image'])
    data['prediction'] = data['answer']
    pred = tmp_path / f'M_{dataset}.tsv'
    data.to_csv(pred, sep='\t', index=False)
    plugin_class(dataset).for_predictions(dataset, pred).evaluate(str(pred), **judge)
    section = _section(dataset)
    for suffix in files:
        path = tmp_path / f'M_{dataset}{suffix}'
        columns = pd.read_csv(path, sep='\t' if suffix.endswith('.tsv') else ',', nrows=0).columns
        for column in columns:
            assert f'`{column}`' in section, f'{suffix}: column {column!r} is not in docs/OUTPUTS.md'
    score = json.loads((tmp_path / f'M_{dataset}_score.json').read_text())
    every = DOC.split('## Files every benchmark writes', 1)[1].split('\n## ', 1)[0]   # what the plugin adds
    for key in score:
        assert f'`{key}`' in section or f'`{key}`' in every, f'_score.json key {key!r} is not in docs/OUTPUTS.md'


def test_readme_judge_call_figures_are_the_measured_ones():
    measured = (REPO_ROOT / 'benchmarks' / 'rbench_judge_calls.md').read_text()
    official = re.search(r'\| official \| (\d+) \|', measured).group(1)
    efficient = re.search(r"caption_sample = 1, drawn per run \(the dataset's efficient mode[^|]*\| (\d+) \|",
                          measured).group(1)
    readme = (REPO_ROOT / 'README.md').read_text()
    assert f'{int(official):,}' in readme and f'{int(efficient):,}' in readme
