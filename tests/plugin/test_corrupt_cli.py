"""`vlmeval-ext corrupt-image` logic (vlmeval_ext.corrupt.cli.corrupt_image_main)."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from skimage import data

from vlmeval_ext.corrupt.cli import corrupt_image_main, parse_id_list


@pytest.fixture()
def photo_path(tmp_path):
    path = tmp_path / 'cat.png'
    Image.fromarray(np.ascontiguousarray(data.chelsea()[::4, ::4])).save(path)  # a small real photo
    return path


def test_selected_variants_written(photo_path, tmp_path):
    out = tmp_path / 'out'
    assert corrupt_image_main([str(photo_path), '--out-dir', str(out), '--distortion', '1,5,16',
                               '--strength', '1,3', '--seed', '3']) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ['d01_s1.png', 'd01_s3.png', 'd05_s1.png', 'd05_s3.png', 'd16_s1.png', 'd16_s3.png']
    clean = np.asarray(Image.open(photo_path))
    for name in names:
        img = np.asarray(Image.open(out / name))
        assert img.shape == clean.shape and not np.array_equal(img, clean)


def test_same_seed_same_files_different_seed_different(photo_path, tmp_path):
    runs = {}
    for tag, seed in (('a', '5'), ('b', '5'), ('c', '6')):
        corrupt_image_main([str(photo_path), '--out-dir', str(tmp_path / tag), '--distortion', '9',
                            '--strength', '2', '--seed', seed])
        runs[tag] = np.asarray(Image.open(tmp_path / tag / 'd09_s2.png'))
    assert np.array_equal(runs['a'], runs['b'])
    assert not np.array_equal(runs['a'], runs['c'])


def test_preview_contact_sheet_of_all_99(photo_path, tmp_path):
    out = tmp_path / 'all'
    corrupt_image_main([str(photo_path), '--out-dir', str(out), '--preview'])
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 100 and 'preview.png' in files
    assert files[0] == 'd01_s1.png' and files[-2] == 'd33_s3.png'
    sheet = Image.open(out / 'preview.png')
    # 99 variants + the clean image, 10 per row: 10 rows of labelled tiles
    assert sheet.width == 10 * 192 and sheet.height > 10 * 192
    # every tile region holds an image (not blank white)
    arr = np.asarray(sheet.convert('L'))
    tile_h = sheet.height // 10
    for r in range(10):
        for c in range(10):
            tile = arr[r * tile_h + 30:(r + 1) * tile_h - 30, c * 192 + 30:(c + 1) * 192 - 30]
            assert tile.std() > 5, f'tile ({r}, {c}) looks empty'


def test_unknown_ids_are_clear_errors(photo_path, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        corrupt_image_main([str(photo_path), '--out-dir', str(tmp_path / 'x'), '--distortion', '1,34'])
    assert exc.value.code == 2
    assert "unknown distortion id '34'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        corrupt_image_main([str(photo_path), '--out-dir', str(tmp_path / 'x'), '--strength', 'high'])
    assert "unknown strength 'high'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        corrupt_image_main([str(tmp_path / 'missing.png'), '--out-dir', str(tmp_path / 'x')])
    assert 'input image not found' in capsys.readouterr().err
    assert not (tmp_path / 'x').exists()


def test_parse_id_list():
    assert parse_id_list('all', (1, 2, 3), 'strength') == [1, 2, 3]
    assert parse_id_list(' 3, 1,3 ', (1, 2, 3), 'strength') == [1, 3]
    with pytest.raises(ValueError, match="unknown strength ''"):
        parse_id_list('1,,2', (1, 2, 3), 'strength')


def test_rgba_input_keeps_alpha(tmp_path):
    rgba = Image.fromarray(np.ascontiguousarray(data.astronaut()[::8, ::8])).convert('RGBA')
    rgba.putalpha(Image.linear_gradient('L').resize(rgba.size))
    src = tmp_path / 'a.png'
    rgba.save(src)
    corrupt_image_main([str(src), '--out-dir', str(tmp_path / 'o'), '--distortion', '21', '--strength', '3'])
    out = Image.open(tmp_path / 'o' / 'd21_s3.png')
    assert out.mode == 'RGBA'
    assert np.array_equal(np.asarray(out.getchannel('A')), np.asarray(rgba.getchannel('A')))
