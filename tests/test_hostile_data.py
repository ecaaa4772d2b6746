"""Hostile data and faults at the dataset boundary, through the kit's own dataset construction: changed TSVs and
their dumped images, broken rows, release folders that point outside themselves, 16-bit plots, killed builds."""
from __future__ import annotations

import base64
import io
import json

import pandas as pd
import pytest
from PIL import Image


@pytest.fixture(scope='module')
def registered():
    import vlmeval_ext
    vlmeval_ext.register()


@pytest.fixture
def lmu(tmp_path, monkeypatch):
    root = tmp_path / 'LMUData'
    root.mkdir()
    monkeypatch.setenv('LMUData', str(root))
    return root


def _png_b64(color, size=(16, 12)) -> str:
    buf = io.BytesIO()
    Image.new('RGB', size, color).save(buf, format='PNG')
    return base64.b64encode(buf.getvalue()).decode()


def _pixels(path) -> tuple:
    with Image.open(path) as im:
        return im.convert('RGB').getpixel((0, 0))


# ---- images dumped from a TSV belong to that TSV -----------------------------------------------------------------
def _grab_release(root, grab_json, pids, color):
    (root / 'images').mkdir(parents=True, exist_ok=True)
    subset = {str(i): grab_json[str(pid)] for i, pid in enumerate(pids)}
    (root / 'grab.json').write_text(json.dumps(subset))
    for pid in pids:
        Image.new('RGB', (64, 48), color).save(root / grab_json[str(pid)]['image'])


def test_reprepared_grab_gives_the_model_the_new_images(registered, lmu, tmp_path, fixtures_dir, capsys):
    from vlmeval_ext.grab.dataset import GRAB
    grab_json = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text(encoding='utf-8'))
    _grab_release(tmp_path / 'v1', grab_json, [0, 570], (200, 0, 0))
    GRAB.prepare('GRAB', str(tmp_path / 'v1'))
    old = GRAB('GRAB').build_prompt(0)[0]['value']
    assert _pixels(old) == (200, 0, 0)
    _grab_release(tmp_path / 'v2', grab_json, [0, 570], (0, 0, 200))      # a corrected release
    GRAB.prepare('GRAB', str(tmp_path / 'v2'))
    capsys.readouterr()
    new = GRAB('GRAB').build_prompt(0)[0]['value']
    assert new == old and _pixels(new) == (0, 0, 200)                      # same path, the new image
    assert 'dumped from another' in capsys.readouterr().err
    GRAB('GRAB').build_prompt(1)
    assert 'dumped from another' not in capsys.readouterr().err             # same TSV: nothing removed again


def _first_image_row(data: pd.DataFrame) -> int:
    return next(i for i, cell in enumerate(data['image']) if len(str(cell)) > 64)


def _recolored(cell: str, color) -> str:
    """The image cell with every image replaced by a plain image of `color` (a list cell stays a list)."""
    if cell.startswith('['):
        return json.dumps([_png_b64(color)] * len(json.loads(cell)))
    return _png_b64(color)


@pytest.mark.parametrize('module,cls_name,demo,full', [
    ('vlmeval_ext.rbench.dataset', 'RBenchFull', 'R-Bench-Full_DEMO', 'R-Bench-Full'),
    ('vlmeval_ext.remi.dataset', 'ReMI', 'ReMI_DEMO', 'ReMI'),
    ('vlmeval_ext.rococo.dataset', 'RoCOCOMCQ', 'RoCOCO-MCQ-same_concept_DEMO', 'RoCOCO-MCQ-same_concept'),
])
def test_every_dataset_rewrites_images_of_a_changed_tsv(registered, lmu, module, cls_name, demo, full):
    import importlib

    from vlmeval_ext.core.dataset import write_dataset_tsv
    cls = getattr(importlib.import_module(module), cls_name)
    table = pd.read_csv(cls.demo_tsv(demo), sep='\t', dtype=str, keep_default_na=False)
    row = _first_image_row(table)
    cells = table['image'].tolist()
    original = cells[row]
    cells[row] = _recolored(original, (200, 0, 0))
    write_dataset_tsv(table.assign(image=cells), full)
    index = table['index'][row]
    first = cls(full)
    line = first.data[first.data['index'].astype(str) == index].iloc[0]
    path = first.dump_image(line)[0]
    assert _pixels(path) == (200, 0, 0)
    cells[row] = _recolored(original, (0, 0, 200))
    write_dataset_tsv(table.assign(image=cells), full)                      # the TSV changed (new md5 sidecar)
    second = cls(full)
    line = second.data[second.data['index'].astype(str) == index].iloc[0]
    assert second.dump_image(line)[0] == path and _pixels(path) == (0, 0, 200)
