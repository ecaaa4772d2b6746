"""ReMI's evaluator (kit-free): names, input modes, naive baseline, prepare and evaluate; `remi.dataset.ReMI` adds
loading and prompts. Rule-based scoring, no judge."""
from __future__ import annotations

import json
import os.path as osp

import pandas as pd

from vlmeval_ext.core.coverage import check_against_dataset, coverage_line
from vlmeval_ext.core.evaluation import ExtEvaluation
from vlmeval_ext.core.io import DataError, load_predictions, stem_path, tsv_path, write_json, write_kit_tsv
from vlmeval_ext.core.prepare import check_item_count
from vlmeval_ext.core.plots import run_title

from . import data as remi_data
from . import prompt as remi_prompt
from . import report as remi_report
from . import score as remi_score

NAMES = remi_prompt.dataset_names()


class ReMIEvaluator(ExtEvaluation):
    TYPE = 'VQA'
    SPEC = 'remi'
    # No TSV is hosted (''): ReMI is built locally by `prepare`; the ReMI_DEMO split ships with the package.
    DATASET_URL = {name: '' for name in NAMES}
    DATASET_MD5 = {'ReMI_DEMO': 'c24914e5ecae62ad5e1b4db8534d986b'}   # the shipped demo TSV (split name: all three modes read it)
    DEMO_DATASETS = {name: 'remi/demo/ReMI_DEMO.tsv' for name, (split, _) in NAMES.items() if split == 'ReMI_DEMO'}
    REQUIRED_COLUMNS = ('index', 'question', 'answer', 'task', 'image')

    @property
    def input_mode(self) -> str:
        return NAMES[self.dataset_name][1]

    @classmethod
    def source_split(cls, dataset):
        return NAMES[dataset][0]                     # the three modes read the same split TSV

    @classmethod
    def prepare(cls, name, source_dir=None, allow_subset: bool = False) -> str:
        split = NAMES[name][0]
        if split != 'ReMI':
            raise DataError(f'{name} ships with the package; prepare builds ReMI from the official parquet')
        try:
            files = remi_data.find_split_files(source_dir) if source_dir else [remi_data.download_split('test')]
        except (FileNotFoundError, RuntimeError) as err:     # a missing folder or file, no network: one line
            raise DataError(f'prepare {name}: {err}') from err
        frame = remi_data.convert_files(files)
        check_item_count('ReMI', ', '.join(map(str, files)), len(frame),
                         int(remi_prompt._spec()['source']['sizes']['test']), allow_subset)
        return write_kit_tsv(frame, tsv_path(split))

    @classmethod
    def run_record(cls, dataset):
        spec = remi_prompt._spec()['prompt']
        return {'input_mode': NAMES[dataset][1], 'judge': {'model': None, 'mode': 'rule-based (no judge)'},
                'prompts': {'appendix_common': spec['appendix_common'], **spec['appendix_task']}}

    @classmethod
    def naive_prediction(cls, prompt_text: str, dataset: str) -> str:
        # The prompt does not say its task unambiguously, so the reference model answers one constant ("0", the
        # EmojiAlgebra/RefCoco baseline). The per-task naive baselines of the spec are computed in evaluate.
        return json.dumps({'explanation': 'naive baseline', 'answer': '0'})

    def evaluate(self, eval_file, **judge_kwargs):
        """Rule-based (no judge): official (the headline) and lenient scorings. Writes <stem>_score.json, _items.tsv,
        _tasks.{md,csv,png}; returns the summary."""
        preds = load_predictions(eval_file, required=('index', 'prediction', 'answer', 'task'))
        coverage = check_against_dataset(preds, eval_file, type(self), self.dataset_name)
        rows = []
        for row in preds.to_dict('records'):
            # vlmeval_ext.core.predictions decides: the kit's failure text is excluded (counted, re-asked); an empty
            # answer is scored (get_pred('') is BAD_JSON: wrong) and counted as empty.
            result = remi_score.score_item(row['task'], row['prediction'], row['answer'])
            rows.append({'index': row['index'], 'task': row['task'], 'answer': row['answer'], **result})
        summary = remi_score.summarise(rows, self.input_mode)
        summary['coverage'] = coverage
        pd.DataFrame(rows).to_csv(stem_path(eval_file, '_items.tsv'), sep='\t', index=False)
        write_json(summary, stem_path(eval_file, '_score.json'))
        stem = stem_path(eval_file, '')
        model_name = osp.basename(stem).split(f'_{self.dataset_name}')[0]
        title = run_title(self.dataset_name, model_name, 'none (rule-based, the authors\' evaluation code)',
                          summary['counts']['items'], summary['counts']['scored'])
        remi_report.write_report(summary, stem, model_name, plot=self.write_plots,
                                 title=f'{title}\nofficial accuracy per task ({self.input_mode} input)')
        for line in remi_report.accounting_lines(summary):
            print(f'[ReMI] {line}')
        print(coverage_line('ReMI', coverage))
        return remi_report.result_table(summary)     # printed once, by the caller (the kit or `vlmeval-ext eval`)
