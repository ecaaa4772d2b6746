"""RoCOCO as VLMEvalKit datasets (thin: the layouts and scoring live in data.py, mcq.py and protocol.py).

RoCOCOMCQ       RoCOCO-MCQ-<attack> (+ the shipped RoCOCO-MCQ-same_concept_DEMO): matching recast as multiple
                choice for any generative model of the kit; accuracy and the adversarial-twin choice rate.
RoCOCORetrieval RoCOCO-I2T-<clean|attack>, RoCOCO-T2I-<mix|patch>: one row per gallery/query item; an embedding
                model of this package (vlmeval_ext.rococo.models) answers each row with its vector, evaluate
                ranks them with the official protocol (R@1/5/10, R_mean, false rate; t2i per seed and mean).
Both are built by `vlmeval-ext prepare NAME --from ANNOTATION_DIR` (COCO images from $COCO_ROOT, or the --from
folder when it holds val2014/) or `python -m vlmeval_ext.rococo prepare NAME --ann-dir D --coco-root C`.
"""
from __future__ import annotations

import base64
import io
import os
import os.path as osp

import pandas as pd

from vlmeval_ext.core.dataset import ExtImageDataset, safe_join, tsv_path
from vlmeval_ext.core.io import DataError, load_predictions, require_columns, stem_path, write_json
from vlmeval_ext.rococo import data as D
from vlmeval_ext.rococo import mcq as Q

NO_JUDGE = {'model': 'none (rule-based: leading letter, then the kit can_infer)', 'mode': 'rule', 'retries': 0,
            'endpoint_host': None}


def _prepare(name: str, source_dir=None, coco_root=None, mixed_root=None) -> str:
    D.parse_name(name)
    ann_dir = source_dir or os.environ.get('ROCOCO_ANNOTATIONS')
    if not ann_dir:
        raise DataError(f'{name}: give the folder holding the RoCOCO annotation JSONs (github.com/pseulki/rococo '
                        'annotations/) with --from DIR, or set ROCOCO_ANNOTATIONS')
    root = D.resolve_coco_root(coco_root, source_dir)
    frame = D.frame_for(name, ann_dir, root, mixed_root, lazy_images=True)
    return D.write_tsv_streaming(frame, tsv_path(name))


class RoCOCOMCQ(ExtImageDataset):
    TYPE = 'MCQ'
    SPEC = 'rococo'
    # No TSV is hosted (''): the splits are built locally by `prepare`; the demo split ships with the package.
    DATASET_URL = {**{name: '' for name in D.MCQ_NAMES}, 'RoCOCO-MCQ-same_concept_DEMO': ''}
    DEMO_DATASETS = {'RoCOCO-MCQ-same_concept_DEMO': 'rococo/demo/RoCOCO-MCQ-same_concept_DEMO.tsv'}
    DATASET_MD5 = {'RoCOCO-MCQ-same_concept_DEMO': 'b173cbeddcfb77864f1d3e247bfdf600'}
    REQUIRED_COLUMNS = ('index', 'image', 'question', 'A', 'B', 'C', 'answer', 'twin')

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        message = [{'type': 'image', 'value': path} for path in self.dump_image(line)]
        item = {c: line[c] for c in Q.LETTERS if c in line and isinstance(line[c], str) and line[c]}
        message.append({'type': 'text', 'value': Q.prompt_text({'question': line['question'], **item})})
        return message

    @classmethod
    def prepare(cls, name, source_dir=None, coco_root=None):
        return _prepare(name, source_dir, coco_root)

    @classmethod
    def naive_prediction(cls, prompt_text, dataset):
        return 'A'

    @classmethod
    def run_record(cls, dataset):
        return {'judge': NO_JUDGE, 'seeds': {'mcq_options': Q.SEED},
                'prompts': {'mcq': Q.prompt_text({'question': Q.QUESTION, 'A': '{A}', 'B': '{B}', 'C': '{C}',
                                                  'D': '{D}'})}}

    def evaluate(self, eval_file, **judge_kwargs):
        from vlmeval.utils.matching_util import can_infer

        preds = load_predictions(eval_file, required=('index', 'question', 'A', 'B', 'C', 'answer', 'twin',
                                                      'prediction'))
        result, items = D.score_mcq(preds, str(eval_file), kit_infer=can_infer)
        attack = str(preds['attack'].iloc[0]) if 'attack' in preds else self.dataset_name.split('-')[-1]
        scores = {'dataset': self.dataset_name, 'attack': attack, **result,
                  'counts': {'items': result['n_items'], 'scored': result['n'], 'empty': result['empty'],
                             'inference_failures': result['inference_failed'],
                             'unparsed': result['parsed_by'].get('unparsed', 0)},
                  'judge': None,
                  'note': 'percent of scored items; empty and unparsed replies count as wrong, the kit\'s inference '
                          'failures are excluded; all are counted'}
        write_json(scores, stem_path(eval_file, '_score.json'))
        table = pd.DataFrame([{'attack': attack, 'n': result['n'], 'accuracy': round(result['accuracy'], 2),
                               'twin_rate': round(result['twin_rate'], 2), 'chance': round(result['chance'], 2),
                               'unparsed': result['unparsed'], 'empty': result['empty'],
                               'inference_failed': result['inference_failed']}])
        table.to_csv(stem_path(eval_file, '_acc.csv'), index=False)
        items.to_csv(stem_path(eval_file, '_items.tsv'), sep='\t', index=False)
        self.manifest_extra = {'judge': NO_JUDGE, 'prompts': {'mcq': Q.prompt_text(
            {'question': Q.QUESTION, 'A': '{A}', 'B': '{B}', 'C': '{C}', 'D': '{D}'})},
            'seeds': {'mcq_options': Q.SEED},
            'counts': {'unparsed': result['unparsed'], 'infer_failed': result['inference_failed']}}
        print(table.to_string(index=False))
        return table


class RoCOCORetrieval(ExtImageDataset):
    TYPE = 'Retrieval'
    SPEC = 'rococo'
    DATASET_URL = {name: '' for name in D.I2T_NAMES + D.T2I_NAMES}   # built locally by `prepare`
    DATASET_MD5 = {}
    REQUIRED_COLUMNS = D.RETRIEVAL_COLUMNS + ('image',)

    def image_rows(self, data):
        """Image rows hold an image, text rows none."""
        require_columns(data, self.REQUIRED_COLUMNS, self.data_path)
        kinds = {str(k) for k in data['kind']}
        if not kinds <= {'image', 'text'}:
            raise DataError(f'{self.data_path}: column \'kind\' must be image or text, found {sorted(kinds)}')
        return [str(k) == 'image' for k in data['kind']]

    def load_data(self, dataset):
        data = super().load_data(dataset)
        # Kept aside while the kit's __init__ runs: it would drop the text rows, which have no image.
        self._images = data.pop('image')
        return data

    def post_build(self, dataset):
        self.data['image'] = self._images.values
        self.meta_only = False
        del self._images

    def dump_image(self, line):
        """The image's bytes as stored (the COCO JPEG, no re-encoding) under img_root/<index><ext>."""
        where = f'{self.data_path}: index {line["index"]}'
        ext = osp.splitext(str(line['source']))[1].lower() or '.jpg'
        path = safe_join(self.img_root, f'{line["index"]}{ext}', where)
        if not (osp.exists(path) and osp.getsize(path) > 0):
            try:
                raw = base64.b64decode(line['image'], validate=True)
                from PIL import Image
                with Image.open(io.BytesIO(raw)) as im:
                    im.verify()
            except Exception as err:  # binascii/PIL raise many types; name the row instead
                raise DataError(f'{where}, column \'image\': not a decodable base64 image ({err})') from err
            os.makedirs(self.img_root, exist_ok=True)
            tmp = f'{path}.tmp{os.getpid()}'
            with open(tmp, 'wb') as f:
                f.write(raw)
            os.replace(tmp, path)
        return [path]

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        if line['kind'] == 'image':
            return [{'type': 'image', 'value': self.dump_image(line)[0]}]
        return [{'type': 'text', 'value': str(line['question'])}]

    @classmethod
    def prepare(cls, name, source_dir=None, coco_root=None, mixed_root=None):
        return _prepare(name, source_dir, coco_root, mixed_root)

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
        write_json(scores, stem_path(eval_file, '_score.json'))
        table = D.retrieval_table(result)
        table.insert(0, 'dataset', self.dataset_name)
        table.to_csv(stem_path(eval_file, '_acc.csv'), index=False)
        self.manifest_extra = {'judge': {'model': None, 'mode': 'embedding ranking', 'retries': 0,
                                         'endpoint_host': None},
                               'seeds': {'mixing': [int(s) for s in result.get('per_seed', {})]},
                               'counts': {'n_images': result['n_images'], 'n_texts': result['n_texts']}}
        print(table.to_string(index=False))
        return table
