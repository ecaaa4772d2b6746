"""R-Bench's plugin half: what vlmeval-ext adds to the kit-dialect dataset (vlmeval_ext/dataset/rbench_full.py).

Its `Report`: the summary row, the run record, the robustness table with its intervals, the radar and task x
strength plots, the 95 % intervals (Korn-Graubard within task x strength) and the judge's own noise, the items
`compare` reads and the report page's section; `RBenchSteps`, what the plugin's dataset class adds to the kit
dialect's steps; and `naive_answer`, what `Naive-Baseline` answers. Kit-free.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from vlmeval_ext.io import stem_path
from vlmeval_ext.plugin.base import Report, read_table, save_figure
from vlmeval_ext.records.compare import Headline, item_table, num, plain
from vlmeval_ext.records.intervals import design_detectable, dimension_masks, robustness
from vlmeval_ext.records.plots import model_of_file, new_figure, no_plot_line, run_title
from vlmeval_ext.records.report_html import Section, col, number, read_file


METRIC_STYLES = {'absolute': dict(marker='o', markersize=7, linestyle='-', color='C0'),
                 'relative': dict(marker='x', markersize=9, linestyle='--', color='C1'),
                 'reference': dict(marker='s', markersize=5, linestyle=':', color='C2')}


MIN_RADAR_AXES = 5


def scored_dims(table: Mapping, dims) -> list[str]:
    return [d for d in dims if any(values.get(d) is not None for values in table.values())]


def plot_radar(table: Mapping, path, title: str = '') -> bool:
    """Two panels (the 7 steps, the 7 groups) with every metric of `table`, over the dimensions that hold a
    value; fewer than MIN_RADAR_AXES of them make a bar chart, so a missing dimension never looks like a zero.
    Nothing scored: no plot (False)."""
    from vlmeval_ext.dataset.utils.rbench_full import GROUPS, STEPS
    panels = [(label, scored_dims(table, dims)) for label, dims in (('steps', STEPS), ('groups', GROUPS))]
    if not any(dims for _, dims in panels):
        return False
    import numpy as np
    fig = new_figure(figsize=(11, 5.4))
    for k, (label, dims) in enumerate(panels):
        polar = len(dims) >= MIN_RADAR_AXES
        ax = fig.add_subplot(1, 2, k + 1, projection='polar' if polar else None)
        if polar:
            angles = np.linspace(0, 2 * np.pi, len(dims), endpoint=False).tolist()
            for metric, values in table.items():
                vals = [np.nan if values.get(d) is None else values[d] for d in dims]
                style = METRIC_STYLES.get(metric, {})
                ax.plot(angles + angles[:1], vals + vals[:1], label=metric, **style)
                ax.fill(angles + angles[:1], vals + vals[:1], alpha=0.08, color=style.get('color'))
            ax.set_xticks(angles)
            ax.set_xticklabels(dims, fontsize=8)
        else:
            width = 0.8 / max(1, len(table))
            for j, (metric, values) in enumerate(table.items()):
                vals = [np.nan if values.get(d) is None else values[d] for d in dims]
                ax.bar([i + j * width for i in range(len(dims))], vals, width, label=metric,
                       color=METRIC_STYLES.get(metric, {}).get('color'))
            ax.set_xticks([i + width * (len(table) - 1) / 2 for i in range(len(dims))], dims, fontsize=8)
            ax.set_ylabel('score (0-1)')
        ax.set_ylim(0, 1)
        missing = (len(STEPS) if label == 'steps' else len(GROUPS)) - len(dims)
        ax.set_title(f'by {label} (0-1)' + (f'; {missing} without items not shown' if missing else ''), fontsize=9)
        ax.legend(loc='upper right', bbox_to_anchor=(1.3, 1.12) if polar else None, fontsize=8)
    save_figure(fig, path, title, dpi=110)
    return True


def plot_task_strength(table: Mapping, path, title: str = '', tasks=('MCQ', 'VQA', 'CAP')) -> None:
    """Heatmap per metric: rows tasks, columns low/mid/high."""
    import numpy as np
    levels = ('low', 'mid', 'high')
    fig = new_figure(figsize=(4.5 * len(table), 3.2))
    axes = fig.subplots(1, len(table), squeeze=False)
    for ax, (metric, values) in zip(axes[0], table.items()):
        grid = np.array([[np.nan if values.get(f'{t}-{s}') is None else values[f'{t}-{s}'] for s in levels]
                         for t in tasks], dtype=float)
        im = ax.imshow(grid, vmin=0, vmax=1, cmap='viridis')
        ax.set_xticks(range(len(levels)), levels)
        ax.set_yticks(range(len(tasks)), tasks)
        for i in range(len(tasks)):
            for j in range(len(levels)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f'{grid[i, j]:.3f}', ha='center', va='center',
                            color='white' if grid[i, j] < 0.5 else 'black', fontsize=9)
        ax.set_title(f'{metric} (0-1)')
        fig.colorbar(im, ax=ax, fraction=0.046)
    save_figure(fig, path, title, dpi=110)


class RBenchReport(Report):
    HEADLINE = (('absolute Overall', ('absolute', 'Overall'), '0-1'),
                ('relative Overall', ('relative', 'Overall'), '0-1'))

    def without_the_kit(self, record, dataset, eval_file, judge_kwargs):
        return scoring_without_the_kit(record, dataset, eval_file, judge_kwargs)

    def intervals(self, eval_file, score, tag=''):
        scores = read_table(stem_path(eval_file, f'{tag}_scores.csv'))
        block = item_intervals(scores)
        if not tag and (score.get('judge') or {}).get('mode', 'official') == 'official':
            block['judge_noise'] = judge_noise(scores)   # five repeats per score measure it
        return block

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        return [leaf(score.get('ci95'), [m, 'Overall']) for m in ('absolute', 'relative')]

    def summary_row(self, score):
        judge = score.get('judge') or {}
        row = {'items': score.get('items')}
        for metric in ('absolute', 'relative'):
            for dim in ('Overall', 'MCQ', 'VQA', 'CAP'):
                row[f'{metric} {dim} (0-1)'] = score[metric].get(dim)
        row['judge'] = judge.get('label') or f"judge {judge.get('model', '?')} ({judge.get('mode', '?')})"
        return row

    def run_record(self, dataset):
        from vlmeval_ext.dataset.utils.rbench_full import JUDGE_PROMPTS, MODEL_PROMPTS
        return {'prompts': {**{f'model_{t}': p for t, p in MODEL_PROMPTS.items()},
                            **{f'judge_{t}': p for t, p in JUDGE_PROMPTS.items()}}}

    def write_extras(self, dataset, eval_file, score, tag='', model=''):
        model = model or model_of_file(eval_file, dataset)
        from vlmeval_ext.records.intervals import leaf
        judge = score.get('judge') or {}
        offline = judge.get('mode') == 'offline'
        path = stem_path(eval_file, f'{tag}_robustness.csv')
        with open(path, encoding='utf-8', newline='') as f:
            rows = list(csv.reader(f))
        head = rows[0] + [f'{m} 95 % CI {end} (0-1)' for m in ('absolute', 'relative') for end in ('low', 'high')]
        body = []
        for r in rows[1:]:
            cells = [leaf(score.get('ci95'), [m, r[0]]) for m in ('absolute', 'relative')]
            body.append(r + [f'{c[i]:.4f}' if c else '' for c in cells for i in (0, 1)])
        if offline:      # the table can never pass for the paper's judge once it travels alone
            head, body = head + ['judge'], [r + ['offline approximation'] for r in body]
        with open(path, 'w', encoding='utf-8', newline='') as f:
            csv.writer(f, lineterminator='\n').writerows([head] + body)
        table = {m: score[m] for m in ('absolute', 'relative')}
        judge_text = judge.get('label', '') if offline else f'{judge.get("name")} ({judge.get("mode")} mode)'
        counts = score.get('counts', {})
        title = run_title(dataset, model, judge_text, counts.get('items', 0),
                          counts.get('scored'))
        if plot_radar(table, stem_path(eval_file, f'{tag}_radar.png'), title=title):
            plot_task_strength(table, stem_path(eval_file, f'{tag}_task_strength.png'), title=title)
        else:
            print(no_plot_line('R-Bench', stem_path(eval_file, f'{tag}_radar.png'), 'no item was scored'))


def item_intervals(scores: pd.DataFrame) -> dict:
    """R-Bench from `_scores.csv`: absolute = mean(score_dis), relative = mean(score_com x score_ref)."""
    from vlmeval_ext.dataset.utils.rbench_full import TASKS, dimension_order, dimensions_of
    tasks = [t for t in TASKS if (scores['type'] == t).any()] or list(TASKS)
    metrics = {'absolute': lambda f: pd.to_numeric(f['score_dis'], errors='coerce').to_numpy(float),
               'relative': lambda f: (pd.to_numeric(f['score_com'], errors='coerce')
                                      * pd.to_numeric(f['score_ref'], errors='coerce')).to_numpy(float)}
    strata = (scores['type'].astype(str) + '|' + scores['strength'].astype(str)).to_numpy()
    iv, overall = robustness(scores, metrics, dimension_order(tasks), dimensions_of, strata, 'task x strength')
    return iv.block(design_detectable(overall['absolute']))


def _score_variance(verdicts: str, majority: bool) -> float:
    """The variance of one score over a rerun of its judge calls, from the verdicts its repeats gave
    ('1,1,0,1,1' per prompt, ';' between prompts); a prompt asked once tells nothing (0)."""
    lists = [[float(v) for v in part.split(',') if v.strip()] for part in str(verdicts).split(';')]
    lists = [v for v in lists if v]
    if not lists:
        return 0.0
    if majority:
        flat = [v for vs in lists for v in vs]
        if len(flat) < 2:
            return 0.0
        p1, n = sum(flat) / len(flat), len(flat)
        win = sum(math.comb(n, j) * p1 ** j * (1 - p1) ** (n - j) for j in range(n // 2 + 1, n + 1))
        return win * (1 - win)
    total = sum(len(vs) for vs in lists)
    var = sum(len(vs) * float(np.var(vs, ddof=1)) for vs in lists if len(vs) > 1)
    return var / (2.0 * total) ** 2


def judge_noise(scores: pd.DataFrame) -> dict:
    """R-Bench official mode: the standard deviation of every cell's mean over a rerun of the judge, from the spread
    of each score's five repeated verdicts (a CAP dis/ref score asks each caption once: its share is not measured
    and counts 0, so a CAP cell's noise is a lower bound)."""
    from vlmeval_ext.dataset.utils.rbench_full import TASKS, dimension_order, dimensions_of
    tasks = [t for t in TASKS if (scores['type'] == t).any()] or list(TASKS)
    majority = (scores['type'].astype(str) == 'MCQ').to_numpy()
    num = {k: pd.to_numeric(scores[f'score_{k}'], errors='coerce').to_numpy(float) for k in ('dis', 'ref', 'com')}
    # an unscored score's verdicts column holds its failure reason: left out with the score
    var = {k: np.array([_score_variance(v, m) if s == s else np.nan
                        for v, m, s in zip(scores[f'verdicts_{k}'], majority, num[k])]) for k in ('dis', 'ref', 'com')}
    item_var = {'absolute': var['dis'], 'relative': num['ref'] ** 2 * var['com'] + num['com'] ** 2 * var['ref']}
    dims = dimension_order(tasks)
    masks = dimension_masks(scores, dims, dimensions_of)
    out = {}
    for metric, v in item_var.items():
        out[metric] = {}
        for j, dim in enumerate(dims):
            x = v[masks[:, j] & ~np.isnan(v)]
            out[metric][dim] = round(math.sqrt(float(x.sum())) / len(x), 5) if len(x) else None
    out['note'] = ('standard deviation of each cell over a rerun of the judge, from the spread of each score\'s '
                   'repeated verdicts; CAP dis/ref (one call per caption) not measured, counted as 0')
    return out


def read_headlines(eval_file: Path, tag: str = '') -> list[Headline]:
    rows = item_table(Path(stem_path(eval_file, f'{tag}_scores.csv')))
    keys, strata = rows['pair_id'].tolist(), (rows['type'] + '|' + rows['strength']).to_numpy()
    dis, ref, com = (num(rows[f'score_{k}']) for k in ('dis', 'ref', 'com'))
    return [plain('absolute Overall', '0-1', keys, dis, strata, binary=False, judged=True),
            plain('relative Overall', '0-1', keys, com * ref, strata, binary=False, judged=True)]


def page_section(title, dataset, eval_file, tag, thumbs) -> Section | None:
    from vlmeval_ext.dataset.utils.rbench_full import DISTORTIONS, STRENGTHS
    scores, preds = read_file(stem_path(eval_file, f'{tag}_scores.csv')), read_file(eval_file)
    if scores is None or preds is None:
        return None
    by_pair = {}
    for r in preds.to_dict('records'):
        by_pair.setdefault(str(r.get('pair_id')), {})[r.get('variant')] = r
    rows = []
    for s in scores.to_dict('records'):
        pair = by_pair.get(str(s['pair_id']), {})
        ref, dis = pair.get('ref', {}), pair.get('dis', {})
        name, step, group = DISTORTIONS.get(int(float(s['distortion'])), ('?', '?', '?'))
        ref_score, dis_score = number(s['score_ref']), number(s['score_dis'])
        rows.append({
            'pair_id': s['pair_id'], 'task': s['type'], 'distortion': f'{name} ({step}, {group})',
            'distortion_id': int(float(s['distortion'])), 'strength': STRENGTHS.get(int(float(s['strength'])), '?'),
            'images': [*thumbs.of(dataset, ref.get('index')), *thumbs.of(dataset, dis.get('index'))],
            'links': [thumbs.full_image(dataset, ref.get('index')), thumbs.full_image(dataset, dis.get('index'))],
            'question': ref.get('question') or dis.get('question', ''), 'options': s.get('choice') or ref.get(
                'choice', ''), 'answer': ref.get('answer', ''), 'pred_ref': ref.get('prediction', ''),
            'pred_dis': dis.get('prediction', ''), 'verdicts': f"ref {s.get('verdicts_ref', '')} | dis "
            f"{s.get('verdicts_dis', '')} | com {s.get('verdicts_com', '')}",
            'score_ref': ref_score, 'score_dis': dis_score, 'score_com': number(s['score_com']),
            'view': 'right on the reference, wrong on the distorted' if ref_score is not None and dis_score is not
            None and ref_score >= 0.5 > dis_score else 'other'})
    columns = [col('pair_id', 'pair'), col('task', 'task'), col('distortion', 'distortion'),
               col('strength', 'strength'), col('images', 'reference | distorted', 'images'),
               col('question', 'question'), col('options', 'options'), col('answer', 'answer'),
               col('pred_ref', 'answer on the reference'), col('pred_dis', 'answer on the distorted'),
               col('verdicts', "judge's verdicts"), col('score_ref', 'score ref', 'number'),
               col('score_dis', 'score dis', 'number'), col('score_com', 'score com', 'number')]
    filters = [{'key': 'task', 'label': 'task'}, {'key': 'distortion', 'label': 'distortion'},
               {'key': 'strength', 'label': 'strength'}, {'key': 'view', 'label': 'view'}]
    return Section(title, 'R-Bench', columns, rows, filters,
                   'view "right on the reference, wrong on the distorted": sort by distortion to see what broke')


class RBenchSteps:
    """R-Bench's steps in front of the plugin's common ones (`datasets.plugin_class_of` puts this class before
    `PluginDataset` and the kit-dialect `RBenchFull`): no judge or exact matching is refused, the offline judge
    scores without one, efficient mode's caption seed is drawn before judging (so the calls can be counted), and the
    prompts whose verdicts the verdict cache holds are settled before the dialect's judging loop. Kit-free to import;
    the methods run where the kit runs the dataset."""

    def judge_arguments(self, judge_kwargs, notes):
        from vlmeval_ext.dataset.utils.exact_io import NO_JUDGE
        from vlmeval_ext.evaluation import JudgeIncomplete
        from vlmeval_ext.io import read_progress
        from vlmeval_ext.judging import OFFLINE_JUDGES
        if judge_kwargs.get('model') in NO_JUDGE[1:]:
            raise JudgeIncomplete('R-Bench needs an LLM judge (the kit would fall back to exact matching): pass '
                                  '--judge MODEL (an OpenAI-compatible judge, see README) or --judge offline')
        if judge_kwargs.get('model') in OFFLINE_JUDGES:
            from vlmeval_ext.offline.judge import OFFLINE_LABEL
            notes.append(f"judge {judge_kwargs['model']}: {OFFLINE_LABEL}; every table says so")
        elif judge_kwargs.get('judge_mode') == 'efficient' and judge_kwargs.get('caption_seed') is None:
            # drawn here, not in the kit dialect, so the calls can be counted before judging: the seed a started
            # progress file holds (a resumed run keeps its draws), else a fresh random one
            import os
            saved = (read_progress(self._progress_file()) or {}).get('caption_seed')
            judge_kwargs['caption_seed'] = int(saved) if saved is not None else int.from_bytes(os.urandom(4), 'big')
        return judge_kwargs

    def _progress_file(self) -> str:
        from vlmeval.smp import get_intermediate_file_path
        return get_intermediate_file_path(self._eval_file, '_rbench_judge', 'pkl')

    def score(self, eval_file, handed):
        from vlmeval_ext.judging import OFFLINE_JUDGES
        self._handed = handed
        kwargs = dict(handed)
        name, protocol = self.judge_protocol(kwargs)
        items, counts, failed_rows = self.read_pairs(eval_file)
        if name in OFFLINE_JUDGES:
            from vlmeval_ext.offline.judge import score_items_offline
            rows, block = score_items_offline(items, name)
        else:
            judge = self.cached_judge(name, kwargs)
            self.settle_cached_prompts(judge, name)
            rows, block = self.score_items(items, eval_file, judge, name, **protocol)
        return self.write_results(eval_file, counts, failed_rows, rows, block, protocol['mode'])

    def settle_cached_prompts(self, judge, name: str) -> None:
        """Before the kit dialect's judging loop: each prompt still to judge whose every verdict the verdict cache
        holds is asked of the cache alone (the dialect's own `ask`, so its result is what the loop would get) and
        written to the dialect's progress file in one write. The loop then judges only the rest: the kit's
        `track_progress_rich` rewrites that file after every item it finishes, which made a fully cached rerun
        grow with the square of the items."""
        from vlmeval_ext.dataset.utils import rbench_full as rules
        from vlmeval_ext.dataset.utils.exact_io import judge_id, read_text_table
        from vlmeval_ext.io import read_progress
        from vlmeval_ext.judging import CacheReader, NotInCache
        path = self._progress_file()
        done = read_progress(path)
        if judge.store is None or done is None:     # no cache; a cut-short progress file: the dialect says so
            return
        mode = self._handed.get('judge_mode', 'official')
        try:
            items = rules.pair_rows(read_text_table(self._eval_file), self._eval_file)[0]
            _, demands, key, todo = rules.judge_requests(items, mode, self._handed.get('caption_seed'), done,
                                                         judge_id(name, judge), self._eval_file)
        except (ValueError, KeyError):
            return                                  # bad input: the evaluation itself says where, in one line
        found = {}
        for prompt in todo:
            try:
                result = rules.ask(CacheReader(judge), prompt, *demands[prompt][:2])
            except NotInCache:
                continue
            if result['failed'] is None:
                found[key[prompt]] = result
        if not found:
            return
        write_progress(path, {**done, **found})
        judge.put_in_progress_file = sum(r['calls'] for r in found.values())

    def judge_requests(self, eval_file, judge, name):
        from vlmeval_ext.dataset.utils import rbench_full as rules
        from vlmeval_ext.dataset.utils.exact_io import judge_id, read_text_table
        from vlmeval_ext.io import read_progress
        done = read_progress(self._progress_file())
        if done is None:
            return None
        mode = self._handed.get('judge_mode', 'official')
        items = rules.pair_rows(read_text_table(eval_file), eval_file)[0]
        _, demands, _, todo = rules.judge_requests(items, mode, self._handed.get('caption_seed'), done,
                                                   judge_id(name, judge), eval_file)
        return [(p, rules.calls_of(demands, p)) for p in todo], len(items), mode == 'efficient'

    def result_tag(self, judge_kwargs):
        return '_efficient' if judge_kwargs.get('judge_mode') == 'efficient' else ''


def write_progress(path: str, done: dict) -> None:
    """A kit dialect's judge progress file, written whole at once (the kit's `dump` of a dict to .pkl)."""
    import os
    import pickle
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'wb') as f:
        pickle.dump(done, f)
    os.replace(tmp, path)


class RBenchWithoutTheKit(RBenchSteps):
    """R-Bench scored without the kit where nothing needs it: with the offline judge, or with an LLM judge whose every
    verdict this evaluation needs is in the verdict cache, that judge being the one the kit built for the same inputs
    before (vlmeval_ext.kit_workarounds.judge_resolution). RBenchSteps' own steps, on the pure functions of the kit
    dialect (dataset/utils/rbench_full.py) that its `evaluate` wraps; the files written as the kit's `dump` writes
    them. Made by `scoring_without_the_kit`, which checks all that first."""

    def __init__(self, record, dataset_name: str, eval_file: str):
        self.record, self.dataset_name = record, dataset_name
        self._eval_file, self._handed, self._judge_options, self._judges = str(eval_file), {}, {}, []
        self.resolved = None                      # the judge the kit built, as judge_resolution.recall gives it
        self.settled: dict = {}                   # the progress file's entries the verdict cache answered
        self.planned = None                       # judge_requests' answer when they were asked

    def begin(self, options, eval_file):
        self._judge_options, self._judges, self._eval_file = options, [], str(eval_file)

    def _progress_file(self):
        return stem_path(self._eval_file, '_rbench_judge.pkl')

    def judge_protocol(self, judge_kwargs):
        from vlmeval_ext.dataset.utils.rbench_full import judge_protocol
        return judge_protocol(judge_kwargs)

    def read_pairs(self, eval_file):
        from vlmeval_ext.dataset.utils.exact_io import read_text_table
        from vlmeval_ext.dataset.utils.rbench_full import read_pairs
        return read_pairs(read_text_table(eval_file), eval_file)

    def cached_judge(self, name, judge_kwargs):
        """The CachedJudge of the judge the kit built before, on the verdict cache; it makes no call."""
        from vlmeval_ext.io import safe_name
        from vlmeval_ext.judging import CachedJudge, shared_store
        options = self._judge_options
        stem = stem_path(self._eval_file, '')
        judge = CachedJudge(self.resolved, name, store=shared_store(),
                            log_path=f'{stem}_{safe_name(name)}_verdicts.jsonl',
                            unstored_path=f'{stem}_unstored_verdicts.jsonl',
                            retries=options.get('judge_retries', 3), backoff=options.get('judge_backoff', 0.5),
                            retry_rejected=options.get('judge_retry_rejected', False))
        self._judges = [*self._judges, judge]
        from vlmeval_ext.evaluation import say_judge_plan
        say_judge_plan(self, judge, name, found=sum(r['calls'] for r in self.settled.values()))
        return judge

    def judge_requests(self, eval_file, judge, name):
        return self.planned

    def settle_cached_prompts(self, judge, name):
        """What the check found in the verdict cache (`scoring_without_the_kit`, the dialect's own `ask` on the
        cache alone), written to the progress file in one write: nothing is looked up twice."""
        from vlmeval_ext.io import read_progress
        if self.settled:
            path = self._progress_file()
            write_progress(path, {**(read_progress(path) or {}), **self.settled})
            judge.put_in_progress_file = sum(r['calls'] for r in self.settled.values())

    def score_items(self, items, eval_file, judge, name, mode='official', nproc=4, caption_seed=None):
        from vlmeval_ext.dataset.utils import rbench_full as rules
        from vlmeval_ext.dataset.utils.exact_io import judge_id
        from vlmeval_ext.evaluation import JudgeIncomplete
        from vlmeval_ext.io import read_progress
        done = read_progress(self._progress_file()) or {}
        if mode == 'efficient' and done.get('caption_seed') is None:   # kept for a resumed run, as the kit dialect
            done['caption_seed'] = caption_seed
            write_progress(self._progress_file(), done)
        elif mode == 'efficient':
            caption_seed = int(done['caption_seed'])
        plans, demands, key, todo = rules.judge_requests(items, mode, caption_seed, done, judge_id(name, judge),
                                                         eval_file)
        if todo:                # the cache lost verdicts since the check: nothing is scored from less
            raise JudgeIncomplete(f'{eval_file}: {len(todo)} prompt(s) are no longer answered by the verdict cache; '
                                  'run the same command again (it asks the judge for them)')
        return rules.scored_rows(items, plans, demands, key, todo, done, judge, name, mode, caption_seed)

    def write_results(self, eval_file, counts, failed_rows, rows, judge, mode='official'):
        from vlmeval_ext.dataset.utils.rbench_full import evaluation_files
        from vlmeval_ext.io import write_result_files
        files, table = evaluation_files(counts, failed_rows, rows, judge, mode)
        write_result_files(eval_file, files)
        return table

    def judges(self):
        return list(self._judges)


class _CacheKeys:
    """What judging.CacheReader needs of a judge: the verdict cache and the keys of this judge's verdicts."""

    def __init__(self, store, name: str, judge):
        from vlmeval_ext.judging import endpoint_identity, judge_parameters, parameters_sha256
        self.store, self.name = store, name
        self.endpoint = endpoint_identity(getattr(judge, 'api_base', '') or '')
        self.params_sha = parameters_sha256(judge_parameters(judge))

    def key(self, prompt, slot):
        from vlmeval_ext.judging import verdict_key
        return verdict_key(self.name, self.endpoint, self.params_sha, prompt, slot)


def scoring_without_the_kit(record, dataset, eval_file, judge_kwargs):
    """RBenchWithoutTheKit for this evaluation where it needs no kit: the offline judge; or an LLM judge the kit built
    before for the same name, arguments, kit files and environment (judge_resolution.recall), the verdict cache on,
    and every prompt still to judge answered by the cache with a verdict (efficient mode: with the caption seed its
    progress file holds, or the one given; a fresh random draw has nothing cached). None otherwise, and for anything the evaluation itself must report (bad input, a judge
    R-Bench cannot use): the kit's path says it in one line."""
    from vlmeval_ext.dataset.utils import rbench_full as rules
    from vlmeval_ext.dataset.utils.exact_io import judge_id, read_text_table
    from vlmeval_ext.errors import ExtError
    from vlmeval_ext.evaluation import split_judge_kwargs
    from vlmeval_ext.io import read_progress
    from vlmeval_ext.judging import (OFFLINE_JUDGES, CacheReader, NotInCache, cache_dir, judge_identity,
                                     kit_judge_arguments, shared_store)
    from vlmeval_ext.kit_workarounds.judge_resolution import recall
    subject = RBenchWithoutTheKit(record, dataset, eval_file)
    ext = str(eval_file).rsplit('.', 1)[-1]
    try:
        options, kwargs = split_judge_kwargs(judge_kwargs)
        if kwargs.get('model') in OFFLINE_JUDGES:
            return subject
        if not options.get('cache', True) or str(eval_file).count(f'.{ext}') != 1:
            return None                 # no cache to answer; a name the kit would not give its usual files
        subject.begin(options, eval_file)
        given = kwargs.get('caption_seed')
        handed = subject.judge_arguments(dict(kwargs), [])
        name, protocol = rules.judge_protocol(handed)
        resolved = recall(name, kit_judge_arguments(handed), cache_dir(), judge_identity)
        done = read_progress(subject._progress_file())
        if resolved is None or done is None:
            return None
        seed, saved = protocol['caption_seed'], done.get('caption_seed')
        if protocol['mode'] == 'efficient' and (saved is None and given is None                # a fresh random draw
                                                or saved is not None and int(saved) != int(seed)):
            return None
        items = rules.read_pairs(read_text_table(eval_file), eval_file)[0]
        _, demands, key, todo = rules.judge_requests(items, protocol['mode'], seed, done, judge_id(name, resolved),
                                                     eval_file)
        keys = _CacheKeys(shared_store(), name, resolved)
        settled = {}
        for prompt in todo:
            result = rules.ask(CacheReader(keys), prompt, *demands[prompt][:2])
            if result['failed'] is not None:
                return None
            settled[key[prompt]] = result
    except (ExtError, ValueError, KeyError, TypeError, NotInCache):
        return None
    subject.resolved, subject.settled = resolved, settled
    subject.planned = ([(p, rules.calls_of(demands, p)) for p in todo], len(items), protocol['mode'] == 'efficient')
    return subject


# One constant per R-Bench task: the first option, a fixed short answer, a caption that fits any image.
RBENCH_ANSWERS = {'MCQ': 'A', 'VQA': 'yes', 'CAP': 'A photo of an everyday scene with some objects in it.'}


def task_of_prompt(prompt_text: str) -> str:
    """Which official model prompt this is (MCQ / VQA / CAP), from its fixed wording."""
    from vlmeval_ext.dataset.utils.rbench_full import MODEL_PROMPTS
    text = str(prompt_text).strip()
    if text == MODEL_PROMPTS['CAP'].strip():
        return 'CAP'
    if text.endswith(MODEL_PROMPTS['MCQ'].rsplit('\n', 1)[-1]):
        return 'MCQ'
    if text.endswith(MODEL_PROMPTS['VQA'].split('}', 1)[-1]):
        return 'VQA'
    raise ValueError(f'not an R-Bench model prompt: {text[:80]!r}')


def naive_answer(prompt_text: str, dataset: str) -> str:
    return RBENCH_ANSWERS[task_of_prompt(prompt_text)]


REPORT = RBenchReport(read_headlines, page_section)
