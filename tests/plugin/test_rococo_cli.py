"""`python -m vlmeval_ext.cli.rococo`: score (last stdout line is the JSON), gallery, make-mixed, error messages."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from vlmeval_ext.prepare import rococo as P
from vlmeval_ext.cli.rococo import score_embeddings

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args, check=True):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')]))
    proc = subprocess.run([sys.executable, '-m', 'vlmeval_ext.cli.rococo', *map(str, args)], capture_output=True,
                          text=True, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_score_i2t_on_real_attack_file(fixtures_dir, tmp_path):
    ann_path = fixtures_dir / 'rococo' / 'danger.json'
    ann = P.load_annotation(ann_path)
    rng = np.random.default_rng(0)
    img = rng.standard_normal((ann.n_images, 8)).astype(np.float32)
    txt = rng.standard_normal((ann.n_texts, 8)).astype(np.float32)
    # the first 100 images see their first caption exactly; image 0's adversarial twin is even closer
    for i in range(100):
        txt[ann.ground_truth[i][0]] = img[i]
    txt[ann.ground_truth[0][0] + 5] = img[0]
    txt[ann.ground_truth[0][0]] = img[0] + 0.3 * rng.standard_normal(8).astype(np.float32)
    np.save(tmp_path / 'I.npy', img)
    np.save(tmp_path / 'T.npy', txt)
    proc = run_cli('score', '--direction', 'i2t', '--ann', ann_path, '--image-emb', tmp_path / 'I.npy',
                   '--text-emb', tmp_path / 'T.npy')
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert list(result) == ['R@1', 'R@5', 'R@10', 'R_mean', 'false_rate']
    assert result == score_embeddings(ann, img, txt, 'i2t')
    assert 1.98 - 1e-9 <= result['R@1'] <= 100.0 and result['false_rate'] >= 0.02 - 1e-9


def test_score_errors_name_file_and_row(fixtures_dir, tmp_path):
    ann_path = fixtures_dir / 'rococo' / 'coco_karpathy_test.json'
    img = np.ones((10000, 4), np.float32)
    txt = np.ones((25010, 4), np.float32)
    txt[123, 1] = np.nan
    np.save(tmp_path / 'I.npy', img)
    np.save(tmp_path / 'T.npy', txt)
    proc = run_cli('score', '--direction', 't2i', '--ann', ann_path, '--image-emb', tmp_path / 'I.npy',
                   '--text-emb', tmp_path / 'T.npy', check=False)
    assert proc.returncode != 0 and 'T.npy: row 123 column 1 is nan' in proc.stderr
    proc = run_cli('score', '--direction', 'i2t', '--ann', ann_path, '--image-emb', tmp_path / 'I.npy',
                   '--text-emb', tmp_path / 'T.npy', check=False)
    assert proc.returncode != 0 and 'I.npy: expected 5000 rows, got 10000' in proc.stderr


def test_gallery_export_row_order(fixtures_dir, tmp_path):
    proc = run_cli('gallery', '--ann', fixtures_dir / 'rococo' / 'coco_karpathy_test.json', '--direction', 't2i',
                   '--mixed-dir', 'mix_0.9', '--out', tmp_path / 'g')
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary['n_images'] == 10000 and summary['n_texts'] == 25010
    images = [json.loads(line) for line in open(tmp_path / 'g' / 'images.jsonl')]
    assert images[5000]['image'] == 'mix_0.9/' + images[0]['image'].split('/')[-1] and images[5000]['mixed']
    texts = [json.loads(line) for line in open(tmp_path / 'g' / 'texts.jsonl')]
    assert texts[0]['text'] == 'a man with a red helmet on a small moped on a dirt road'


def test_make_mixed_cli(tmp_path):
    (tmp_path / 'coco' / 'val2014').mkdir(parents=True)
    entries = []
    for i in range(5):
        Image.fromarray(np.full((20, 30, 3), 40 * i, np.uint8)).save(tmp_path / 'coco' / 'val2014' / f'{i}.jpg')
        entries.append({'image': f'val2014/{i}.jpg', 'caption': [f'c{i}'] * 5})
    (tmp_path / 'clean.json').write_text(json.dumps(entries))
    proc = run_cli('make-mixed', '--coco-root', tmp_path / 'coco', '--ann', tmp_path / 'clean.json',
                   '--method', 'patch', '--seed', '100', '--out', tmp_path / 'patch')
    assert json.loads(proc.stdout.strip().splitlines()[-1])['written'] == 5
    assert sorted(p.name for p in (tmp_path / 'patch').iterdir()) == [f'{i}.jpg' for i in range(5)]
    env_root = os.environ.pop('COCO_ROOT', None)
    try:
        proc = run_cli('make-mixed', '--ann', tmp_path / 'clean.json', check=False)
    finally:
        if env_root is not None:
            os.environ['COCO_ROOT'] = env_root
    # a set-up error of this command reads and exits like every other: one prefixed line, status 2
    assert proc.returncode == 2 and proc.stderr.strip() == ('[vlmeval-ext] ERROR: give --coco-root DIR or set '
                                                             'COCO_ROOT (the folder holding val2014/)')
    proc = run_cli('make-mixed', '--coco-root', tmp_path / 'nowhere', '--ann', tmp_path / 'clean.json', check=False)
    assert proc.returncode == 2 and proc.stderr.startswith('[vlmeval-ext] ERROR: COCO root ')
