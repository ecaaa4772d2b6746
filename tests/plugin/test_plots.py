"""Plots a reader can trust: the title names dataset, model, judge and item count; a run with nothing scored writes
no plot and says why; GRAB's complexity lines break at complexities without items; equal absolute and relative
lines stay visible; a robustness chart of a few distortions never shows the others as zeros."""
from __future__ import annotations

import math

import pandas as pd

from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV
from vlmeval_ext.plugin import grab as grab_report
from vlmeval_ext.plugin import rbench as rb_report
from vlmeval_ext.records.plots import run_title


def test_run_title_names_dataset_model_judge_and_items():
    title = run_title('GRAB_DEMO', 'MyVLM', 'none (rule-based)', 41, 40)
    assert title == 'GRAB_DEMO | model MyVLM | judge: none (rule-based) | 41 items (40 scored)'


def test_grab_complexity_line_breaks_at_a_gap():
    xs, ys = grab_report.complexity_series({'0': 50.0, '9': 10.0, '3': None})
    assert xs == list(range(10)) and ys[0] == 50.0 and ys[9] == 10.0
    assert all(math.isnan(y) for y in ys[1:9])          # nothing drawn from 0 to 9


def _grab_predictions(tmp_path, prediction):
    data = pd.read_csv(GRAB_DEMO_TSV, sep='\t', dtype=str, keep_default_na=False)
    data = data.drop(columns=['image'])
    data['prediction'] = prediction(data)
    path = tmp_path / 'MyVLM_GRAB_DEMO.tsv'
    data.to_csv(path, sep='\t', index=False)
    return path


def test_grab_plot_title_names_the_run(tmp_path, monkeypatch):
    seen = {}
    real = grab_report.plot_complexity

    def spy(scores, path, title=''):
        seen['title'] = title
        return real(scores, path, title=title)
    monkeypatch.setattr(grab_report, 'plot_complexity', spy)
    path = _grab_predictions(tmp_path, lambda d: d['answer'])
    from vlmeval_ext.datasets import GRAB as GRABEvaluator      # imports the kit: here, not at collection
    GRABEvaluator.for_predictions('GRAB_DEMO', path).evaluate(str(path))
    assert seen['title'].startswith('GRAB_DEMO | model MyVLM | judge: none') and '41 items' in seen['title']
    assert (tmp_path / 'MyVLM_GRAB_DEMO_complexity.png').stat().st_size > 0


def test_a_run_with_nothing_scored_writes_no_plot_and_says_why(tmp_path, capsys):
    path = _grab_predictions(tmp_path, lambda d: ['Failed to obtain answer via API.'] * len(d))
    from vlmeval_ext.datasets import GRAB as GRABEvaluator      # imports the kit: here, not at collection
    GRABEvaluator.for_predictions('GRAB_DEMO', path).evaluate(str(path))
    assert not (tmp_path / 'MyVLM_GRAB_DEMO_complexity.png').exists()
    out = capsys.readouterr().out
    assert '[GRAB] no plot MyVLM_GRAB_DEMO_complexity.png: no item was scored (41 of 41 are inference failures)' in out
    empty = {'absolute': {'Overall': None}, 'relative': {'Overall': None}}
    assert rb_report.plot_radar(empty, tmp_path / 'r.png') is False and not (tmp_path / 'r.png').exists()


def test_equal_absolute_and_relative_stay_visible():
    a, r = rb_report.METRIC_STYLES['absolute'], rb_report.METRIC_STYLES['relative']
    assert a['marker'] != r['marker'] and a['linestyle'] != r['linestyle']


def test_a_robustness_chart_of_four_distortions_shows_only_those(tmp_path):
    """An -RC run of 4 distortions: 4 dimensions hold values; a radar of 7 axes would draw the other 3 at the
    centre, like zeros. The chart uses the scored ones only, as bars when fewer than a radar needs."""
    from vlmeval_ext.dataset.utils.rbench_full import STEPS
    steps = list(STEPS)
    values = {d: 0.5 for d in steps[:4]}
    table = {'absolute': dict(values), 'relative': dict(values)}
    assert rb_report.scored_dims(table, steps) == steps[:4]
    assert len(steps[:4]) < rb_report.MIN_RADAR_AXES
    assert rb_report.plot_radar(table, tmp_path / 'rc.png', title='x') is True
    assert (tmp_path / 'rc.png').stat().st_size > 0


def test_long_titles_are_wrapped_to_the_figure_width():
    from vlmeval_ext.records.plots import wrapped
    title = run_title('R-Bench-Full_DEMO', 'Naive-Baseline', "offline approximation (MiniLM-L6 + rules), not the "
                      "paper's GPT-3.5 judge", 24)
    lines = wrapped(title, 9.0, 10).splitlines()
    assert len(lines) >= 2 and all(len(line) <= int(9.0 * 72 / 5.5) for line in lines)
    assert ' '.join(lines) == title


def test_a_task_keeps_its_colour_whatever_tasks_a_run_has(tmp_path, monkeypatch):
    """GRAB's complexity plot: 'series' is drawn in the same colour and marker in a run with every task and in a
    run where only 'series' and 'transform' were scored."""
    import matplotlib.figure
    seen = []
    real = matplotlib.figure.Figure.savefig

    def keep_styles(fig, *args, **kwargs):
        seen.append({line.get_label(): (line.get_color(), line.get_marker())
                     for ax in fig.axes for line in ax.get_lines()})
        return real(fig, *args, **kwargs)
    monkeypatch.setattr(matplotlib.figure.Figure, 'savefig', keep_styles)

    def scores(tasks):
        return {'official': {'Overall': 50.0, 'task x complexity': {t: {'0': 40.0, '1': 60.0} for t in tasks}}}
    assert grab_report.plot_complexity(scores(['properties', 'function', 'series', 'transform']), tmp_path / 'a.png')
    assert grab_report.plot_complexity(scores(['transform', 'series']), tmp_path / 'b.png')
    every, some = seen
    assert every['series'] == some['series'] and every['transform'] == some['transform']
    assert len({every[t] for t in every}) == 4
