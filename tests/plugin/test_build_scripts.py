"""Each pull request's scripts/build_<bench>_tsv.py, copied alone (nothing of this package beside it) and run as a
maintainer runs it, on data in the official release layout, writes the very bytes `vlmeval-ext prepare` writes, and
prints that file's md5 (the `DATASET_MD5` the export fills in). RoCOCO-MCQ's script reads the dataset's prompt from
the kit, so its test runs it in a checkout with its patch applied (tests/e2e/test_export_upstream.py)."""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from PIL import Image, ImageDraw

from vlmeval_ext.scripts import build_grab_tsv, build_rbench_full_tsv, build_remi_tsv


def run_alone(script_module, args: list, tmp_path) -> str:
    """The script copied into an empty folder and run there; the md5 it printed."""
    alone = tmp_path / 'alone'
    alone.mkdir()
    script = shutil.copy2(script_module.__file__, alone / os.path.basename(script_module.__file__))
    proc = subprocess.run([sys.executable, script, *map(str, args)], cwd=alone, capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if k != 'PYTHONPATH'})
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith('md5 '), proc.stdout[-500:]
    return last[4:]


def same_bytes(script_tsv, prepare_tsv, printed_md5) -> bytes:
    script_bytes = script_tsv.read_bytes()
    assert script_bytes == prepare_tsv.read_bytes()
    assert printed_md5 == hashlib.md5(script_bytes).hexdigest()
    return script_bytes


def _plot(size, seed):
    img = Image.new('RGBA', size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    w, h = size
    draw.rectangle([w // 10, h // 10, w - w // 10, h - h // 10], fill=(255, 255, 255, 255))
    draw.line([w // 10, h // 2, w - w // 10, h // 2 + seed], fill=(31, 119, 180, 255), width=max(2, w // 200))
    return img


def test_grab(fixtures_dir, tmp_path):
    """On the release layout (grab.json + images/): a plot over the 2,048 px cap, a 16-bit grey plot and a palette
    plot with a transparent colour, so each image rule is on the path."""
    from vlmeval_ext.prepare import grab as prepare
    records = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text())
    release = tmp_path / 'release'
    (release / 'images').mkdir(parents=True)
    subset = {str(i): records[str(pid)] for i, pid in enumerate((0, 570, 480))}
    (release / 'grab.json').write_text(json.dumps(subset))
    _plot((2600, 1900), 1).save(release / subset['0']['image'])
    Image.fromarray((np.arange(120 * 90, dtype=np.uint32).reshape(90, 120) * 7 % 65536).astype(np.uint16)) \
        .save(release / subset['1']['image'])
    _plot((300, 200), 2).convert('P').save(release / subset['2']['image'], transparency=0)
    printed = run_alone(build_grab_tsv, ['--release', release, '--out', tmp_path / 'script.tsv'], tmp_path)
    prepare.build_tsv(tmp_path / 'prepare.tsv', release, progress=False, workers=1)
    same_bytes(tmp_path / 'script.tsv', tmp_path / 'prepare.tsv', printed)
    table = pd.read_csv(tmp_path / 'script.tsv', sep='\t', dtype=str, keep_default_na=False)
    sizes = [Image.open(io.BytesIO(base64.b64decode(c))).size for c in table['image']]
    assert max(sizes[0]) == 2048 and sizes[1] == (120, 90)


def test_grab_script_and_spec_state_the_same_image_rules():
    from vlmeval_ext.spec import load_spec
    spec = load_spec('grab')
    assert build_grab_tsv.COLUMNS == spec['tsv_columns']
    assert list(build_grab_tsv.BACKGROUND) == spec['image']['background']
    assert build_grab_tsv.MAX_LONG_SIDE == spec['image']['max_long_side']


@pytest.mark.parametrize('struct_images', [True, False])
def test_remi(tmp_path, struct_images):
    """On the official parquet layout in two shards (every task, two to six images an item), images as the Hub's
    {'bytes', 'path'} structs or as raw bytes."""
    from vlmeval_ext.prepare import demos
    from vlmeval_ext.prepare import remi as prepare
    items = demos.remi_items()
    demos.write_remi_parquet(tmp_path / 'release' / 'test' / '0000.parquet', items[:6], struct_images)
    demos.write_remi_parquet(tmp_path / 'release' / 'test' / '0001.parquet', items[6:], struct_images)
    printed = run_alone(build_remi_tsv, ['--release', tmp_path / 'release', '--out', tmp_path / 'script.tsv'],
                        tmp_path)
    prepare.write_tsv(prepare.convert_files(prepare.find_split_files(tmp_path / 'release')), tmp_path / 'prepare.tsv')
    same_bytes(tmp_path / 'script.tsv', tmp_path / 'prepare.tsv', printed)
    assert len(pd.read_csv(tmp_path / 'script.tsv', sep='\t', dtype=str)) == len(items)


def test_rbench_full(fixtures_dir, tmp_path):
    """On All.parquet made of real release items of every task (images as the Hub's structs, several row groups)."""
    from vlmeval_ext.prepare import rbench as prepare

    def png(color):
        buf = io.BytesIO()
        Image.new('RGB', (8, 6), color).save(buf, format='PNG')
        return buf.getvalue()
    bank = prepare.read_question_bank(fixtures_dir / 'rbench' / 'Ref_Release.csv')
    picked = [item for task in ('MCQ', 'VQA', 'CAP') for item in [b for b in bank if b['type'] == task][:3]]
    records = [{**b, 'ref_image': {'bytes': png((k, 2, 3)), 'path': None},
                'dis_image': {'bytes': png((4, k, 6)), 'path': None}} for k, b in enumerate(picked)]
    pd.DataFrame(records).to_parquet(tmp_path / 'All.parquet', row_group_size=4)
    printed = run_alone(build_rbench_full_tsv, ['--release', tmp_path / 'All.parquet', '--out',
                                                tmp_path / 'script.tsv'], tmp_path)
    assert prepare.build_tsv(tmp_path / 'All.parquet', tmp_path / 'prepare.tsv', allow_subset=True)['rows'] == 18
    same_bytes(tmp_path / 'script.tsv', tmp_path / 'prepare.tsv', printed)
