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
    from vlmeval_ext.datasets import GRAB
    from vlmeval_ext.prepare.grab import prepare
    grab_json = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text(encoding='utf-8'))
    _grab_release(tmp_path / 'v1', grab_json, [0, 570], (200, 0, 0))
    prepare('GRAB', str(tmp_path / 'v1'), allow_subset=True)
    old = GRAB('GRAB').build_prompt(0)[0]['value']
    assert _pixels(old) == (200, 0, 0)
    _grab_release(tmp_path / 'v2', grab_json, [0, 570], (0, 0, 200))      # a corrected release
    prepare('GRAB', str(tmp_path / 'v2'), allow_subset=True)
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


@pytest.mark.parametrize('cls_name,demo,full', [
    ('RBenchFull', 'R-Bench-Full_DEMO', 'R-Bench-Full'),
    ('ReMI', 'ReMI_DEMO', 'ReMI'),
    ('RoCOCOMCQ', 'RoCOCO-MCQ-same_concept_DEMO', 'RoCOCO-MCQ-same_concept'),
])
def test_every_dataset_rewrites_images_of_a_changed_tsv(registered, lmu, cls_name, demo, full):
    from vlmeval_ext import datasets
    from vlmeval_ext.io import tsv_path, write_kit_tsv
    from vlmeval_ext.registry import benchmark_of
    cls = getattr(datasets, cls_name)
    table = pd.read_csv(benchmark_of(demo).demo_file(demo), sep='\t', dtype=str, keep_default_na=False)
    row = _first_image_row(table)
    cells = table['image'].tolist()
    original = cells[row]
    cells[row] = _recolored(original, (200, 0, 0))
    write_kit_tsv(table.assign(image=cells), tsv_path(full))
    index = table['index'][row]
    first = cls(full)
    line = first.data[first.data['index'].astype(str) == index].iloc[0]
    path = first.dump_image(line)[0]
    assert _pixels(path) == (200, 0, 0)
    cells[row] = _recolored(original, (0, 0, 200))
    write_kit_tsv(table.assign(image=cells), tsv_path(full))                      # the TSV changed (new md5 sidecar)
    second = cls(full)
    line = second.data[second.data['index'].astype(str) == index].iloc[0]
    assert second.dump_image(line)[0] == path and _pixels(path) == (0, 0, 200)


# ---- one broken image row: counted, the rest runs ---------------------------------------------------------------
def _grab_with_broken_row(lmu, row: int = 5):
    from vlmeval_ext.io import write_kit_tsv
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
    table = pd.read_csv(DEMO_TSV, sep='\t', dtype=str, keep_default_na=False)
    cells = table['image'].tolist()
    cells[row] = cells[row][:2000]                     # a truncated PNG: base64 characters, not an image
    write_kit_tsv(table.assign(image=cells), lmu / 'GRAB.tsv')
    return table, table['index'][row]


def test_broken_base64_in_one_row_runs_the_other_rows_and_counts_it(tmp_path):
    from helpers.kit_run import kit_environment, loopback_model_config, run_kit, write_config
    from helpers.loopback_server import LoopbackServer
    server = LoopbackServer().start()
    try:
        server.default = 'The answer is 3.'
        env = kit_environment(tmp_path, server)
        table, bad_index = _grab_with_broken_row(tmp_path / 'LMUData')
        cfg = loopback_model_config(server, {'GRAB': {'class': 'GRAB', 'dataset': 'GRAB'}})
        proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out',
                        '--api-nproc', '4'], env=env)
        asked = sum(1 for r in server.log if r.n_images)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert asked == len(table) - 1                                         # 40 of 41 rows asked
    assert 'Traceback' not in proc.stderr
    warning = [line for line in proc.stderr.splitlines() if 'left out of the run' in line]
    assert warning and f'GRAB.tsv: index {bad_index}, column \'image\': not a decodable base64 image' in warning[0]
    (score_file,) = [p for p in (tmp_path / 'out').rglob('*_GRAB_score.json') if not p.is_symlink()]
    coverage = json.loads(score_file.read_text())['coverage']
    assert (coverage['dataset_items'], coverage['missing_items']) == (len(table), 1)
    (missing,) = coverage['missing']
    assert missing['index'] == bad_index and 'GRAB.tsv' in missing['reason'] and 'image' in missing['reason']
    assert 'missing from the predictions 1' in proc.stdout


# ---- eval on a subset, eval with edited answers -------------------------------------------------------------
def _demo_predictions(tmp_path, rows=None, edit_answers=False):
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
    table = pd.read_csv(DEMO_TSV, sep='\t', dtype=str, keep_default_na=False).drop(columns=['image'])
    if rows is not None:
        table = table.iloc[rows]
    table['prediction'] = ['The answer is 7.'] * len(table)
    if edit_answers:
        table['answer'] = ['7'] * len(table)          # answers edited to match the predictions
    path = tmp_path / 'M_GRAB_DEMO.tsv'
    table.to_csv(path, sep='\t', index=False)
    return path


def _cli(args, tmp_path):
    from helpers.kit_run import kit_environment, run_kit
    return run_kit(args, kit_environment(tmp_path), entry=('-m', 'vlmeval_ext'))


def test_eval_on_a_subset_counts_the_missing_items(tmp_path):
    path = _demo_predictions(tmp_path, rows=list(range(5)))
    proc = _cli(['eval', '--data', 'GRAB_DEMO', '--pred', path], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    coverage = json.loads((tmp_path / 'M_GRAB_DEMO_score.json').read_text())['coverage']
    assert (coverage['dataset_items'], coverage['missing_items']) == (41, 36)
    assert {m['reason'] for m in coverage['missing']} == {'no prediction'}
    assert '[GRAB] dataset items 41, missing from the predictions 36 (not scored)' in proc.stdout


def test_eval_with_answers_edited_to_match_is_refused(tmp_path):
    path = _demo_predictions(tmp_path, edit_answers=True)
    proc = _cli(['eval', '--data', 'GRAB_DEMO', '--pred', path], tmp_path)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith('[vlmeval-ext]')]
    assert len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr
    assert "row 2 (index 0), column 'answer': '7' is not the dataset's own answer" in lines[0]
    assert not (tmp_path / 'M_GRAB_DEMO_score.json').exists()


def test_eval_of_a_full_split_checks_against_the_prepared_tsv(tmp_path):
    from vlmeval_ext.io import write_kit_tsv
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
    lmu = tmp_path / 'LMUData'
    lmu.mkdir()
    write_kit_tsv(pd.read_csv(DEMO_TSV, sep='\t', dtype=str, keep_default_na=False), lmu / 'GRAB.tsv')
    path = _demo_predictions(tmp_path, edit_answers=True).rename(tmp_path / 'M_GRAB.tsv')
    proc = _cli(['eval', '--data', 'GRAB', '--pred', path], tmp_path)
    assert proc.returncode == 2 and "is not the dataset's own answer" in proc.stderr and 'GRAB.tsv' in proc.stderr


# ---- a damaged demo TSV: the advice given works ------------------------------------------------------------------
def test_md5_mismatch_of_a_demo_split_advises_what_fixes_it(registered, lmu):
    import re
    import shlex
    import subprocess

    from vlmeval_ext.io import DataError
    from vlmeval_ext.datasets import GRAB
    assert len(GRAB('GRAB_DEMO')) == 41                        # copied into LMUData
    tsv = lmu / 'GRAB_DEMO.tsv'
    tsv.write_bytes(tsv.read_bytes().replace(b'\t-9\t', b'\t-8\t', 1))   # damaged
    with pytest.raises(DataError) as err:
        GRAB('GRAB_DEMO')
    message = str(err.value)
    assert 'prepare GRAB_DEMO' not in message                  # `prepare` refuses demo splits
    command = re.search(r'`(rm [^`]+)`', message).group(1)
    subprocess.run(shlex.split(command), check=True)           # the advice, as given
    assert len(GRAB('GRAB_DEMO')) == 41


# ---- a 16-bit plot -----------------------------------------------------------------------------------------------
def test_a_16_bit_plot_is_scaled_not_clipped_to_white(tmp_path, fixtures_dir):
    import numpy as np

    from vlmeval_ext.prepare import grab as data
    grab_json = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text(encoding='utf-8'))
    src = tmp_path / 'src'
    (src / 'images').mkdir(parents=True)
    (src / 'grab.json').write_text(json.dumps({'0': grab_json['0']}))
    plot = np.full((48, 64), 60000, dtype=np.uint16)            # a light background
    plot[24, :] = 0                                              # a black line
    plot[:, 32] = 30000                                          # a mid-grey line
    Image.fromarray(plot).save(src / grab_json['0']['image'])
    with Image.open(src / grab_json['0']['image']) as im:
        assert im.mode.startswith('I')                          # how Pillow opens a 16-bit PNG (I;16 or I)
    out = data.build_tsv(tmp_path / 'GRAB.tsv', src, progress=False)
    cell = pd.read_csv(out, sep='\t', dtype=str)['image'][0]
    with Image.open(io.BytesIO(base64.b64decode(cell))) as im:
        rgb = np.asarray(im.convert('RGB'))
    assert tuple(rgb[0, 0]) == (233, 233, 233) and tuple(rgb[24, 0]) == (0, 0, 0) and tuple(rgb[0, 32]) == (117,) * 3
