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

from vlmeval_ext.core.coverage import check_against_dataset, coverage_line
from vlmeval_ext.core.dataset import BadImageCell, ExtImageDataset, safe_join
from vlmeval_ext.core.io import DataError, load_predictions, require_columns, stem_path, write_json
from vlmeval_ext.rococo import data as D
from vlmeval_ext.rococo import mcq as Q
from vlmeval_ext.rococo.evaluator import RoCOCOMCQEvaluator, RoCOCORetrievalEvaluator
from vlmeval_ext.rococo.report import mcq_result_table


class RoCOCOMCQ(RoCOCOMCQEvaluator, ExtImageDataset):
    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        message = [{'type': 'image', 'value': path} for path in self.dump_image(line)]
        item = {c: line[c] for c in Q.LETTERS if c in line and isinstance(line[c], str) and line[c]}
        message.append({'type': 'text', 'value': Q.prompt_text({'question': line['question'], **item})})
        return message

    def evaluate(self, eval_file, **judge_kwargs):
        preds = load_predictions(eval_file, required=('index', 'question', 'A', 'B', 'C', 'answer', 'twin',
                                                      'prediction'))
        coverage = check_against_dataset(preds, eval_file, type(self), self.dataset_name,
                                         answer_columns=('answer', 'twin', 'A', 'B', 'C'))
        result, items = D.score_mcq(preds, str(eval_file))
        attack = str(preds['attack'].iloc[0]) if 'attack' in preds else self.dataset_name.split('-')[-1]
        scores = {'dataset': self.dataset_name, 'attack': attack, **result,
                  'counts': {'items': result['n_items'], 'scored': result['n'], 'empty': result['empty'],
                             'inference_failures': result['inference_failed'],
                             'unparsed': result['parsed_by'].get('unparsed', 0) + result['parsed_by'].get('hedge', 0),
                             'hedges': result['parsed_by'].get('hedge', 0)},
                  'judge': None,
                  'note': 'percent of scored items; empty, hedged and unparsed replies count as wrong, the kit\'s '
                          'inference failures are excluded; all are counted',
                  'coverage': coverage}
        write_json(scores, stem_path(eval_file, '_score.json'))
        table = pd.DataFrame([{'attack': attack, 'n': result['n'], 'accuracy': round(result['accuracy'], 2),
                               'twin_rate': round(result['twin_rate'], 2), 'chance': round(result['chance'], 2),
                               'unparsed': result['unparsed'], 'empty': result['empty'],
                               'inference_failed': result['inference_failed']}])
        table.to_csv(stem_path(eval_file, '_acc.csv'), index=False)
        items.to_csv(stem_path(eval_file, '_items.tsv'), sep='\t', index=False)
        print(coverage_line('RoCOCO', coverage))
        return mcq_result_table(self.dataset_name, result)    # printed once, by the kit or `vlmeval-ext eval`


class RoCOCORetrieval(RoCOCORetrievalEvaluator, ExtImageDataset):
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
        super().post_build(dataset)

    def dump_image(self, line):
        """The image's bytes as stored (the COCO JPEG, no re-encoding) under img_root/<index><ext>."""
        where = f'{self.data_path}: index {line["index"]}'
        ext = osp.splitext(str(line['source']))[1].lower() or '.jpg'
        path = safe_join(self.image_folder(), f'{line["index"]}{ext}', where)
        if not (osp.exists(path) and osp.getsize(path) > 0):
            try:
                raw = base64.b64decode(line['image'], validate=True)
                from PIL import Image
                with Image.open(io.BytesIO(raw)) as im:
                    im.verify()
            except Exception as err:  # binascii/PIL raise many types; name the row instead
                raise BadImageCell(f'{where}, column \'image\': not a decodable base64 image ({err})') from err
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

