"""Every score's 95 % interval (vlmeval_ext.records.intervals): coverage on simulated runs of known truth, the
clustering of retrieval queries, and the intervals in the score files and in the table the kit prints."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from vlmeval_ext.plugin import grab, rococo_retrieval
from vlmeval_ext.records import intervals as I
from vlmeval_ext.registry import benchmark_of, plugin_class

RUNS = 1000


@pytest.mark.parametrize('p', [0.2, 0.5, 0.9])
@pytest.mark.parametrize('n', [41, 495, 2170])
def test_wilson_intervals_cover_the_true_accuracy_95_percent_of_the_time(p, n):
    rng = np.random.default_rng(int(p * 100) * 10_000 + n)
    hits = rng.binomial(n, p, size=RUNS)
    covered = sum(lo <= 100 * p <= hi for lo, hi in (I.wilson(h, n) for h in hits))
    assert 0.93 <= covered / RUNS <= 0.97, covered


def _retrieval_run(rng, images=200, per_image=5, a=0.5, b=1.5):
    """Queries clustered by image: each image has its own success probability (Beta(a, b), mean a / (a + b))."""
    p_image = rng.beta(a, b, size=images)
    ranks = np.where(rng.random((images, per_image)) < p_image[:, None], 0, 7).ravel()
    return pd.DataFrame({'seed': '-', 'query': np.arange(images * per_image),
                         'cluster': np.repeat(np.arange(images), per_image), 'rank': ranks,
                         'top1_false': (ranks > 0).astype(int)})


def test_clustered_queries_need_the_images_as_clusters():
    """With a real image effect, an interval that treats the 1,000 queries as independent covers the true R@1
    far less often than 95 %; the interval with the images as clusters covers it about 95 % of the time."""
    rng = np.random.default_rng(7)
    truth = 100 * 0.5 / (0.5 + 1.5)
    clustered = naive = 0
    runs = 400
    for _ in range(runs):
        ranks = _retrieval_run(rng)
        lo, hi = rococo_retrieval.item_intervals(ranks)['ci95']['metrics']['R@1']
        clustered += lo <= truth <= hi
        n_lo, n_hi = I.wilson(int((ranks['rank'] < 1).sum()), len(ranks))
        naive += n_lo <= truth <= n_hi
    assert 0.92 <= clustered / runs <= 0.97, clustered
    assert naive / runs < 0.85, naive


def test_a_cell_with_fewer_than_two_items_has_no_interval():
    assert I.wilson(1, 1) is None and I.text(None) == 'n<2'
    items = pd.DataFrame({'official': ['1', '0', '1'], 'task': ['a', 'a', 'b'], 'category': 'c',
                          'complexity': ['1', '1', '2']})
    block = grab.item_intervals(items)
    assert block['ci95']['official']['task']['b'] is None and block['ci95_n']['official']['task']['b'] == 1
    assert block['ci95']['official']['Overall'] is not None and 'Overall' not in block.get('ci95_n', {}).get(
        'official', {})


DEMOS = {'GRAB_DEMO': ({}, [('official', 'Overall')]), 'ReMI_DEMO': ({}, []),
         'R-Bench-Full_DEMO': ({'model': 'offline'}, [('absolute', 'Overall'), ('relative', 'Overall')]),
         'RoCOCO-MCQ-same_concept_DEMO': ({}, [('accuracy',)])}


@pytest.mark.parametrize('dataset', list(DEMOS))
def test_every_score_file_holds_intervals_around_its_scores(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv('LMUData', str(tmp_path))
    judge, paths = DEMOS[dataset]
    data = pd.read_csv(benchmark_of(dataset).demo_file(dataset), sep='\t', dtype=str, keep_default_na=False)
    data = data.drop(columns=['image'])
    rng = np.random.default_rng(0)
    # right on about two thirds of the items, an unrelated reply on the rest
    right = [json.dumps({'explanation': 'x', 'answer': a}) if dataset.startswith('ReMI') else a for a in data['answer']]
    data['prediction'] = [a if rng.random() < 0.66 else 'no idea' for a in right]
    pred = tmp_path / f'M_{dataset}.tsv'
    data.to_csv(pred, sep='\t', index=False)
    table = plugin_class(dataset).for_predictions(dataset, pred).evaluate(str(pred), **judge)
    score = json.loads((tmp_path / f'M_{dataset}_score.json').read_text())
    assert score['ci95_method']['level'] == 0.95 and 'ci95' in score
    for path in paths:
        value = score
        for key in path:
            value = value[key]
        lo, hi = I.leaf(score['ci95'], path)
        assert lo <= value <= hi and hi - lo > 0, (path, value, lo, hi)
    if dataset == 'ReMI_DEMO':
        # one item per task: no task has an interval, and the file says how few items there are; the Overall (13
        # items) has one, each task's variance taken at its most (1/4)
        assert score['ci95_n']['accuracy']['task']['Clocks'] == 1
        assert score['ci95']['accuracy']['task']['Clocks'] is None
        lo, hi = score['ci95']['accuracy']['Overall']
        assert lo <= score['accuracy']['Overall'] <= hi and hi - lo > 30
        # the naive baseline is a fixed rule: its interval cells say so ('-'), never a 'nan' in the printed table
        naive = table[table.iloc[:, 0] == 'naive baseline'].iloc[0]
        assert [naive[c] for c in table.columns if '95 % CI' in c] == ['-', '-']
        assert 'nan' not in table.to_string()
    assert score['detectable_difference']['value'] > 0

    def walk(node):
        if isinstance(node, list):
            yield node
        elif isinstance(node, dict):
            for child in node.values():
                yield from walk(child)
    widths = [hi - lo for lo, hi in walk(score['ci95'])]
    assert widths and min(widths) > 0                    # no interval reads as certainty, even on a demo split
    assert any('95 % CI' in str(c) for c in table.columns) or any('95 % CI' in str(v) for v in table.iloc[:, 0])
