"""GRAB aggregation: item-weighted Overall, breakdowns, the paper's 21.7 check, and the files GRAB.evaluate writes."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from vlmeval_ext.spec import load_spec
from vlmeval_ext.dataset.utils.grab import acc_table, summarize


def item_weighted_overall(per_task_percent, task_sizes):
    """The Overall of per-task percentages weighted by the tasks' item counts."""
    if set(per_task_percent) != set(task_sizes):
        raise ValueError(f'different tasks: {sorted(per_task_percent)} vs {sorted(task_sizes)}')
    total = sum(task_sizes.values())
    return sum(per_task_percent[t] * n for t, n in task_sizes.items()) / total


def evaluate(items, hits_per_task, tmp_path, judge=None):
    """The kit-dialect GRAB.evaluate on a predictions file of the real questions: the first
    `hits_per_task[task]` items of each task answered right, the others wrong."""
    from vlmeval_ext.dataset.grab import GRAB
    seen, rows = {}, []
    for i, item in enumerate(items):
        k = seen[item['task']] = seen.get(item['task'], 0) + 1
        rows.append({'index': i, 'question': item['question'], 'answer': item['answer'], 'task': item['task'],
                     'category': item['category'], 'complexity': item['complexity'],
                     'prediction': item['answer'] if k <= hits_per_task[item['task']] else 'no idea'})
    path = tmp_path / 'Model_GRAB.tsv'
    pd.DataFrame(rows).to_csv(path, sep='\t', index=False)
    kwargs = {'model': judge} if judge else {}
    return object.__new__(GRAB).evaluate(str(path), **kwargs), path


@pytest.fixture(scope='module')
def grab_items(fixtures_dir):
    with open(fixtures_dir / 'grab' / 'grab.json', encoding='utf-8') as f:
        return list(json.load(f).values())


def _rows(items, hits_per_task, with_llm=False):
    """Score rows where the first `hits_per_task[task]` items of each task are correct."""
    seen = {}
    rows = []
    for item in items:
        k = seen[item['task']] = seen.get(item['task'], 0) + 1
        row = {key: item[key] for key in ('pid', 'task', 'category', 'complexity')}
        row['official'] = 1 if k <= hits_per_task[item['task']] else 0
        row['normalized'] = row['official']
        if with_llm:
            row['llm_extracted'] = row['official']
        rows.append(row)
    return rows


def test_task_sizes_in_spec_match_the_real_set(grab_items):
    spec = load_spec('grab')
    sizes = pd.Series([i['task'] for i in grab_items]).value_counts().to_dict()
    assert sizes == spec['tasks']
    assert sum(spec['tasks'].values()) == spec['sources']['expected']['n_items'] == len(grab_items)


def test_claude_35_sonnet_per_task_numbers_combine_to_the_papers_overall():
    spec = load_spec('grab')
    published = load_spec('published/grab')['tables']
    row = next(r for r in published['tasks']['rows'] if r['model'] == 'Claude 3.5 Sonnet')
    per_task = dict(zip(spec['tasks'], row['values']))
    assert per_task == {'properties': 41.8, 'function': 15.5, 'series': 11.0, 'transform': 10.0}
    overall = item_weighted_overall(per_task, spec['tasks'])
    paper = next(r for r in published['overall']['rows'] if r['model'] == 'Claude 3.5 Sonnet')['values'][0]
    assert round(overall, 1) == paper == 21.7
    # The unweighted mean of tasks would be 19.6: the paper's Overall is item-weighted.
    assert round(sum(per_task.values()) / 4, 1) != 21.7


def test_item_weighted_overall_rejects_mismatched_tasks():
    with pytest.raises(ValueError, match='different tasks'):
        item_weighted_overall({'properties': 1.0}, {'properties': 10, 'series': 5})


def test_summary_reproduces_claude_breakdown_from_item_scores(grab_items):
    # 276/660, 110/710, 54/490, 31/310 correct: the published per-task rounding and 21.7 overall.
    rows = _rows(grab_items, {'properties': 276, 'function': 110, 'series': 54, 'transform': 31})
    summary = summarize(rows, 'official')
    assert {t: round(v, 1) for t, v in summary['task'].items()} == {
        'properties': 41.8, 'function': 15.5, 'series': 11.0, 'transform': 10.0}
    assert round(summary['Overall'], 1) == 21.7
    assert summary['counts'] == {'items': 2170, 'scored': 2170, 'not_scored': 0}
    assert set(summary['category']) == set(load_spec('grab')['categories'])
    assert list(summary['complexity']) == [str(c) for c in range(10)]
    assert set(summary['task x complexity']['properties']) == {'0'}
    assert list(summary['task x complexity']['function']) == [str(c) for c in range(10)]
    # Properties items are all complexity 0: its 276 hits dominate complexity 0.
    n0 = sum(1 for i in grab_items if i['complexity'] == 0)
    hits0 = sum(r['official'] for r in rows if r['complexity'] == 0)
    assert summary['complexity']['0'] == pytest.approx(100 * hits0 / n0, abs=1e-3)


def test_failed_items_are_excluded_and_counted():
    rows = [{'task': 'series', 'category': 'Range', 'complexity': 1, 'official': v} for v in (1, 0, None, None)]
    summary = summarize(rows, 'official')
    assert summary['Overall'] == 50.0
    assert summary['counts'] == {'items': 4, 'scored': 2, 'not_scored': 2}
    table = acc_table(rows)
    overall = next(line for line in table if line['dimension'] == 'Overall')
    assert overall == {'scoring': 'official', 'dimension': 'Overall', 'group': 'Overall', 'tot': 4,
                       'not_scored': 2, 'hit': 1, 'acc': 50.0}


def test_all_failed_group_is_none_not_zero():
    rows = [{'task': 'series', 'category': 'Range', 'complexity': 1, 'official': None}]
    summary = summarize(rows, 'official')
    assert summary['Overall'] is None and summary['task'] == {'series': None}


def test_unknown_scoring_is_an_error():
    with pytest.raises(ValueError, match='unknown GRAB scoring'):
        summarize([], 'fuzzy')


def test_score_file_has_llm_extracted_only_with_a_judge(grab_items, tmp_path):
    hits = {'properties': 10, 'function': 10, 'series': 10, 'transform': 10}
    table, path = evaluate(grab_items, hits, tmp_path)
    saved = json.loads((tmp_path / 'Model_GRAB_score.json').read_text())
    assert {'official', 'normalized'} <= set(saved) and 'llm_extracted' not in saved
    assert saved['judge'] is None and any('llm_extracted: not run' in n for n in saved['notes'])
    assert saved['official']['Overall'] == pytest.approx(100 * 40 / 2170, abs=1e-3)
    assert list(table['GRAB scoring']) == ['official', 'normalized']


def test_evaluate_writes_the_score_acc_and_items_files(grab_items, tmp_path):
    table, path = evaluate(grab_items, {'properties': 276, 'function': 110, 'series': 54, 'transform': 31},
                           tmp_path)
    saved = json.loads((tmp_path / 'Model_GRAB_score.json').read_text())
    assert set(saved['official']) >= {'Overall', 'task', 'category', 'complexity', 'task x complexity'}
    assert round(saved['official']['Overall'], 1) == 21.7
    acc = pd.read_csv(tmp_path / 'Model_GRAB_acc.csv')
    assert list(acc.columns) == ['scoring', 'dimension', 'group', 'tot', 'not_scored', 'hit', 'acc']
    overall = acc[(acc.scoring == 'official') & (acc.dimension == 'Overall')].iloc[0]
    assert (overall.tot, overall.hit) == (2170, 471) and round(overall.acc, 1) == 21.7
    assert set(acc.scoring) == {'official', 'normalized'}
    items = pd.read_csv(tmp_path / 'Model_GRAB_items.tsv', sep='\t')
    assert len(items) == 2170 and int(items['official'].sum()) == 471
    assert table.loc[0, 'Overall (%)'] == 21.7


def test_report_order_follows_the_spec(grab_items):
    rows = _rows(list(reversed(grab_items)), {'properties': 1, 'function': 1, 'series': 1, 'transform': 1})
    summary = summarize(rows, 'official')
    assert list(summary['task']) == ['properties', 'function', 'series', 'transform']
    assert list(summary['category']) == list(load_spec('grab')['categories'])
    assert list(summary['task x complexity']) == ['properties', 'function', 'series', 'transform']
    groups = [line['group'] for line in acc_table(rows) if line['dimension'] == 'task x complexity']
    assert groups[:3] == ['properties / 0', 'function / 0', 'function / 1']
