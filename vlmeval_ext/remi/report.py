"""ReMI report: <stem>_score.json, a per-task table (Markdown + CSV) and a model-vs-baseline bar chart."""
from __future__ import annotations

import json
from pathlib import Path

from vlmeval_ext.core.plots import no_plot_line, wrapped

TABLE_HEADER = ['task', 'items scored', 'official accuracy (%)', 'naive baseline (%)', 'ERP (%)', 'lenient accuracy (%)']


def _fmt(x, digits=1):
    return '-' if x is None else f'{x:.{digits}f}'


def table_rows(summary: dict) -> list[list]:
    """Per task, then Overall: items scored, official accuracy, its naive baseline and ERP, lenient accuracy."""
    acc, base, erps = summary['accuracy'], summary['naive_baseline'], summary['erp']
    lenient = summary['lenient']['accuracy']
    counts = summary['counts']['task']
    rows = [[t, counts[t]['scored'], acc['task'][t], base['task'][t], erps['task'][t], lenient['task'][t]]
            for t in acc['task']]
    rows.append(['Overall', summary['counts']['scored'], acc['Overall'], base['Overall'], erps['Overall'],
                 lenient['Overall']])
    return rows


def markdown_table(summary: dict, model_name: str = '') -> str:
    title = f'ReMI{" - " + model_name if model_name else ""} (input mode: {summary["input_mode"]}; ' \
            f'micro accuracy {_fmt(summary["accuracy"]["micro"])} %)'
    lines = [title, '', '| ' + ' | '.join(TABLE_HEADER) + ' |', '|' + '---|' * len(TABLE_HEADER)]
    for task, n, a, b, e, lenient in table_rows(summary):
        lines.append(f'| {task} | {n} | {_fmt(a)} | {_fmt(b)} | {_fmt(e)} | {_fmt(lenient)} |')
    return '\n'.join(lines + [''] + accounting_lines(summary)) + '\n'


def accounting_lines(summary: dict) -> list[str]:
    """What the scores rest on: official vs lenient, and every item not scored right for a reason."""
    counts, differ = summary['counts'], summary['official_vs_lenient']
    return ['Official = the ReMI authors\' evaluation code (the headline, compared with the paper); lenient = '
            'a robust reading of the same answers. They differ on '
            f'{differ["differ"]} item(s) (lenient only right: {differ["lenient_only"]}; official only right: '
            f'{differ["official_only"]}).',
            f'Items {counts["items"]}, scored {counts["scored"]}; empty answers (scored wrong): {counts["empty"]}; '
            f'inference failures (the kit\'s failure text, excluded): {counts["inference_failures"]}; '
            f'unreadable for official (BAD_JSON, wrong): {counts["official_bad_json"]}; '
            f'unreadable for lenient (wrong): {counts["parse_failures"] or "none"}']


def result_table(summary: dict) -> 'pd.DataFrame':
    """What evaluate returns (and the kit prints): rows official (the headline), lenient, naive baseline and ERP
    (error reduction against it), columns Overall and each task, all in percent (core.kit_table)."""
    from vlmeval_ext.core.kit_table import result_table as build

    sources = {'official': summary['accuracy'], 'lenient': summary['lenient']['accuracy'],
               'naive baseline': summary['naive_baseline'], 'ERP': summary['erp']}
    tasks = list(summary['accuracy']['task'])
    rows = {name: {'Overall (%)': src['Overall'], **{f'{t} (%)': src['task'].get(t) for t in tasks}}
            for name, src in sources.items()}
    return build(f'ReMI ({summary["input_mode"]} input)', rows, digits=1)


def bar_chart(summary: dict, out_path: str | Path, model_name: str = 'model', title: str = '') -> Path:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    tasks = list(summary['accuracy']['task'])
    model = [summary['accuracy']['task'][t] or 0.0 for t in tasks]      # official
    base = [summary['naive_baseline']['task'][t] or 0.0 for t in tasks]
    xs = range(len(tasks))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(tasks) + 2), 4.2))
    width = 0.4
    bars = ax.bar([x - width / 2 for x in xs], model, width, label=f'{model_name} (official)', color='#3b75af')
    ax.bar_label(bars, fmt='%.0f', fontsize=7)     # a 0 % bar is visible as "0", not as a missing one
    ax.bar([x + width / 2 for x in xs], base, width, label='naive baseline', color='#bbbbbb')
    ax.set_xticks(list(xs))
    ax.set_xticklabels(tasks, rotation=40, ha='right')
    ax.set_ylabel('accuracy (%)')
    ax.set_ylim(0, 118)                 # headroom: the legend never covers a 100 % bar
    ax.set_yticks(range(0, 101, 20))
    ax.set_title(wrapped(title or f'ReMI per task ({summary["input_mode"]} input)', fig.get_figwidth(), 9),
                 fontsize=9)
    ax.legend()
    fig.tight_layout()
    out = Path(out_path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def write_report(summary: dict, stem: str | Path, model_name: str = 'model', plot: bool = True,
                 title: str = '') -> dict:
    """Write <stem>_score.json, <stem>_tasks.md, <stem>_tasks.csv and <stem>_tasks.png; return their paths."""
    import csv
    stem = str(stem)
    paths = {'score': Path(f'{stem}_score.json'), 'markdown': Path(f'{stem}_tasks.md'),
             'csv': Path(f'{stem}_tasks.csv')}
    paths['score'].write_text(json.dumps(summary, indent=2), encoding='utf-8')
    paths['markdown'].write_text(markdown_table(summary, model_name), encoding='utf-8')
    with open(paths['csv'], 'w', newline='', encoding='utf-8') as f:
        writer = csv.writer(f)
        writer.writerow(TABLE_HEADER)
        writer.writerows(table_rows(summary))
    if plot and not summary['counts']['scored']:
        print(no_plot_line('ReMI', f'{stem}_tasks.png', 'no item was scored (all are inference failures)'))
    elif plot:
        paths['plot'] = bar_chart(summary, f'{stem}_tasks.png', model_name, title)
    return paths


def summary_row(score: dict) -> dict:
    """The end-of-run summary's row for one ReMI _score.json (percent; official = Google's evaluation snippet, the
    headline; lenient = the robust reading; Overall = mean of the task accuracies; ERP = error reduction against
    the naive baseline)."""
    return {'input mode': score['input_mode'], 'official Overall (%)': score['accuracy']['Overall'],
            'lenient Overall (%)': score['lenient']['accuracy']['Overall'],
            'naive baseline Overall (%)': score['naive_baseline']['Overall'],
            'ERP Overall (%)': score['erp']['Overall'], 'differ': score['official_vs_lenient']['differ'],
            'empty': score['counts']['empty'], 'scored': score['counts']['scored'], 'items': score['counts']['items']}
