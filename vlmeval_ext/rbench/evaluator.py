"""R-Bench-Full's evaluator (kit-free): names, splits, naive baseline, prepare and evaluate (the judge protocol: official,
efficient or offline); `rbench.dataset.RBenchFull` adds loading and prompts. An API judge is built through the
kit when evaluate runs; `--judge offline` needs no kit."""
from __future__ import annotations

from vlmeval_ext.core.coverage import check_against_dataset, coverage_line
from vlmeval_ext.core.evaluation import ExtEvaluation
from vlmeval_ext.core.io import DataError, load_predictions, stem_path, tsv_path, write_md5_sidecar
from vlmeval_ext.core.plots import model_of_file, run_title
from vlmeval_ext.core.spec import load_spec
from vlmeval_ext.rbench import evaluation as rb_eval
from vlmeval_ext.rbench import report as rb_report
from vlmeval_ext.rbench.make_demo import DEMO_MD5
from vlmeval_ext.rbench.prompt import naive_answer

FULL = 'R-Bench-Full'
DEMO = 'R-Bench-Full_DEMO'
SUBSETS = {'R-Bench-Full-MCQ': 'MCQ', 'R-Bench-Full-VQA': 'VQA', 'R-Bench-Full-CAP': 'CAP'}
# The paper's judge: GPT-3.5-turbo (the kit's name for the 0125 snapshot).
OFFICIAL_JUDGE = 'chatgpt-0125'


class RBenchEvaluator(ExtEvaluation):
    TYPE = 'VQA'          # kit judge default for VQA: none, so bind_judge picks the official GPT-3.5
    SPEC = 'rbench'
    # No TSV is hosted (''): R-Bench-Full is built locally by `prepare`; the demo split ships with the package.
    DATASET_URL = {FULL: '', **{name: '' for name in SUBSETS}, DEMO: ''}
    DATASET_MD5 = {DEMO: DEMO_MD5}
    DEMO_DATASETS = {DEMO: 'rbench/demo/R-Bench-Full_DEMO.tsv'}
    REQUIRED_COLUMNS = ('index', 'pair_id', 'variant', 'name', 'question', 'choice', 'answer', 'type',
                        'distortion', 'strength', 'image')

    # ---- data -------------------------------------------------------------------------------------------------
    @classmethod
    def source_split(cls, dataset):
        return FULL if dataset in SUBSETS else dataset     # the subsets read R-Bench-Full.tsv

    @classmethod
    def rows_of(cls, dataset, table):
        """The rows of `dataset` in its split's table (a task subset: that task's rows)."""
        return table[table['type'] == SUBSETS[dataset]] if dataset in SUBSETS else table

    @classmethod
    def naive_prediction(cls, prompt_text: str, dataset: str) -> str:
        return naive_answer(prompt_text)

    @classmethod
    def prepare(cls, name, source_dir=None, allow_subset: bool = False) -> str:
        if name not in (FULL, *SUBSETS):
            raise DataError(f'`prepare` builds {FULL} (and its task subsets); {name} ships with the package')
        from vlmeval_ext.rbench.data import prepare as prepare_tsv
        path = tsv_path(FULL)
        prepare_tsv(source_dir, path, allow_subset=allow_subset)
        write_md5_sidecar(path)                  # the sidecar load_data checks
        return path

    @classmethod
    def run_record(cls, dataset):
        spec = load_spec('rbench')
        return {'prompts': {**{f'model_{t}': spec['model_prompts'][t] for t in rb_report.TASKS},
                            **{f'judge_{t}': spec['judge_prompts'][t] for t in rb_report.TASKS}}}

    # ---- evaluation ---------------------------------------------------------------------------------------
    def evaluate(self, eval_file, **judge_kwargs):
        """Judge the three scores per item and write the robustness report; returns the robustness table."""
        from vlmeval_ext.core.judging import bind_judge
        from vlmeval_ext.rbench.offline_judge import OFFLINE_LABEL, OfflineJudge

        preds = load_predictions(eval_file, required=rb_eval.PREDICTION_COLUMNS)
        coverage = check_against_dataset(preds, eval_file, type(self), self.dataset_name,
                                         answer_columns=('answer', 'choice', 'type'))
        pairing = rb_eval.pair_predictions(preds.to_dict('records'), eval_file)
        items = pairing.items
        if not items:
            raise DataError(f'{eval_file}: no predictions')
        handle = bind_judge(judge_kwargs, default_model=OFFICIAL_JUDGE, offline_factory=OfflineJudge)
        mode = 'offline' if handle.offline else handle.mode
        if handle.offline:
            rows, summary = self._judge_offline(items, handle, pairing)
            label = f'{handle.name}: {OFFLINE_LABEL}'
        else:
            rows, summary = self._judge_api(items, handle, pairing, eval_file, judge_kwargs.get('cache', True))
            label = f'judge {handle.name} ({mode} mode)'
        summary['failures']['excluded_scores'] = rb_report.failure_counts(rows)
        # Which rows failed, not only how many: [predictions index (or pair_id for a missing row), reason].
        summary['failures']['failed_rows'] = [[i.item() if hasattr(i, 'item') else i, reason]
                                              for i, reason in pairing.failed_rows]
        summary['label'] = label
        summary['name'], summary['endpoint_host'] = handle.name, handle.endpoint_host
        counts = rb_eval.run_counts(pairing, rows, summary['failures']['judge_failed_scores'])
        stem = stem_path(eval_file, '')
        judge_text = OFFLINE_LABEL if handle.offline else f'{handle.name} ({mode} mode)'
        title = run_title(self.dataset_name, model_of_file(eval_file, self.dataset_name), judge_text,
                          counts['items'], counts.get('scored'))
        result = rb_report.write_report(rows, stem, judge=summary, label=label,
                                        judge_label=label if handle.offline else None, counts=counts,
                                        plots=self.write_plots, title=title, coverage=coverage)
        table = {metric: result[metric] for metric in ('absolute', 'relative')}   # computed once, by write_report
        self._print(table, summary, label, counts)
        print(coverage_line('R-Bench', coverage))
        return rb_report.result_table(table)      # printed once, by the caller (the kit or `vlmeval-ext eval`)

    def _judge_api(self, items, handle, pairing, eval_file, use_cache=True):
        from vlmeval_ext.core.judge import VerdictCache, run_tasks
        from vlmeval_ext.rbench.score import resolve_aliases
        tasks, aliases = rb_eval.judge_tasks(items, self.dataset_name, handle.mode)
        cache = VerdictCache.shared(handle.name, handle.endpoint, enabled=use_cache,
                                    log=stem_path(eval_file, f'_{handle.name}_verdicts.jsonl'))
        results, stats = run_tasks(tasks, handle.call, cache, mode=handle.mode, nproc=handle.nproc,
                                   retries=handle.retries, backoff=handle.backoff, desc='R-Bench judging')
        results = resolve_aliases(results, aliases)

        def score_of(item, kind):
            step = results[f'{self.dataset_name}|{item.pair_id}|{kind}']
            return None if step.failed else step.score
        rows = rb_eval.score_rows(items, score_of)
        judge_failed = sum(1 for k, s in results.items() if s.failed)
        summary = rb_eval.judge_summary(
            len(items), handle.mode, handle.name, calls_made=stats.calls_made, calls_cached=stats.calls_cached,
            decided_without_judge=stats.decided_without_judge, reused_verdicts=len(aliases),
            judge_failed=judge_failed, infer_failed=pairing.infer_failed,
            missing_partner=pairing.missing_partner)
        summary['call_failures'] = stats.call_failures
        summary['failed_keys'] = sorted(k for k, s in results.items() if s.failed)[:50]
        if stats.failed_keys:
            print(f'[R-Bench] {judge_failed} judged score(s) failed after retries (excluded from means, '
                  f'retried by the next run); first: {results[stats.failed_keys[0]].failed}')
        return rows, summary

    def _judge_offline(self, items, handle, pairing):
        judge = handle.call                       # the OfflineJudge built by bind_judge's offline_factory
        scores = {}
        for kind in ('dis', 'ref', 'com'):
            todo = [it for it in items if kind in rb_eval.scorable_kinds(it)]
            for item, value in zip(todo, judge.score_many(todo, kind)):
                scores[(item.pair_id, kind)] = value
        rows = rb_eval.score_rows(items, lambda item, kind: scores.get((item.pair_id, kind)))
        summary = rb_eval.judge_summary(len(items), 'offline', handle.name, infer_failed=pairing.infer_failed,
                                        missing_partner=pairing.missing_partner)
        return rows, summary

    @staticmethod
    def _print(table, summary, label, counts):
        failures = summary['failures']
        print(f'[R-Bench] robustness scores on the paper\'s 0-1 scale; {label}')
        if counts['empty']:
            print(f'[R-Bench] empty outputs: {counts["empty"]} row(s), judged like any other output (the official '
                  'protocol)')
        print(f'[R-Bench] judge calls: {summary["calls"]} ({summary["calls_per_item"]} per item, mode '
              f'{summary["mode"]}); excluded failed scores: {failures["excluded_scores"]} (inference-failed rows '
              f'{failures["inference_failed_rows"]}, items missing a partner row {failures["missing_partner_items"]}, '
              f'judge-failed scores {failures["judge_failed_scores"]})')
