"""GRAB as a VLMEvalKit dataset (thin: prompts, scoring and reports live in prompt.py / score.py / report.py).

Names: GRAB (the 2,170 questions, built by `vlmeval-ext prepare GRAB [--from DIR]`) and GRAB_DEMO (shipped).
evaluate() reports three scorings: official (headline), normalized, and llm_extracted when a judge is given.
"""
from __future__ import annotations

import pandas as pd

from vlmeval_ext.core.dataset import ExtImageDataset, kit_fail_message, tsv_path
from vlmeval_ext.core.io import DataError, file_md5, load_predictions, stem_path, write_json
from vlmeval_ext.grab import data as grab_data
from vlmeval_ext.grab import prompt as grab_prompt
from vlmeval_ext.grab import report as grab_report
from vlmeval_ext.grab import score as grab_score

PREDICTION_COLUMNS = ('index', 'question', 'answer', 'task', 'category', 'complexity', 'prediction')
NO_JUDGE = (None, '', 'none', 'exact_matching')   # --judge not given: official + normalized only


class GRAB(ExtImageDataset):
    TYPE = 'VQA'
    SPEC = 'grab'
    # No TSV is hosted (''): GRAB is built locally by `prepare`; GRAB_DEMO ships with the package.
    DATASET_URL = {'GRAB': '', 'GRAB_DEMO': ''}
    DATASET_MD5 = {'GRAB_DEMO': '68c37ee40912e1390716c4df194092fb'}
    DEMO_DATASETS = {'GRAB_DEMO': 'grab/demo/GRAB_DEMO.tsv'}
    REQUIRED_COLUMNS = ('index', 'pid', 'question', 'answer', 'task', 'category', 'complexity', 'image')

    def load_data(self, dataset):
        data = super().load_data(dataset)
        if data['answer'].dtype != object:
            # A split whose answers all look numeric was read as numbers ("3.0" -> 3.0): restore the text.
            data['answer'] = [grab_score.answer_text(a, q) for a, q in zip(data['answer'], data['question'])]
        return data

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        images = self.dump_image(line)
        message = [{'type': 'image', 'value': path} for path in images]
        message.append({'type': 'text', 'value': grab_prompt.question_prompt(str(line['question']))})
        return message

    @classmethod
    def prepare(cls, name, source_dir=None):
        if name != 'GRAB':
            raise DataError(f'`prepare` builds GRAB only ({name} ships with the package)')
        path = grab_data.prepare(tsv_path(name), source_dir)
        with open(f'{path}.md5', 'w') as f:      # the sidecar load_data checks
            f.write(file_md5(path) + '\n')
        return str(path)

    @classmethod
    def naive_prediction(cls, prompt_text, dataset):
        return grab_score.naive_answer(prompt_text)

    @classmethod
    def run_record(cls, dataset):
        spec = grab_prompt._spec()
        return {'prompts': {'question': spec['prompt']['template'],
                            'llm_extraction': spec['scoring']['llm_extracted']['extraction_prompt']}}

    # ---- evaluation -------------------------------------------------------------------------------------------
    def evaluate(self, eval_file, **judge_kwargs):
        preds = load_predictions(eval_file, required=PREDICTION_COLUMNS)
        fail_msg = kit_fail_message()
        rows = []
        for i, item in enumerate(preds.to_dict('records')):
            where = f'{eval_file}: row {i + 2}'
            try:
                answer = grab_score.answer_text(item['answer'], str(item['question']))
            except (TypeError, ValueError) as err:
                raise DataError(f'{where}, column \'answer\': {err}') from err
            response = item['prediction']
            if grab_score.is_missing_response(response):
                # The kit fills every row; an empty cell is an empty answer (wrong), read back as NaN.
                response = ''
            elif not isinstance(response, str):
                response = str(response)
            if fail_msg and fail_msg in response:
                response = None                       # the kit's API wrapper's "failed" text: not an answer
            rows.append({'index': item['index'], 'pid': item.get('pid', item['index']), 'task': item['task'],
                         'category': item['category'], 'complexity': int(item['complexity']),
                         'question': str(item['question']), 'answer': answer,
                         'prediction': response,
                         **grab_score.score_response(response, answer, str(item['question']))})
        # Failed items are counted here and listed in _items.tsv (column `failed`; never scored); the kit's
        # rerun retries them.
        infer_failed = [str(r['index']) for r in rows if r['failed'] is not None]
        extra = {s: {'inference_failures': len(infer_failed)} for s in ('official', 'normalized')}
        extra['normalized']['unparsed'] = sum(r['failed'] is None and r['parsed'] is None for r in rows)
        for counts in extra.values():
            counts['empty_responses'] = sum(r['prediction'] == '' for r in rows)
        judge_model = judge_kwargs.get('model')
        if judge_model not in NO_JUDGE:
            extra['llm_extracted'] = self._llm_extract(rows, eval_file, judge_kwargs)
        self.manifest_extra = {'counts': {
            'infer_failed': len(infer_failed),
            'judge_failed': extra.get('llm_extracted', {}).get('judge_failures', 0)}}
        score_rows = [{k: r[k] for k in ('task', 'category', 'complexity', 'official', 'normalized',
                                          'llm_extracted') if k in r} for r in rows]
        scores = grab_report.score_json(score_rows, extra)
        write_json(scores, stem_path(eval_file, '_score.json'))
        pd.DataFrame(grab_report.acc_table(score_rows)).to_csv(stem_path(eval_file, '_acc.csv'), index=False)
        pd.DataFrame(rows).to_csv(stem_path(eval_file, '_items.tsv'), sep='\t', index=False)
        grab_report.plot_complexity(scores, stem_path(eval_file, '_complexity.png'))
        table = grab_report.task_table(scores)
        print(table.to_string())
        return table

    def _llm_extract(self, rows, eval_file, judge_kwargs) -> dict:
        """llm_extracted per row through the shared judge runner; returns the failure accounting."""
        from vlmeval_ext.core.judge import VerdictCache, run_tasks
        from vlmeval_ext.core.judging import bind_judge

        spec_judge = grab_prompt._spec()['scoring']['llm_extracted']['official_judge']
        handle = bind_judge(judge_kwargs, default_model=spec_judge)
        tasks = {}
        for row in rows:
            row['llm_extracted'] = None
            if row['prediction'] is not None:
                tasks[str(row['index'])] = grab_score.ExtractionTask(str(row['index']), row['question'],
                                                                     row['prediction'], row['answer'])
        cache = VerdictCache(stem_path(eval_file, f'_{handle.name}_verdicts.jsonl'), handle.name)
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
        return {'judge': handle.name, 'judge_mode': handle.mode,
                'inference_failures': sum(r['prediction'] is None for r in rows),
                'inference_failed_items': [str(r['index']) for r in rows if r['prediction'] is None],
                'judge_failures': stats.failed_tasks, 'judge_failed_items': stats.failed_keys,
                'no_answer': no_answer,
                'calls_made': stats.calls_made, 'calls_cached': stats.calls_cached}


