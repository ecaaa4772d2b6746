"""GRAB: a graph analysis benchmark for LMMs (Roberts et al. 2024, arXiv 2408.11817).

2,170 questions about synthetic plots, each with one exact answer (an integer, a one-decimal
number, an interval or an equation). Three scorings, all reported: `official` (the GRAB README's
exact-match rule, the headline), `normalized` (the value read from the reply) and, with --judge,
`llm_extracted` (the README's extraction prompt, then an exact comparison).
"""
import os.path as osp
from urllib.parse import urlsplit

import pandas as pd

from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.dataset.utils import build_judge
from vlmeval.smp import (LMUDataRoot, download_file, dump, get_intermediate_file_path, get_logger,
                         md5)
from vlmeval.utils import track_progress_rich

from .utils.exact_io import (FAIL_MSG, NO_JUDGE, is_infer_fail, judge_id, load_progress,
                             read_text_table)
from .utils.grab import (NO_ANSWER, NOT_JUDGED_NOTE, evaluation_files, extraction_prompt,
                         extraction_requests, item_rows, parse_extraction_reply, question_prompt,
                         result_table, settled_without_judge, summary_line)

logger = get_logger(__name__)


def extract_answer(judge, question, response):
    """One llm_extracted call; a reply that is no answer is asked again, twice at most. A failure
    says why in `failed` and is never scored."""
    for _ in range(3):
        reply = judge.generate(extraction_prompt(question, response))
        if not isinstance(reply, str) or FAIL_MSG in reply or not reply.strip():
            return {'extracted': None, 'reply': str(reply), 'failed': 'the judge call failed'}
        extracted = parse_extraction_reply(reply)
        if extracted is not None:
            return {'extracted': extracted, 'reply': reply, 'failed': None}
    return {'extracted': None, 'reply': reply,
            'failed': f'no answer in 3 judge replies (last: {reply[:60]!r})'}


class GRAB(ImageBaseDataset):
    TYPE = 'VQA'
    DATASET_URL = {'GRAB': ''}
    DATASET_MD5 = {}
    # The README prompt is part of the benchmark: models must not replace it with their own.
    force_use_dataset_prompt = True

    def load_data(self, dataset):
        # The kit's `load` reads answers as numbers ("3.0" -> 3.0); they are compared as text.
        path = osp.join(LMUDataRoot(), f'{dataset}.tsv')
        expected = self.DATASET_MD5.get(dataset)
        if not osp.exists(path) or (expected and md5(path) != expected):
            if not self.DATASET_URL.get(dataset):
                raise FileNotFoundError(f'{path} not found (and no DATASET_URL for {dataset})')
            download_file(self.DATASET_URL[dataset], path)
            if expected and md5(path) != expected:
                raise ValueError(f"{path}: the downloaded file's md5 is not {expected}")
        self.data_path = path
        return pd.read_csv(path, sep='\t', dtype=str, keep_default_na=False)

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        message = [dict(type='image', value=p) for p in self.dump_image(line)]
        message.append(dict(type='text', value=question_prompt(line['question'])))
        return message

    @classmethod
    def report_primary_metric(cls, metrics):
        """The headline for the kit's run summary: the official Overall accuracy (the README's
        exact rule), by name (the first value would be the same today; a name cannot drift)."""
        for key, value in (metrics or {}).items():
            if str(key).endswith('scoring=official|Overall (%)'):
                return {'official Overall (%)': value}
        return {}

    @classmethod
    def report_infer_err(cls, prediction_file):
        if prediction_file is None or not osp.exists(prediction_file):
            return dict(failed=0, total=0)
        data = read_text_table(prediction_file)
        return dict(failed=sum(map(is_infer_fail, data['prediction'])), total=len(data))

    def evaluate(self, eval_file, **judge_kwargs):
        judge_name, protocol = self.judge_protocol(judge_kwargs)
        judge = None if judge_name in NO_JUDGE else build_judge(model=judge_name, **judge_kwargs)
        return self.evaluate_with(eval_file, judge, judge_name, **protocol)

    @staticmethod
    def judge_protocol(judge_kwargs):
        """(judge name, protocol arguments of evaluate_with), popped from `judge_kwargs`: what is
        left is for build_judge."""
        name = judge_kwargs.pop('model', None)
        return name, dict(mode=judge_kwargs.pop('judge_mode', 'official'),
                          nproc=judge_kwargs.pop('nproc', 4))

    def evaluate_with(self, eval_file, judge, judge_name, mode='official', nproc=4):
        """The scoring of `evaluate` with the judge given (None: no llm_extracted)."""
        rows = item_rows(read_text_table(eval_file), eval_file)
        notes, judged, counts = [], None, {}
        if judge is None:
            notes.append(NOT_JUDGED_NOTE)
        else:
            counts = self._llm_extract(rows, eval_file, judge, judge_name, mode, nproc)
            judged = {'name': judge_name, 'mode': mode, 'scoring': 'llm_extracted',
                      'endpoint_host': counts['endpoint_host'], 'calls_made': counts['calls_made'],
                      'calls_cached': counts['calls_cached']}
        files = evaluation_files(rows, counts, judged, notes)
        for name, content in files.items():
            suffix, fmt = name.rsplit('.', 1)
            dump(content, get_intermediate_file_path(eval_file, suffix, fmt))
        scores = files['_score.json']
        logger.info(summary_line(scores))
        return result_table(scores)

    def _llm_extract(self, rows, eval_file, judge, judge_name, mode, nproc):
        """llm_extracted per answered row; a failed extraction is counted, never scored 0."""
        who = judge_id(judge_name, judge)
        tmp = get_intermediate_file_path(eval_file, '_grab_extraction', 'pkl')
        done = load_progress(tmp, logger)
        for row in rows:
            row['llm_extracted'] = None
            if row['failed'] is None and mode == 'efficient' and settled_without_judge(
                    row['prediction'], row['answer']):
                row.update(llm_extracted=1, judge_failed=None, extracted=row['answer'])
        keys, todo = extraction_requests(rows, done, who, mode)
        tasks = {key: (judge, *asked) for key, asked in todo.items()}
        if tasks and not judge.working():
            raise RuntimeError(f'the judge {judge_name} does not answer (judge.working() is '
                               'False): set its key (OPENAI_API_KEY) and endpoint '
                               '(--judge-base-url), or evaluate without --judge (official and '
                               'normalized need none)')
        if tasks:
            stem = osp.splitext(osp.basename(eval_file))[0]
            print(f'{self.dataset_name}: {len(tasks)} answers to extract (one judge call each, up '
                  f'to 3 for an unreadable reply), {len(keys) - len(tasks)} extracted in '
                  f'{osp.basename(tmp)}; the bar counts answers', flush=True)
            results = track_progress_rich(extract_answer, list(tasks.values()), nproc=nproc,
                                          save=tmp, keys=list(tasks),
                                          desc=f'Judge {judge_name} on {stem} (answers)')
            done.update(zip(tasks, results))
        failed = []
        for row in rows:
            if row['index'] in keys:
                result = done.get(keys[row['index']], {})
                extracted = result.get('extracted')
                row.update(extracted=extracted, judge_failed=None if extracted is not None else (
                    result.get('failed') or 'no extraction'))
                if extracted is None:
                    failed.append(str(row['index']))
                else:
                    row['llm_extracted'] = int(extracted == row['answer'])
        return {'judge': judge_name, 'judge_mode': mode,
                'endpoint_host': urlsplit(str(getattr(judge, 'api_base', ''))).hostname,
                'inference_failures': sum(r['failed'] is not None for r in rows),
                'inference_failed_items': [str(r['index']) for r in rows if r['failed']],
                'judge_failures': len(failed), 'judge_failed_items': failed,
                'no_answer': sum(r.get('extracted') == NO_ANSWER for r in rows),
                'calls_made': len(tasks), 'calls_cached': len(set(keys.values())) - len(tasks)}
