"""Corruption engine: determinism, size/mode preservation, every variant changes the image, calibration."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from skimage import data

from vlmeval_ext.spec import load_spec
from vlmeval_ext.corrupt import DISTORTION_IDS, STRENGTHS, approximations, corrupt, corrupt_array, distortion_info

PHOTOS = {'chelsea': data.chelsea(), 'astronaut': data.astronaut(), 'coffee': data.coffee()}
# distortions whose output does not depend on the seed (deterministic filters, codecs, tone curves)
SEED_FREE = {2, 5, 6, 14, 15, 16, 17, 18, 23, 24, 25, 26, 28, 29, 32, 33}


@pytest.fixture(scope='module')
def small_photo() -> np.ndarray:
    return np.ascontiguousarray(data.chelsea()[40:136, 150:278])  # 96x128 crop: fast, still a real photo


@pytest.mark.parametrize('distortion', DISTORTION_IDS)
def test_deterministic_and_seeded(small_photo, distortion):
    a = corrupt_array(small_photo, distortion, 2, seed=7)
    b = corrupt_array(small_photo.copy(), distortion, 2, seed=7)
    assert np.array_equal(a, b)
    others = [corrupt_array(small_photo, distortion, 2, seed=s) for s in (8, 9, 10)]
    if distortion in SEED_FREE:
        assert all(np.array_equal(a, o) for o in others)
    else:  # (mean shift draws only a sign, so one of three other seeds is enough)
        assert any(not np.array_equal(a, o) for o in others), 'other seeds must draw other random patterns'


@pytest.mark.parametrize('distortion', DISTORTION_IDS)
def test_every_variant_changes_the_image(small_photo, distortion):
    for strength in STRENGTHS:
        out = corrupt_array(small_photo, distortion, strength, seed=0)
        assert out.shape == small_photo.shape and out.dtype == np.uint8
        changed = np.mean(np.any(out != small_photo, axis=2))
        assert changed > 0.005, f'd{distortion} s{strength} changed only {changed:.2%} of the pixels'


@pytest.mark.parametrize('mode', ['RGB', 'RGBA', 'L', 'LA', 'P'])
def test_size_and_mode_preserved(small_photo, mode):
    src = Image.fromarray(small_photo)
    if mode in ('RGBA', 'LA'):
        src = src.convert('RGBA')
        src.putalpha(Image.linear_gradient('L').resize(src.size))
        src = src.convert(mode)
    elif mode != 'RGB':
        src = src.convert(mode)
    for distortion in DISTORTION_IDS:
        out = corrupt(src, distortion, 3, seed=1)
        assert (out.size, out.mode) == (src.size, src.mode), f'd{distortion} on {mode}'
        if mode in ('RGBA', 'LA'):
            assert np.array_equal(np.asarray(out.getchannel('A')), np.asarray(src.getchannel('A')))


def test_odd_sizes_and_tiny_images():
    rng = np.random.default_rng(0)
    for h, w in [(1, 1), (7, 300), (33, 17)]:
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        for distortion in DISTORTION_IDS:
            assert corrupt_array(img, distortion, 3).shape == (h, w, 3)


def psnr(clean: np.ndarray, distorted: np.ndarray) -> float:
    mse = np.mean((clean.astype(np.float64) - distorted.astype(np.float64)) ** 2)
    return float('inf') if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def test_calibration_quality_drops_strictly_with_strength():
    """PSNR against the clean photo falls by >= 0.5 dB per step from strength 1 to 3, all 33, 3 real photos."""
    failures = []
    for name, photo in PHOTOS.items():
        for distortion in DISTORTION_IDS:
            scores = [psnr(photo, corrupt_array(photo, distortion, s, seed=0)) for s in STRENGTHS]
            if not (scores[0] - scores[1] >= 0.5 and scores[1] - scores[2] >= 0.5):
                failures.append(f'{name} d{distortion} PSNR {np.round(scores, 2)}')
    assert not failures, failures


def test_bad_ids_are_clear_errors(small_photo):
    for bad in (0, 34, '5', True, 2.0):
        with pytest.raises(ValueError, match='unknown distortion'):
            corrupt_array(small_photo, bad, 1)
    with pytest.raises(ValueError, match='unknown strength'):
        corrupt_array(small_photo, 1, 4)
    with pytest.raises(ValueError, match='HxWx3 uint8'):
        corrupt_array(small_photo.astype(np.float32), 1, 1)


def test_names_come_from_the_rbench_table_and_approximations_are_flagged():
    table = {row['id']: row for row in load_spec('rbench')['distortions']}
    assert set(table) == set(DISTORTION_IDS)
    for d in DISTORTION_IDS:
        info = distortion_info(d)
        assert (info['name'], info['step'], info['group']) == (table[d]['name'], table[d]['step'], table[d]['group'])
        assert len(info['levels']) == 3
    approx = approximations()
    wild = {d for d, row in table.items() if row['group'] == 'Wild'}
    assert wild | {31} == set(approx), 'every Wild capture and the CNN denoiser must be flagged as approximations'
    assert all(len(note) > 40 for note in approx.values())
    assert distortion_info(16)['approximation'] is None
