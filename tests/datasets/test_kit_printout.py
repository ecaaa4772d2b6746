"""What the kit prints under "Evaluation Results" and what `vlmeval-ext eval` prints: evaluate returns one labelled
table (rows and columns named, units in the column names), printed once. The kit prints a returned DataFrame with
`tabulate(df)` (no headers; transposed when wider than tall): as_kit_prints below does the same."""
from __future__ import annotations

import pandas as pd
import pytest

from vlmeval_ext.cli.main import main
from vlmeval_ext.dataset.utils.remi import result_table
from vlmeval_ext.registry import benchmark_of, plugin_class


def as_kit_prints(table: pd.DataFrame) -> str:
    """What the kit's run.py logs for a returned DataFrame (vlmeval/run.py: transposed when wider than tall, then
    tabulate without headers)."""
    from tabulate import tabulate
    if len(table) < len(table.columns):
        table = table.T
    return tabulate(table)


def _predictions(tmp_path, dataset: str) -> str:
    data = pd.read_csv(benchmark_of(dataset).demo_file(dataset), sep='\t', dtype=str, keep_default_na=False)
    data = data.drop(columns=[c for c in ('image', 'image_path') if c in data])
    data['prediction'] = data['answer']
    path = tmp_path / f'mymodel_{dataset}.tsv'
    data.to_csv(path, sep='\t', index=False)
    return str(path)


CASES = {
    'GRAB_DEMO': ([], ['official', 'normalized'], ['Overall (%)', 'properties (%)', 'function (%)', 'series (%)',
                                                   'transform (%)', 'scored (items)']),
    'ReMI_DEMO': ([], ['official', 'lenient', 'naive baseline', 'ERP'], ['Overall (%)', 'EmojiAlgebra (%)']),
    'R-Bench-Full_DEMO': (['--judge', 'offline'], ['absolute', 'relative'],
                          ['Overall (0-1)', 'MCQ low (0-1)', 'CAP high (0-1)']),
}


@pytest.mark.parametrize('dataset', list(CASES))
def test_evaluate_returns_a_labelled_table_the_kit_prints_with_every_label(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv('LMUData', str(tmp_path))
    extra, rows, columns = CASES[dataset]
    pred = _predictions(tmp_path, dataset)
    judge = {'model': 'offline'} if extra else {}
    evaluator = plugin_class(dataset).for_predictions(dataset, pred)
    table = evaluator.evaluate(pred, **judge)
    assert isinstance(table, pd.DataFrame)
    assert list(table.iloc[:, 0]) == rows
    for column in columns:
        assert column in table.columns, (column, list(table.columns))
    for column in table.columns[1:]:
        assert column.endswith(')'), f'{dataset}: column {column!r} names no unit'
    printed = as_kit_prints(table)
    for label in [*rows, *columns]:
        assert label in printed, (label, printed)


@pytest.mark.parametrize('dataset', list(CASES))
def test_vlmeval_ext_eval_prints_the_table_once(dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('LMUData', str(tmp_path))
    extra, rows, columns = CASES[dataset]
    pred = _predictions(tmp_path, dataset)
    with pytest.raises(SystemExit) as done:
        main(['eval', '--data', dataset, '--pred', pred, *extra])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.count(columns[0]) == 1, out          # one table, printed once
    header = next(line for line in out.splitlines() if columns[0] in line)
    assert header.split()[0] == table_title(dataset)


def table_title(dataset: str) -> str:
    return {'GRAB_DEMO': 'GRAB', 'ReMI_DEMO': 'ReMI', 'R-Bench-Full_DEMO': 'R-Bench'}[dataset]


def test_a_table_taller_than_wide_becomes_labelled_values():
    """tabulate would print a tall table untransposed, with no headers: each value then carries its labels."""
    block = {'Overall': 10.0, 'task': {'Clocks': 5.0}}
    summary = {'accuracy': block, 'lenient': {'accuracy': block}, 'naive_baseline': block, 'erp': block,
               'input_mode': 'interleaved'}
    printed = as_kit_prints(result_table(summary))
    assert 'official: Overall (%)' in printed and 'ERP: Clocks (%)' in printed


def test_the_kits_run_summary_reports_the_headline_with_its_unit(tmp_path, monkeypatch):
    """The kit flattens the returned table for its run summary and asks the dataset class for the primary metric:
    ours is the headline (GRAB official Overall, ReMI official Overall, R-Bench absolute Overall), never an
    alternative scoring that happens to sort first."""
    from vlmeval.smp.status_report import flatten_summary_metrics
    monkeypatch.setenv('LMUData', str(tmp_path))
    import json
    expected = {'GRAB_DEMO': ('official Overall (%)', ('official', 'Overall')),
                'ReMI_DEMO': ('official Overall (%)', ('accuracy', 'Overall')),
                'R-Bench-Full_DEMO': ('absolute robustness Overall (0-1)', ('absolute', 'Overall')),
                'RoCOCO-MCQ-same_concept_DEMO': ('accuracy (%)', ('accuracy',))}
    for dataset, (name, path) in expected.items():
        pred = _predictions(tmp_path, dataset)
        evaluator = plugin_class(dataset).for_predictions(dataset, pred)
        table = evaluator.evaluate(pred, **({'model': 'offline'} if dataset.startswith('R-Bench') else {}))
        score = json.loads(open(pred.replace('.tsv', '_score.json')).read())
        for key in path:
            score = score[key]
        metrics = flatten_summary_metrics(table)
        assert evaluator.report_primary_metric(metrics) == {name: pytest.approx(score, abs=0.051)}, dataset
        # named, not taken by place: the same metrics in another order give the same headline
        assert evaluator.report_primary_metric(dict(reversed(list(metrics.items())))) == \
            evaluator.report_primary_metric(metrics)


def test_retrieval_names_r_at_1_of_this_run_or_of_the_seeds_mean():
    from vlmeval_ext.dataset.rococo_retrieval import RoCOCORetrieval
    single = {'RoCOCO-I2T-clean=this run|R@5 (%)': 80.0, 'RoCOCO-I2T-clean=this run|R@1 (%)': 41.5}
    assert RoCOCORetrieval.report_primary_metric(single) == {'R@1 (%)': 41.5}
    mixed = {'RoCOCO-T2I-mix=1|R@1 (%)': 30.0, 'RoCOCO-T2I-mix=mean|R@1 (%)': 31.0}
    assert RoCOCORetrieval.report_primary_metric(mixed) == {'R@1 (%)': 31.0}
