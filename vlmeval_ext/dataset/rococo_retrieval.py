"""RoCOCO retrieval: image-text retrieval when adversarial captions and mixed images are injected
into the COCO 5k test gallery (Park et al. 2023, arXiv 2304.10727).

RoCOCO-I2T-<clean | same_concept | diff_concept | rand_voca | danger>: the images query every
caption of the annotation file; RoCOCO-T2I-<mix | patch>: the clean captions query the originals
plus their mixed versions (seeds 1, 10, 100). One row per gallery or query item; an embedding
model (vlmeval/vlm/rococo_embedding.py: RoCOCO-CLIP-B32, ...) answers each row with its vector,
and evaluate ranks them: R@1/5/10, R_mean and the false rate, in percent as in the paper.
"""
import base64
import io
import os
import os.path as osp

import pandas as pd

from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.smp import (LMUDataRoot, download_file, dump, get_intermediate_file_path, get_logger,
                         md5)

from .utils.exact_io import read_text_table
from .utils.rococo_retrieval import evaluation_files, result_table

logger = get_logger(__name__)
I2T = ('clean', 'same_concept', 'diff_concept', 'rand_voca', 'danger')
T2I = ('mix', 'patch')


class RoCOCORetrieval(ImageBaseDataset):
    TYPE = 'Retrieval'
    force_use_dataset_prompt = True  # a row is its image or its caption, nothing else
    DATASET_URL = {**{f'RoCOCO-I2T-{k}': '' for k in I2T}, **{f'RoCOCO-T2I-{m}': '' for m in T2I}}
    DATASET_MD5 = {}

    def load_data(self, dataset):
        path = osp.join(LMUDataRoot(), f'{dataset}.tsv')
        expected = self.DATASET_MD5.get(dataset)
        if not osp.exists(path) or (expected and md5(path) != expected):
            if not self.DATASET_URL.get(dataset):
                raise FileNotFoundError(f'{path} not found (and no DATASET_URL for {dataset})')
            download_file(self.DATASET_URL[dataset], path)
            if expected and md5(path) != expected:
                raise ValueError(f"{path}: the downloaded file's md5 is not {expected}")
        self.data_path = path
        data = pd.read_csv(path, sep='\t', dtype=str, keep_default_na=False)
        # Text rows have no image: kept aside while the kit's __init__ drops image-less rows.
        self._images = data.pop('image')
        return data

    def post_build(self, dataset):
        self.data['image'] = self._images.values
        self.meta_only = False
        del self._images

    def dump_image(self, line):
        """The image's bytes as stored (the COCO JPEG, not re-encoded), as <index><ext>."""
        ext = osp.splitext(str(line['source']))[1].lower() or '.jpg'
        path = osp.join(self.img_root, f"{line['index']}{ext}")
        if not (osp.exists(path) and osp.getsize(path) > 0):
            raw = base64.b64decode(line['image'], validate=True)
            from PIL import Image
            with Image.open(io.BytesIO(raw)) as im:
                im.verify()
            os.makedirs(self.img_root, exist_ok=True)
            with open(f'{path}.tmp', 'wb') as f:
                f.write(raw)
            os.replace(f'{path}.tmp', path)
        return [path]

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        if line['kind'] == 'image':
            return [dict(type='image', value=self.dump_image(line)[0])]
        return [dict(type='text', value=line['question'])]

    @classmethod
    def report_primary_metric(cls, metrics):
        """The headline for the kit's run summary: R@1 (%) of this run (of the mean row over the
        mixed galleries' seeds), by name."""
        for key, value in (metrics or {}).items():
            if str(key).endswith(('=this run|R@1 (%)', '=mean|R@1 (%)')):
                return {'R@1 (%)': value}
        return {}

    def evaluate(self, eval_file, **judge_kwargs):
        """Ranks the model's embeddings: writes _score.json, _acc.csv and _ranks.tsv (per query:
        the rank of its first positive, whether the top-1 is a false match, the top 5)."""
        files = evaluation_files(read_text_table(eval_file), self.dataset_name, eval_file)
        for name, content in files.items():
            suffix, fmt = name.rsplit('.', 1)
            dump(content, get_intermediate_file_path(eval_file, suffix, fmt))
        result = files['_score.json']
        logger.info(f"RoCOCO {result['direction']}: {result['n_images']} images, "
                    f"{result['n_texts']} captions, R@1 {result['metrics']['R@1']:.2f} %")
        return result_table(self.dataset_name, files['_acc.csv'])
