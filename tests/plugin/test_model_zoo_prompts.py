"""Every model of the kit's zoo gets our benchmarks' own prompts, on the plugin classes and on the kit-dialect classes
alone (the files an upstream pull request adds).

The kit's inference (`vlmeval/inference.py`, `infer_data`) picks a row's prompt in this order: the dataset's
`build_prompt` when the dataset sets `force_use_dataset_prompt`, else the model's own `build_prompt` when
`model.use_custom_prompt(dataset_name)` says so, else the dataset's. Many zoo classes (InternVL, Qwen2-VL, MiniCPM-V,
...) claim any dataset of type MCQ / VQA and build a prompt from `line['question']` alone, which would drop R-Bench's
options, GRAB's README prompt and ReMI's JSON instruction and image places.

The test walks every class of `supported_VLM` (no weights: an instance is made without its `__init__`, with the
entry's keyword arguments as attributes, and asked `use_custom_prompt`; a class that cannot answer without its
weights is counted as claiming the dataset) against every dataset name of GRAB, ReMI (all input modes), R-Bench-Full
(all splits) and RoCOCO-MCQ, and applies the kit's own branch (read from `infer_data`'s source, so a kit that
changes the order fails here).
"""
from __future__ import annotations

import inspect
import re

import pytest

GENERATIVE = ('GRAB', 'ReMI', 'R-Bench-Full', 'RoCOCO-MCQ')


def _records():
    from vlmeval_ext.registry import BENCHMARKS
    return [r for r in BENCHMARKS if r.key in GENERATIVE]


def _zoo_classes() -> dict:
    """Each model class of the kit's supported_VLM, with the keyword arguments of its first entry."""
    from vlmeval.config import supported_VLM
    classes = {}
    for name, factory in supported_VLM.items():
        func = getattr(factory, 'func', factory)
        if isinstance(func, type):
            classes.setdefault(func, (name, dict(getattr(factory, 'keywords', {}) or {})))
    return classes


def _claims(cls, keywords: dict, dataset_name: str):
    """True / False: whether the model class would build its own prompt for the dataset; None: it cannot say
    without its weights (then it may)."""
    if not hasattr(cls, 'use_custom_prompt'):
        return False
    obj = object.__new__(cls)
    obj.dump_image_func = None
    for key, value in keywords.items():
        try:
            setattr(obj, key, value)
        except Exception:
            pass
    try:
        return bool(obj.use_custom_prompt(dataset_name))
    except Exception:
        return None


def _kit_branch_uses_model_prompt(dataset_cls, claims) -> bool:
    """infer_data's branch: the dataset's flag first, then the model's claim."""
    if getattr(dataset_cls, 'force_use_dataset_prompt', False):
        return False
    return claims is not False


def test_the_kit_asks_the_dataset_flag_before_the_model():
    from vlmeval import inference
    source = inspect.getsource(inference.infer_data)
    branches = re.findall(r'if hasattr\(dataset, .force_use_dataset_prompt.\).*?\n(?:.*\n){1,3}?\s*elif .*use_custom_prompt',
                          source)
    assert branches, 'infer_data no longer checks force_use_dataset_prompt before use_custom_prompt'


@pytest.mark.parametrize('layer', ['kit-dialect', 'plugin'])
def test_no_zoo_model_replaces_our_prompts(layer, capsys):
    from vlmeval_ext.registry import load_object, plugin_class_of
    zoo = _zoo_classes()
    assert len(zoo) > 100                           # the whole zoo, not a sample
    pairs, claimed, unknown, replaced = 0, 0, 0, []
    for record in _records():
        dataset_cls = (load_object(record.kit_class) if layer == "kit-dialect" else plugin_class_of(record))
        # the flag is the kit dialect's own attribute, not added by the plugin
        assert 'force_use_dataset_prompt' in vars(load_object(record.kit_class)), record.kit_class
        for name in record.all_names():
            for model_cls, (entry, keywords) in zoo.items():
                claims = _claims(model_cls, keywords, name)
                pairs += 1
                claimed += claims is True
                unknown += claims is None
                if _kit_branch_uses_model_prompt(dataset_cls, claims):
                    replaced.append(f'{entry} ({model_cls.__name__}) x {name}')
    with capsys.disabled():
        print(f'\n[zoo] {layer}: {len(zoo)} model classes x dataset names = {pairs} pairs; {claimed} pairs where the '
              f'model would build its own prompt, {unknown} where it cannot say without weights; '
              f'{len(replaced)} where it replaces ours')
    assert claimed > 0           # the zoo does claim our datasets: the flag is what keeps our prompts
    assert replaced == []


def test_without_the_flag_the_zoo_would_take_the_prompts():
    """The same walk with the flag removed finds the pairs the flag protects (the test above can fail)."""
    from vlmeval_ext.registry import load_object
    zoo = _zoo_classes()
    names = {'InternVLChat', 'Qwen2VLChat', 'MiniCPM_V_2_6'}
    found = set()
    for record in _records():
        lower = load_object(record.kit_class)
        unflagged = type('Unflagged', (lower,), {'force_use_dataset_prompt': False})
        for name in record.all_names():
            for model_cls, (_, keywords) in zoo.items():
                if model_cls.__name__ in names and _claims(model_cls, keywords, name) is not False \
                        and _kit_branch_uses_model_prompt(unflagged, True):
                    found.add(model_cls.__name__)
    assert found & names


def _content(message: list[dict]) -> list[tuple[str, object]]:
    """A message as what the model reads: each text, and each image's size and pixels. (The kit's `dump_image`
    decodes a JPEG cell and saves it as `<index>.png`; the plugin's writes the stored JPEG bytes as `<index>.jpg`:
    other files, the same pixels.)"""
    from PIL import Image

    def pixels(path):
        with Image.open(path) as image:
            return image.size, image.convert('RGB').tobytes()
    return [(m['type'], pixels(m['value']) if m['type'] == 'image' else m['value']) for m in message]


def test_plugin_and_kit_dialect_classes_build_identical_messages(tmp_path, monkeypatch):
    """Every demo row: the plugin class and the kit-dialect class alone build the same message (the same texts and
    image pixels, in the same order)."""
    from vlmeval_ext.registry import load_object, plugin_class_of
    monkeypatch.setenv('LMUData', str(tmp_path / 'LMUData'))
    (tmp_path / 'LMUData').mkdir()
    compared = 0
    for record in _records():
        for demo in record.demos:
            plugin = plugin_class_of(record)(dataset=demo)       # copies the shipped demo TSV into $LMUData
            lower = load_object(record.kit_class)(dataset=demo)
            assert len(plugin.data) == len(lower.data) > 0
            for i in range(len(plugin.data)):
                a, b = plugin.build_prompt(plugin.data.iloc[i]), lower.build_prompt(lower.data.iloc[i])
                assert _content(a) == _content(b), (demo, i)
                compared += 1
    assert compared > 100
