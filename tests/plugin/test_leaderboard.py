"""`vlmeval-ext leaderboard` over synthetic kit work dirs. Pure: no kit import."""
import json

import pandas as pd
import pytest

from vlmeval_ext.records.leaderboard import collect_runs, leaderboard_main, write_leaderboard


def _run(work, model, dataset, score, judge=None):
    d = work / model
    d.mkdir(parents=True, exist_ok=True)
    (d / f'{model}_{dataset}.xlsx').write_bytes(b'')            # the kit's predictions file (content unused)
    (d / f'{model}_{dataset}_score.json').write_text(json.dumps(score))
    if judge:
        (d / f'{model}_{dataset}_manifest.json').write_text(json.dumps({'judge': {'model': judge}}))


def _grab(overall, tasks, items=2170):
    tasks = dict(zip(('properties', 'function', 'series', 'transform'), tasks))
    return {'official': {'Overall': overall, 'task': tasks},
            'counts': {'items': items, 'scored': items}}


@pytest.fixture
def grab_work(tmp_path):
    work = tmp_path / 'outputs'
    _run(work, 'GPT4o', 'GRAB', _grab(19.0, [30.0, 15.0, 12.0, 8.0]), judge='gpt-4o-mini')
    _run(work, 'MyVLM', 'GRAB', _grab(5.0, [6.0, 5.0, 4.0, 3.0], items=20))      # a --limit run
    _run(work, 'MyVLM', 'GRAB_DEMO', _grab(50.0, [50.0, 50.0, 50.0, 50.0]))     # another dataset: ignored
    (work / 'logs').mkdir()                                                      # kit's log dir: no scores
    return work


def test_grab_leaderboard_two_models_plus_paper(grab_work):
    out = write_leaderboard('GRAB', grab_work)
    assert [r.model for r in out['runs']] == ['GPT4o', 'MyVLM']
    frame = pd.read_csv(out['csv'])
    assert set(frame.layout) == {'grab'}
    assert (frame.kind == 'ours').sum() == 2 and (frame.kind == 'paper').sum() == 14
    ours = frame[frame.kind == 'ours'].set_index('model')
    assert ours.loc['GPT4o', 'paper_row'] == 'GPT-4o' and ours.loc['GPT4o', 'judge'] == 'gpt-4o-mini'
    assert list(ours.loc['GPT4o', ['Properties', 'Functions', 'Series', 'Transforms', 'Overall']]) == [30, 15, 12, 8, 19]
    assert ours.loc['MyVLM', 'Overall'] == 5.0                                  # not the GRAB_DEMO run's 50
    # sorted by Overall: Claude 3.5 Sonnet 21.7 > GPT4o (ours) 19.0 > Gemini 1.5 Pro 18.1 ...
    assert frame.model.tolist()[:3] == ['Claude 3.5 Sonnet', 'GPT4o', 'Gemini 1.5 Pro']
    # the --limit run is listed after the 15 ranked rows, without a rank
    assert frame['rank'].tolist()[:15] == list(range(1, 16)) and pd.isna(frame['rank'].iloc[15])
    assert frame.model.iloc[15] == 'MyVLM'
    md = out['markdown'].read_text()
    # comparable, and how many of its cells reproduce the paper's (none: ours differ by points, beyond the rounding)
    assert ('| 2 | GPT4o (paper: GPT-4o) | ours | gpt-4o-mini | 2170/2170 | 30.0 | 15.0 | 12.0 | 8.0 | 19.0 | '
            'comparable: reproduced in 0 of 5 cells (rounding + judge noise; `<stem>_vs_paper.md`) |' in md)
    assert ("| MyVLM | ours | - | 20/2170 | 6.0 | 5.0 | 4.0 | 3.0 | 5.0 | not comparable: a subset: 20 of the "
            "paper's 2170 items (e.g. --limit) |") in md
    assert ours.loc['MyVLM', 'comparable'] == False and ours.loc['GPT4o', 'comparable'] == True  # noqa: E712
    assert '| Gemini 1.5 Pro * | paper |' in md                                 # quoted, not verified by us
    assert 'Left out (could not be verified)' in md and 'grab-benchmark.github.io' in md
    assert out['plot'].read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and out['plot'].stat().st_size > 5000


def test_rbench_leaderboard_keeps_absolute_and_relative_layouts(tmp_path):
    work = tmp_path / 'w'
    cells = ['MCQ-low', 'MCQ-mid', 'MCQ-high', 'VQA-low', 'VQA-mid', 'VQA-high', 'CAP-low', 'CAP-mid', 'CAP-high']
    for model, base in (('GPT4o', 0.7), ('InternVL2-8B', 0.5)):
        _run(work, model, 'R-Bench-Full', {'absolute': {**{c: base for c in cells}, 'Overall': base},
                                           'relative': {**{c: base - 0.2 for c in cells}, 'Overall': base - 0.2},
                                           'counts': {'items': 1485, 'scored': 1485},
                                           'judge': {'name': 'gpt-3.5-turbo' if model == 'GPT4o' else 'qwen-72b',
                                                     'mode': 'official'}})
    out = write_leaderboard('R-Bench-Full', work, tmp_path / 'lb' / 'rbench', plot=False)
    frame = pd.read_csv(out['csv'])
    assert {'absolute', 'relative', 'absolute_by_dimension', 'relative_by_dimension'} == set(frame.layout)
    absolute = frame[frame.layout == 'absolute']
    assert absolute.model.tolist()[:2] == ['GPT4o', 'GPT4o'] and absolute.kind.tolist()[:2] == ['ours', 'paper']
    assert absolute[absolute.model == 'InternVL2-8B']['paper_row'].item() == 'InternVL2'
    md = out['markdown'].read_text()
    assert 'used different judges (gpt-3.5-turbo, qwen-72b)' in md
    assert '| 1 | GPT4o (paper: GPT4o) | ours | gpt-3.5-turbo | 1485/1485 | 0.7000 |' in md
    assert "| GPT4o | paper | GPT-3.5-turbo | 1485 | 0.8176 |" in md
    assert "not comparable: judged by qwen-72b, not the paper's GPT-3.5-turbo |" in md
    assert out['plot'] is None and not (tmp_path / 'lb' / 'rbench.png').exists()


def test_demo_split_gets_layout_without_paper_rows_and_unknown_dataset_gets_generic_columns(grab_work, tmp_path):
    out = write_leaderboard('GRAB_DEMO', grab_work, tmp_path / 'demo', plot=False)
    frame = pd.read_csv(out['csv'])
    assert frame.kind.tolist() == ['ours'] and frame.Overall.tolist() == [50.0]
    assert 'paper rows are left out' in out['markdown'].read_text()
    _run(grab_work, 'MyVLM', 'NewBench', {'accuracy': {'Overall': 40.0, 'task': {'a': 30.0}}, 'counts': {'items': 9}})
    out = write_leaderboard('NewBench', grab_work, tmp_path / 'new')
    frame = pd.read_csv(out['csv'])
    assert list(frame.columns[8:10]) == ['accuracy.Overall', 'accuracy.task.a'] and 'counts.items' not in frame
    assert 'No published results on file' in out['markdown'].read_text()


def test_cli_and_errors(grab_work, tmp_path, capsys):
    assert leaderboard_main(['--data', 'GRAB', '--work-dir', str(grab_work), '--out', str(tmp_path / 'x')]) == 0
    printed = capsys.readouterr().out
    assert '2 run(s) of GRAB' in printed and (tmp_path / 'x.png').exists() and (tmp_path / 'x.md').exists()
    assert leaderboard_main(['--data', 'GRAB', '--work-dir', str(tmp_path / 'missing')]) == 2
    assert 'does not exist' in capsys.readouterr().err
    assert leaderboard_main(['--data', 'NoSuchBench', '--work-dir', str(grab_work)]) == 2
    assert 'no NoSuchBench results' in capsys.readouterr().err
    (grab_work / 'MyVLM' / 'MyVLM_GRAB_score.json').write_text('{broken')
    with pytest.raises(ValueError, match='MyVLM_GRAB_score.json: not valid JSON'):
        collect_runs(grab_work, 'GRAB')


def test_a_dataset_of_ours_without_published_results_names_every_unit(tmp_path):
    """An -RC dataset has no paper table: its columns are its benchmark's summary row, each naming its unit, and
    0-1 scores keep 4 decimals."""
    work = tmp_path / 'outputs'
    score = {'base_dataset': 'TextVQA_VAL', 'task': 'VQA', 'reference': {'Overall': 0.61234},
             'absolute': {'Overall': 0.51234}, 'relative': {'Overall': 0.80123}, 'pairs': 12,
             'judge': {'name': 'exact_matching'}}
    _run(work, 'MyVLM', 'TextVQA_VAL-RC', score)
    out = write_leaderboard('TextVQA_VAL-RC', work, tmp_path / 'rc', plot=False)
    frame = pd.read_csv(out['csv'])
    assert {'reference Overall (0-1)', 'absolute Overall (0-1)', 'relative Overall (0-1)', 'pairs (count)'} <= \
        set(frame.columns)
    md = out['markdown'].read_text()
    assert 'absolute Overall (0-1)' in md and 'pairs (count)' in md
    assert '| 0.5123 |' in md and '| 0.51 |' not in md
    assert frame.judge.tolist() == ['exact_matching']
