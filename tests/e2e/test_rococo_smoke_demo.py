"""The demo's RoCOCO retrieval: a tiny gallery shipped with the package (real annotation entries, generated
stand-in pictures) and RoCOCO-Smoke-Hash, a weight-free deterministic smoke-test backend, run end to end through
the kit's run.py (prepare -> inference -> ranking -> reports); its numbers are labelled as a smoke test and never
compared with the paper."""
from __future__ import annotations

import json

import numpy as np
from PIL import Image

from vlmeval_ext.cli import rococo as E
from vlmeval_ext.prepare.demos import write_gallery


def test_smoke_backend_is_deterministic_unit_vectors_in_one_space():
    emb = E.load_embedder('smoke-hash:64')
    texts = ['A man riding a horse.', 'a man riding a horse', 'Two cats on a sofa.']
    t1, t2 = emb.embed_texts(texts), E.load_embedder('smoke-hash:64').embed_texts(texts)
    assert t1.shape == (3, 64) and np.array_equal(t1, t2)
    assert np.allclose(np.linalg.norm(t1, axis=1), 1, atol=1e-6)
    assert np.allclose(t1[0], t1[1])                      # case and punctuation do not matter
    images = [Image.new('RGB', (40, 30), (200, 10, 10)), Image.fromarray(
        np.arange(40 * 30 * 3, dtype=np.uint8).reshape(30, 40, 3))]
    v = emb.embed_images(images)
    assert v.shape == (2, 64) and np.array_equal(v, emb.embed_images(images))
    assert np.linalg.norm(v[0]) == 0 or np.isclose(np.linalg.norm(v[0]), 1)   # a flat image has no contrast
    assert np.isclose(np.linalg.norm(v[1]), 1)


def test_demo_gallery_runs_end_to_end_through_run_py(tmp_path):
    from vlmeval_ext.cli.rococo import main as rococo_main
    from helpers.kit_run import kit_environment, run_kit

    ann_dir, coco = write_gallery(tmp_path / 'gallery')
    assert len(list((coco / 'val2014').glob('*.jpg'))) == 8
    env = dict(kit_environment(tmp_path), PRED_FORMAT='tsv')
    names = ['RoCOCO-I2T-same_concept', 'RoCOCO-T2I-mix']
    for name in names:
        assert rococo_main(['prepare', name, '--ann-dir', str(ann_dir), '--coco-root', str(coco),
                            '--mixed-root', str(tmp_path / 'mixed'), '--out-dir', env['LMUData']]) == 0
    proc = run_kit(['--data', *names, '--model', 'RoCOCO-Smoke-Hash', '--work-dir', tmp_path / 'out'], env=env,
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    # said once while the run's two datasets are evaluated, and once under the end-of-run table for both rows
    # (each score file keeps the note)
    assert out.count('[RoCOCO] RoCOCO-Smoke-Hash is a weight-free smoke test of the pipeline, not a model') == 1
    assert out.count('[note] (every row) RoCOCO-Smoke-Hash is a weight-free smoke test') == 1
    assert out.count('RoCOCO-Smoke-Hash is a weight-free smoke test of the pipeline, not a model') == 2
    assert 'R@1 (%)' in out
    model_dir = tmp_path / 'out' / 'RoCOCO-Smoke-Hash'
    i2t = json.loads(next(model_dir.rglob('*_RoCOCO-I2T-same_concept_score.json')).read_text())
    t2i = json.loads(next(model_dir.rglob('*_RoCOCO-T2I-mix_score.json')).read_text())
    assert i2t['n_images'] == 8 and i2t['direction'] == 'i2t' and 'smoke test' in i2t['note']
    assert sorted(t2i['per_seed']) == ['1', '10', '100'] and 'smoke test' in t2i['note']
    assert not list(model_dir.rglob('*_vs_paper.*'))       # never compared with the paper
