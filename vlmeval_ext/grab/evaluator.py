"""GRAB's evaluator (kit-free): names, naive baseline, prepare and evaluate; `grab.dataset.GRAB` adds loading and prompts.

evaluate() reports three scorings: official (headline), normalized, and llm_extracted when an LLM judge is given
(with `--judge offline` it is skipped with a note: official and normalized need no judge).
"""
from __future__ import annotations

import os

import pandas as pd

from vlmeval_ext.core.coverage import check_against_dataset, coverage_line
from vlmeval_ext.core.evaluation import ExtEvaluation
from vlmeval_ext.core.io import DataError, int_cell, load_predictions, stem_path, tsv_path, write_json, write_md5_sidecar
from vlmeval_ext.core.judging import OFFLINE_JUDGES
from vlmeval_ext.core.plots import model_of_file, no_plot_line, run_title
from vlmeval_ext.core.predictions import EMPTY, FAILED, classify_prediction
from vlmeval_ext.core.prepare import check_item_count, count_rows
from vlmeval_ext.grab import data as grab_data
from vlmeval_ext.grab import prompt as grab_prompt
from vlmeval_ext.grab import report as grab_report
from vlmeval_ext.grab import score as grab_score

PREDICTION_COLUMNS = ('index', 'question', 'answer', 'task', 'category', 'complexity', 'prediction')
NO_JUDGE = (None, '', 'none', 'exact_matching')   # --judge not given: official + normalized only
# GRAB's llm_extracted needs an LLM to extract the answer; the offline judges are other benchmarks' local
# approximations. official and normalized need no judge, so they still run.
LLM_EXTRACTED_OFFLINE_NOTE = ('llm_extracted: skipped (--judge {judge}: GRAB\'s answer extraction needs an LLM '
                              'judge and has no offline approximation); official and normalized need no judge')


class GRABEvaluator(ExtEvaluation):
    TYPE = 'VQA'
    SPEC = 'grab'
    # No TSV is hosted (''): GRAB is built locally by `prepare`; GRAB_DEMO ships with the package.
    DATASET_URL = {'GRAB': '', 'GRAB_DEMO': ''}
    DATASET_MD5 = {'GRAB_DEMO': '68c37ee40912e1390716c4df194092fb'}
    DEMO_DATASETS = {'GRAB_DEMO': 'grab/demo/GRAB_DEMO.tsv'}
    REQUIRED_COLUMNS = ('index', 'pid', 'question', 'answer', 'task', 'category', 'complexity', 'image')

    @classmethod
    def naive_prediction(cls, prompt_text, dataset):
        return grab_score.naive_answer(prompt_text)

    @classmethod
    def prepare(cls, name, source_dir=None, allow_subset: bool = False):
        if name != 'GRAB':
            raise DataError(f'`prepare` builds GRAB only ({name} ships with the package)')
        try:
            path = grab_data.prepare(tsv_path(name), source_dir)
        except (ConnectionError, OSError) as err:      # no network, the Hub unreachable: one line, the way out
            if source_dir is not None:
                raise
            raise DataError(f'prepare GRAB: could not load it from the Hugging Face Hub ({type(err).__name__}: '
                            f'{err}); download data/grab.json and images.zip of jonathan-roberts1/GRAB elsewhere '
                            'and run `vlmeval-ext prepare GRAB --from DIR`') from err
        expected = grab_prompt._spec()['sources']['expected']['n_items']
        try:
            check_item_count('GRAB', source_dir or 'the Hugging Face source', count_rows(path), expected,
                             allow_subset)
        except DataError:
            os.remove(path)           # a partial build never takes the dataset's name
            raise
        write_md5_sidecar(path)                  # the sidecar load_data checks
        return str(path)

    @classmethod
    def run_record(cls, dataset):
        spec = grab_prompt._spec()
        return {'prompts': {'question': spec['prompt']['template'],
                            'llm_extraction': spec['scoring']['llm_extracted']['extraction_prompt']}}

    # ---- evaluation -------------------------------------------------------------------------------------------
    def evaluate(self, eval_file, **judge_kwargs):
        preds = load_predictions(eval_file, required=PREDICTION_COLUMNS)
        coverage = check_against_dataset(preds, eval_file, type(self), self.dataset_name)
        rows = [self._score_row(item, eval_file, i + 2) for i, item in enumerate(preds.to_dict('records'))]
        # The kit's failure text is no answer: listed in _items.tsv (column `failed`), never scored, re-asked by the
        # kit's rerun. An empty answer is an answer: scored (wrong) and counted as `empty`.
        infer_failed = [str(r['index']) for r in rows if r['failed'] is not None]
        extra = {s: {'inference_failures': len(infer_failed)} for s in ('official', 'normalized')}
        extra['normalized']['unparsed'] = sum(r['failed'] is None and r['parsed'] is None for r in rows)
        judge, notes = None, []
        judge_model = judge_kwargs.get('model')
        if judge_model in OFFLINE_JUDGES:
            notes.append(LLM_EXTRACTED_OFFLINE_NOTE.format(judge=judge_model))
        elif judge_model not in NO_JUDGE:
            extra['llm_extracted'] = self._llm_extract(rows, eval_file, judge_kwargs)
            judge = {'name': extra['llm_extracted']['judge'], 'mode': extra['llm_extracted']['judge_mode'],
                     'endpoint_host': extra['llm_extracted']['endpoint_host'], 'scoring': 'llm_extracted'}
        else:
            notes.append('llm_extracted: not run (no --judge); official and normalized need no judge')
        counts = {'items': len(rows), 'scored': len(rows) - len(infer_failed),
                  'empty': sum(r['prediction_kind'] == EMPTY for r in rows),
                  'inference_failures': len(infer_failed),
                  'judge_failures': extra.get('llm_extracted', {}).get('judge_failures', 0)}
        score_rows = [{k: r[k] for k in ('task', 'category', 'complexity', 'official', 'normalized',
                                          'llm_extracted') if k in r} for r in rows]
        scores = grab_report.score_json(score_rows, extra, run={'counts': counts, 'judge': judge, 'notes': notes,
                                                                'coverage': coverage})
        write_json(scores, stem_path(eval_file, '_score.json'))
        pd.DataFrame(grab_report.acc_table(score_rows)).to_csv(stem_path(eval_file, '_acc.csv'), index=False)
        pd.DataFrame(rows).to_csv(stem_path(eval_file, '_items.tsv'), sep='\t', index=False)
        plot_path = stem_path(eval_file, '_complexity.png')
        judge_text = f'{judge["name"]} (llm_extracted)' if judge else 'none (official and normalized are rule-based)'
        title = run_title(self.dataset_name, model_of_file(eval_file, self.dataset_name), judge_text,
                          counts['items'], counts['scored'])
        if self.write_plots and not grab_report.plot_complexity(scores, plot_path, title=title):
            print(no_plot_line('GRAB', plot_path, f'no item was scored ({counts["inference_failures"]} of '
                                                  f'{counts["items"]} are inference failures)'))
        table = grab_report.task_table(scores)        # printed once, by the caller (the kit or `vlmeval-ext eval`)
        print(f'[GRAB] items {counts["items"]}, scored {counts["scored"]}, empty answers {counts["empty"]} (scored '
              f'wrong), inference failures {counts["inference_failures"]} (excluded)')
        print(coverage_line('GRAB', coverage))
        for note in notes:
            print(f'[GRAB] {note}')
        return table

    @staticmethod
    def _score_row(item: dict, eval_file, row: int) -> dict:
        """One predictions row: its fields, what the prediction is (answer / empty / failed) and its scores."""
        question = item['question']
        try:
            answer = grab_score.answer_text(item['answer'], question)
        except (TypeError, ValueError) as err:
            raise DataError(f'{eval_file}: row {row}, column \'answer\': {err}') from err
        prediction = item['prediction']
        kind = classify_prediction(prediction)
        fields = {'index': item['index'], 'pid': item.get('pid', item['index']), 'task': item['task'],
                  'category': item['category'],
                  'complexity': int_cell(item['complexity'], eval_file, row, 'complexity', 0, 9),
                  'question': question, 'answer': answer, 'prediction': prediction, 'prediction_kind': kind}
        if kind == FAILED:
            return {**fields, 'official': None, 'normalized': None, 'parsed': None,
                    'failed': 'inference failed (the kit\'s failure text)'}
        try:
            scores = grab_score.score_response(prediction, answer, question)
        except ValueError as err:          # an answer no GRAB form can hold (e.g. "abc" for a number question)
            raise DataError(f'{eval_file}: row {row}, column \'answer\': {err}') from err
        return {**fields, **scores, 'failed': None}

    def _llm_extract(self, rows, eval_file, judge_kwargs) -> dict:
        """llm_extracted per row through the shared judge runner; returns the failure accounting."""
        from vlmeval_ext.core.judge import VerdictCache, run_tasks
        from vlmeval_ext.core.judging import bind_judge

        spec_judge = grab_prompt._spec()['scoring']['llm_extracted']['official_judge']
        handle = bind_judge(judge_kwargs, default_model=spec_judge)
        tasks = {}
        for row in rows:
            row['llm_extracted'] = None
            if row['failed'] is None:
                tasks[str(row['index'])] = grab_score.ExtractionTask(str(row['index']), row['question'],
                                                                     row['prediction'], row['answer'])
        cache = VerdictCache.shared(handle.name, handle.endpoint, enabled=judge_kwargs.get('cache', True),
                                    log=stem_path(eval_file, f'_{handle.name}_verdicts.jsonl'))
        results, stats = run_tasks(tasks.values(), handle.call, cache, mode=handle.mode, nproc=handle.nproc,
                                   retries=handle.retries, backoff=handle.backoff, desc='GRAB extraction')
        no_answer = 0
        for row in rows:
            task = tasks.get(str(row['index']))
            if task is None:
                continue
            row['llm_extracted'] = results[task.key].score
            row['judge_failed'] = results[task.key].failed
            extracted = task.extracted
            no_answer += extracted is grab_score.NO_ANSWER
            row['extracted'] = '<None>' if extracted is grab_score.NO_ANSWER else extracted
        failed = [str(r['index']) for r in rows if r['failed'] is not None]
        return {'judge': handle.name, 'judge_mode': handle.mode, 'endpoint_host': handle.endpoint_host,
                'inference_failures': len(failed), 'inference_failed_items': failed,
                'judge_failures': stats.failed_tasks, 'judge_failed_items': stats.failed_keys,
                'no_answer': no_answer,
                'calls_made': stats.calls_made, 'calls_cached': stats.calls_cached}
