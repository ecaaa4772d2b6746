"""RoCOCO's evaluators (kit-free): names, run records, naive baseline, prepare, and the retrieval evaluate (ranking of the
model's embeddings); `rococo.dataset` adds loading, prompts and the MCQ evaluate."""
from __future__ import annotations

from vlmeval_ext.core.evaluation import ExtEvaluation
from vlmeval_ext.core.io import load_predictions, stem_path, write_json
from vlmeval_ext.core.plots import model_of_file
from vlmeval_ext.rococo import data as D
from vlmeval_ext.rococo import mcq as Q
from vlmeval_ext.rococo.report import retrieval_result_table

NO_JUDGE = {'model': 'none (rule-based: a stated capital letter, else the text of exactly one option)',
            'mode': 'rule', 'retries': 0, 'endpoint_host': None}


# Weight-free smoke tests of the retrieval pipeline (embed.SmokeHashEmbedder), not models.
SMOKE_TEST_MODELS = ('RoCOCO-Smoke-Hash',)
SMOKE_TEST_NOTE = ('RoCOCO-Smoke-Hash is a weight-free smoke test of the pipeline, not a model: its recalls are '
                   'about chance level and are never compared with the paper')


class RoCOCOMCQEvaluator(ExtEvaluation):
    TYPE = 'MCQ'
    SPEC = 'rococo'
    # No TSV is hosted (''): the splits are built locally by `prepare`; the demo split ships with the package.
    DATASET_URL = {**{name: '' for name in D.MCQ_NAMES}, 'RoCOCO-MCQ-same_concept_DEMO': ''}
    DEMO_DATASETS = {'RoCOCO-MCQ-same_concept_DEMO': 'rococo/demo/RoCOCO-MCQ-same_concept_DEMO.tsv'}
    DATASET_MD5 = {'RoCOCO-MCQ-same_concept_DEMO': 'b173cbeddcfb77864f1d3e247bfdf600'}
    REQUIRED_COLUMNS = ('index', 'image', 'question', 'A', 'B', 'C', 'answer', 'twin')

    @classmethod
    def naive_prediction(cls, prompt_text, dataset):
        return 'A'

    @classmethod
    def prepare(cls, name, source_dir=None, coco_root=None) -> str:
        return D.prepare_tsv(name, source_dir, coco_root)

    @classmethod
    def run_record(cls, dataset):
        return {'judge': NO_JUDGE, 'seeds': {'mcq_options': Q.SEED},
                'prompts': {'mcq': Q.prompt_text({'question': Q.QUESTION, 'A': '{A}', 'B': '{B}', 'C': '{C}',
                                                  'D': '{D}'})}}


class RoCOCORetrievalEvaluator(ExtEvaluation):
    TYPE = 'Retrieval'
    SPEC = 'rococo'
    DATASET_URL = {name: '' for name in D.I2T_NAMES + D.T2I_NAMES}   # built locally by `prepare`
    DATASET_MD5 = {}
    REQUIRED_COLUMNS = D.RETRIEVAL_COLUMNS + ('image',)

    @classmethod
    def prepare(cls, name, source_dir=None, coco_root=None, mixed_root=None) -> str:
        return D.prepare_tsv(name, source_dir, coco_root, mixed_root)

    @classmethod
    def run_record(cls, dataset):
        return {'judge': {'model': None, 'mode': 'embedding ranking', 'retries': 0, 'endpoint_host': None}}

    @classmethod
    def naive_prediction(cls, prompt_text, dataset):
        raise NotImplementedError(f'{dataset} is scored from embeddings: run it with an embedding model '
                                  '(RoCOCO-CLIP-B32, RoCOCO-BLIP-ITC, ...); Naive-Baseline answers RoCOCO-MCQ-*')

    def evaluate(self, eval_file, **judge_kwargs):
        preds = load_predictions(eval_file, required=D.RETRIEVAL_COLUMNS + ('prediction',))
        direction = 'i2t' if '-I2T-' in self.dataset_name else 't2i'
        result = D.score_retrieval(preds, direction, str(eval_file))
        scores = {'dataset': self.dataset_name, **result}
        if model_of_file(eval_file, self.dataset_name) in SMOKE_TEST_MODELS:
            scores['note'] = SMOKE_TEST_NOTE
            print(f'[RoCOCO] {SMOKE_TEST_NOTE}')
        write_json(scores, stem_path(eval_file, '_score.json'))
        table = D.retrieval_table(result)
        table.insert(0, 'dataset', self.dataset_name)
        table.to_csv(stem_path(eval_file, '_acc.csv'), index=False)
        return retrieval_result_table(self.dataset_name, table)   # printed once, by the kit or `vlmeval-ext eval`
