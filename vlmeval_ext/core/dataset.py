"""The thin base every dataset class of vlmeval-ext derives from (imports the kit).

It keeps the kit's contract (TSV with base64 images under $LMUData, `build_prompt(line)`, `evaluate(eval_file,
**judge_kwargs)`, the kit's file names) and drops its bad habits: image-list cells are parsed with json /
ast.literal_eval (the kit eval()s them), a missing or corrupt TSV is a clear error (the kit re-downloads or
returns None), image paths cannot leave the image folder, and an md5 mismatch stops the run.
"""
from __future__ import annotations

import os
import os.path as osp
import shutil
from importlib import resources
from pathlib import Path

import pandas as pd
from vlmeval.dataset.image_base import ImageBaseDataset

from vlmeval_ext.core.io import (DataError, check_unique_index, file_md5, parse_list_cell, read_table,
                                 lmu_data_root, require_columns, stem_path, tsv_path, write_kit_tsv)


def write_dataset_tsv(df: pd.DataFrame, name: str, out_dir: str | None = None) -> str:
    """Write `<name>.tsv` under $LMUData (or out_dir) the kit's way, with the `.md5` sidecar load_data checks."""
    return write_kit_tsv(df, osp.join(out_dir or lmu_data_root(), f'{name}.tsv'))


def kit_fail_message() -> str | None:
    """The text the kit's API wrappers put in place of an answer when every call failed (an inference failure)."""
    import inspect

    from vlmeval.api.base import BaseAPI
    parameter = inspect.signature(BaseAPI.__init__).parameters.get('fail_msg')
    return parameter.default if parameter is not None else None


def safe_join(root: str, name: str, where: str) -> str:
    """Join an image name from data under root; refuse absolute paths and '..' (nothing written outside)."""
    if not name or osp.isabs(name) or '..' in Path(name).parts or name.startswith(('~', '\\')):
        raise DataError(f'{where}: image name {name!r} is absolute or leaves the image folder')
    path = osp.normpath(osp.join(root, name))
    if not path.startswith(osp.normpath(root) + os.sep):
        raise DataError(f'{where}: image name {name!r} leaves the image folder')
    return path


class ExtImageDataset(ImageBaseDataset):
    """Base of our image datasets. Subclasses set SPEC, TYPE, DATASET_URL (their own!), REQUIRED_COLUMNS,
    optionally DEMO_DATASETS {name: path inside the vlmeval_ext package}, and implement build_prompt/evaluate.
    """

    MODALITY = 'IMAGE'
    TYPE = 'VQA'
    SPEC: str | None = None
    DATASET_URL: dict = {}
    DATASET_MD5: dict = {}
    DEMO_DATASETS: dict = {}
    REQUIRED_COLUMNS: tuple = ('index', 'question')
    # Stop models (InternVL, Qwen-VL, ...) from replacing our official prompts with their own.
    force_use_dataset_prompt = True

    def __init_subclass__(cls, **kwargs):
        """Every evaluate of a subclass also writes `<stem>_manifest.json` (what the scores depend on)."""
        super().__init_subclass__(**kwargs)
        from vlmeval_ext import registry
        if 'DATASET_URL' in cls.__dict__ and registry.kit_dataset_module_ready():
            # Covers the import order `import vlmeval_ext.grab.dataset` first: the kit's registration ran while
            # our modules were half-loaded; each class created afterwards registers itself and the rest.
            registry.register_class(cls)
            registry.register_datasets()
        evaluate = cls.__dict__.get('evaluate')
        if evaluate is None or getattr(evaluate, '_writes_manifest', False):
            return

        def evaluate_with_manifest(self, eval_file, **judge_kwargs):
            from vlmeval_ext.core.manifest import write_manifest
            self.manifest_extra = {}
            result = evaluate(self, eval_file, **judge_kwargs)
            from vlmeval_ext.core.io import read_table
            write_manifest(self.dataset_name, eval_file, judge_kwargs, self.manifest_extra,
                           n_items=len(read_table(eval_file)), tsv=tsv_path(self.dataset_name))
            score_json = stem_path(eval_file, '_score.json')
            if os.path.exists(score_json):
                # Ours next to the paper's numbers when the model maps to a published row.
                from vlmeval_ext.core.published import side_by_side_for_run
                side_by_side_for_run(self.dataset_name, Path(eval_file).resolve().parent.name, score_json)
            return result

        evaluate_with_manifest._writes_manifest = True
        evaluate_with_manifest.__doc__ = evaluate.__doc__
        cls.evaluate = evaluate_with_manifest

    # Only `dataset` and `skip_noimg`: the kit's run.py passes every CLI argument whose name matches.
    def __init__(self, dataset: str, skip_noimg: bool = True):
        self.dataset_name = dataset
        self.img_root = osp.join(lmu_data_root(), 'images', dataset)
        self.data_path = tsv_path(dataset)
        data = self.load_data(dataset)
        self.skip_noimg = skip_noimg
        self.meta_only = 'image' not in data
        if 'image' in data:
            missing = data['image'].isna() | (data['image'].astype(str).str.strip() == '')   # cells are text
            if missing.any():
                rows = [int(i) + 2 for i in data.index[missing][:5]]
                raise DataError(f'{self.data_path}: column \'image\' is empty at line(s) {rows}')
            data['image'] = self._resolve_images(data)
        if 'image_path' in data:
            data['image_path'] = [self._as_list_or_str(v, i, 'image_path') for i, v in enumerate(data['image_path'])]
        self.data = data
        self.post_build(dataset)

    # ---- names and files --------------------------------------------------------------------------------------
    @classmethod
    def supported_datasets(cls):
        return list(cls.DATASET_URL) + [n for n in cls.DEMO_DATASETS if n not in cls.DATASET_URL]

    @classmethod
    def for_evaluation(cls, dataset: str):
        """An instance that can evaluate a predictions file without the dataset TSV being present."""
        if dataset not in cls.supported_datasets():
            raise DataError(f'{cls.__name__} does not know dataset {dataset!r}')
        obj = cls.__new__(cls)
        obj.dataset_name = dataset
        obj.data = None
        return obj

    @classmethod
    def demo_tsv(cls, dataset: str) -> Path:
        return Path(str(resources.files('vlmeval_ext'))) / cls.DEMO_DATASETS[dataset]

    def load_data(self, dataset):
        path = self.data_path
        if dataset in self.DEMO_DATASETS and not osp.exists(path):
            # The demo split ships inside the package; place it under $LMUData as the kit expects.
            shutil.copyfile(self.demo_tsv(dataset), path)
        if not osp.exists(path):
            raise DataError(f'{path}: dataset TSV not found. Build it with `vlmeval-ext prepare {dataset}` '
                            f'(offline: `vlmeval-ext prepare {dataset} --from DIR`); LMUData={lmu_data_root()}')
        expected = self.DATASET_MD5.get(dataset)
        sidecar = path + '.md5'
        if expected is None and osp.exists(sidecar):
            expected = open(sidecar).read().strip()
        if expected:
            actual = file_md5(path)
            if actual != expected:
                raise DataError(f'{path}: md5 {actual} does not match the expected {expected}; the file is damaged '
                                f'or from another source. Rebuild it with `vlmeval-ext prepare {dataset}`')
        data = read_table(path)
        require_columns(data, self.REQUIRED_COLUMNS, path)
        check_unique_index(data, path)
        data['index'] = [str(x) for x in data['index']]
        if all(x.lstrip('-').isdigit() for x in data['index']):
            data['index'] = [int(x) for x in data['index']]
        return data

    def _as_list_or_str(self, value, row, column):
        if isinstance(value, str) and value.startswith('['):
            items = [str(x) for x in parse_list_cell(value, self.data_path, row, column)]
            return items[0] if len(items) == 1 else items
        return value

    def _resolve_images(self, data):
        """Base64 images (or a list of them); a short cell names another row's index holding the image."""
        cells = {str(k): str(v) for k, v in zip(data['index'], data['image'])}
        out = []
        for row, key in enumerate(data['index']):
            cell = cells[str(key)]
            if len(cell) <= 64 and not cell.startswith('['):
                target = cells.get(cell)
                if target is None or len(target) <= 64:
                    raise DataError(f'{self.data_path}: row {row}, column \'image\': {cell!r} is neither an image '
                                    'nor the index of a row holding one')
                cell = target
            out.append(self._as_list_or_str(cell, row, 'image'))
        return out

    def dump_image(self, line):
        """Decode the row's image(s) into img_root (never outside it); returns the list of paths."""
        from vlmeval.smp import decode_base64_to_image_file, read_ok
        os.makedirs(self.img_root, exist_ok=True)
        where = f'{self.data_path}: index {line["index"]}'
        images = line['image'] if isinstance(line['image'], list) else [line['image']]
        names = line.get('image_path') if 'image_path' in line else None
        if names is None or (isinstance(names, float) and pd.isna(names)):
            names = [f'{line["index"]}.png'] if len(images) == 1 else \
                [f'{line["index"]}_{i}.png' for i in range(len(images))]
        names = names if isinstance(names, list) else [names]
        if len(names) != len(images):
            raise DataError(f'{where}: {len(images)} images but {len(names)} image_path entries')
        paths = []
        for image, name in zip(images, names):
            path = safe_join(self.img_root, str(name), where)
            if not read_ok(path):
                os.makedirs(osp.dirname(path), exist_ok=True)
                try:
                    decode_base64_to_image_file(image, path)
                except Exception as err:  # the kit raises bare PIL/binascii errors; name the row instead
                    raise DataError(f'{where}, column \'image\': not a decodable base64 image ({err})') from err
            paths.append(path)
        return paths

    # ---- the reference model's answer -------------------------------------------------------------------------
    @classmethod
    def naive_prediction(cls, prompt_text: str, dataset: str) -> str:
        """What this benchmark's naive baseline answers to a prompt (used by the `Naive-Baseline` model)."""
        raise NotImplementedError(f'{cls.__name__} defines no naive baseline')


def _register_if_the_kit_loaded_first_through_us() -> None:
    """`import vlmeval_ext.core.dataset` first: the kit's registration hook ran while this module was half-loaded."""
    from vlmeval_ext import registry
    if registry.kit_dataset_module_ready():
        registry.register_datasets()


_register_if_the_kit_loaded_first_through_us()
