"""GRAB source -> kit TSV: manual-download layout, saved HF dataset, image handling, clear errors (no kit import)."""
from __future__ import annotations

import base64
import io
import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image, ImageDraw

from vlmeval_ext.prepare import grab as data
from vlmeval_ext.scripts import build_grab_tsv as build_script


@pytest.fixture(scope='module')
def grab_json(fixtures_dir):
    with open(fixtures_dir / 'grab' / 'grab.json', encoding='utf-8') as f:
        return json.load(f)


def _plot_image(size=(640, 480), seed=0):
    """An RGBA plot-like image with a transparent margin, as the official PNGs are RGBA."""
    img = Image.new('RGBA', size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    w, h = size
    draw.rectangle([w // 10, h // 10, w - w // 10, h - h // 10], fill=(255, 255, 255, 255))
    draw.line([w // 10, h // 2, w - w // 10, h // 2], fill=(0, 0, 0, 255), width=max(1, w // 300))
    draw.line([w // 10, h - h // 10, w - w // 10, h // 10 + seed % 7], fill=(31, 119, 180, 255),
              width=max(2, w // 200))
    return img


def _manual_layout(root, grab_json, pids, size=(640, 480)):
    (root / 'images').mkdir(parents=True)
    subset = {str(i): grab_json[str(pid)] for i, pid in enumerate(pids)}
    (root / 'grab.json').write_text(json.dumps(subset))
    for pid in pids:
        _plot_image(size, pid).save(root / grab_json[str(pid)]['image'])
    return subset


def _decode(cell):
    return Image.open(io.BytesIO(base64.b64decode(cell)))


# One row of every answer form: integer, one-decimal, nearest 10, interval, equation; a transform question
# with newlines in its text.
SAMPLE_PIDS = [0, 570, 480, 150, 330, 1885]


def test_manual_layout_to_tsv(grab_json, tmp_path):
    subset = _manual_layout(tmp_path / 'src', grab_json, SAMPLE_PIDS)
    out = data.build_tsv(tmp_path / 'GRAB.tsv', tmp_path / 'src', progress=False)
    # Read as the kit does (pandas, tab-separated), answers forced to text.
    table = pd.read_csv(out, sep='\t', dtype={'answer': str})
    assert list(table.columns) == ['index', 'pid', 'question', 'answer', 'task', 'category', 'complexity', 'image']
    assert table['pid'].tolist() == SAMPLE_PIDS == table['index'].tolist()
    for _, row in table.iterrows():
        source = grab_json[str(row['pid'])]
        for column in ('question', 'answer', 'task', 'category', 'complexity'):
            assert row[column] == source[column], (row['pid'], column)
        image = _decode(row['image'])
        assert image.mode == 'RGB' and image.size == (640, 480)        # small: not resized
        assert image.format == 'PNG'
        assert image.getpixel((2, 2)) == (255, 255, 255)              # transparent margin -> white
    assert '\n1. reflection in the y-axis;' in table.loc[table.pid == 1885, 'question'].item()
    assert len(subset) == len(table)


def test_large_image_is_capped_on_the_long_side(tmp_path):
    big = _plot_image((2918, 2421))    # half the official 5836x4842, same aspect
    capped = build_script.prepare_image(big, max_side=1024)
    assert capped.mode == 'RGB' and capped.size == (1024, round(2421 * 1024 / 2918))
    assert build_script.prepare_image(big, max_side=0).size == (2918, 2421)          # 0 keeps full size
    assert max(build_script.prepare_image(big).size) == 2048                          # the spec's default cap
    small = build_script.prepare_image(_plot_image((100, 80)), max_side=1024)
    assert small.size == (100, 80)                                            # never upscaled
    palette = Image.new('P', (10, 10))
    assert build_script.prepare_image(palette).mode == 'RGB'


def test_limit_keeps_the_first_questions(grab_json, tmp_path):
    _manual_layout(tmp_path / 'src', grab_json, SAMPLE_PIDS)
    out = data.build_tsv(tmp_path / 'g.tsv', tmp_path / 'src', limit=2, progress=False)
    assert pd.read_csv(out, sep='\t')['pid'].tolist() == SAMPLE_PIDS[:2]


def test_saved_hf_dataset_to_tsv(grab_json, tmp_path):
    import datasets  # a dependency of ms-vlmeval

    rows = [dict(grab_json[str(pid)]) for pid in SAMPLE_PIDS[:3]]
    features = datasets.Features({
        'pid': datasets.Value('int64'), 'question': datasets.Value('string'),
        'decoded_image': datasets.Image(), 'image': datasets.Value('string'), 'answer': datasets.Value('string'),
        'task': datasets.Value('string'), 'category': datasets.Value('string'),
        'complexity': datasets.Value('int64')})
    table = {k: [r[k] for r in rows] for k in ('pid', 'question', 'image', 'answer', 'task', 'category',
                                                'complexity')}
    table['decoded_image'] = [_plot_image((300, 200), r['pid']) for r in rows]
    datasets.Dataset.from_dict(table, features=features).save_to_disk(str(tmp_path / 'hf'))
    out = data.build_tsv(tmp_path / 'GRAB.tsv', tmp_path / 'hf', progress=False)
    result = pd.read_csv(out, sep='\t', dtype={'answer': str})
    assert result['pid'].tolist() == SAMPLE_PIDS[:3]
    assert result['answer'].tolist() == [r['answer'] for r in rows]
    assert _decode(result['image'][0]).size == (300, 200)


def test_missing_image_names_the_file_and_row(grab_json, tmp_path):
    _manual_layout(tmp_path / 'src', grab_json, SAMPLE_PIDS)
    (tmp_path / 'src' / 'images' / '480.png').unlink()
    with pytest.raises(data.GrabDataError, match=r'pid 480, column "image": no file .*480\.png'):
        data.build_tsv(tmp_path / 'GRAB.tsv', tmp_path / 'src', progress=False)
    assert not (tmp_path / 'GRAB.tsv').exists()        # no half-written TSV left behind


@pytest.mark.parametrize('mutate, message', [
    (lambda r: r.pop('answer'), r"row 1: missing column\(s\) \['answer'\]"),
    (lambda r: r.update(complexity='3'), r"row 1, column 'complexity': expected int"),
    (lambda r: r.update(answer=''), r"row 1, column 'answer': empty"),
    (lambda r: r.update(task='tables'), r'row 1, column "task": \'tables\' is not one of'),
    (lambda r: r.update(complexity=12), r'row 1, column "complexity": 12 outside'),
])
def test_bad_rows_name_file_row_and_column(grab_json, tmp_path, mutate, message):
    rows = {'0': dict(grab_json['0']), '1': dict(grab_json['1'])}
    mutate(rows['1'])
    path = tmp_path / 'grab.json'
    path.write_text(json.dumps(rows))
    with pytest.raises(data.GrabDataError, match=message) as err:
        data.read_grab_json(path)
    assert str(path) in str(err.value)


def test_unknown_source_layout_is_an_error(tmp_path):
    with pytest.raises(data.GrabDataError, match='neither the manual layout'):
        data.load_source(tmp_path)
    (tmp_path / 'grab.json').write_text('{not json')
    with pytest.raises(data.GrabDataError, match='not valid JSON'):
        data.load_source(tmp_path)


def test_real_grab_json_validates(fixtures_dir):
    records = data.read_grab_json(fixtures_dir / 'grab' / 'grab.json')
    assert len(records) == 2170 and [r['pid'] for r in records] == list(range(2170))


def _previous_pipeline(image, max_side=2048):
    """The TSV image pipeline before images were pasted through alpha and encoded at zlib level 1 in processes:
    alpha_composite onto white + convert('RGB') + LANCZOS + PNG (zlib 6). Prepared images must stay identical."""
    if image.mode in ('RGBA', 'LA') or (image.mode == 'P' and 'transparency' in image.info):
        rgba = image.convert('RGBA')
        image = Image.alpha_composite(Image.new('RGBA', rgba.size, (255, 255, 255, 255)), rgba)
    image = image.convert('RGB')
    if max_side and max(image.size) > max_side:
        scale = max_side / max(image.size)
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                             Image.LANCZOS)
    return np.asarray(image)


def test_paste_through_alpha_equals_alpha_composite_for_every_alpha_and_value():
    # Channels are blended independently: every (alpha, value) pair covers every pixel that can occur.
    alpha = np.repeat(np.arange(256, dtype=np.uint8), 256)
    value = np.tile(np.arange(256, dtype=np.uint8), 256)
    channels = [value, np.roll(value, 85), 255 - value, alpha]
    image = Image.fromarray(np.stack(channels, -1).reshape(256, 256, 4), 'RGBA')
    assert data._spec()['image']['background'] == [255, 255, 255]
    assert np.array_equal(np.asarray(build_script.prepare_image(image, 0)), _previous_pipeline(image, 0))


def _matplotlib_plot(size, seed):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(size[0] / 100, size[1] / 100), dpi=100)
    xs = np.linspace(-10, 10, 500)
    ax.plot(xs, np.sin((seed + 1) * xs / 3) * 4, linewidth=1.2)
    ax.fill_between(xs, 0, np.cos(xs), alpha=0.3)
    ax.grid(alpha=0.3)
    ax.set_title(f'plot {seed}')
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', transparent=True)
    plt.close(fig)
    buffer.seek(0)
    return Image.open(buffer)


def test_prepared_images_are_pixel_identical_to_the_previous_pipeline(grab_json, tmp_path):
    """Worker processes, paste through alpha and zlib level 1 change the bytes, never the pixels."""
    pids = SAMPLE_PIDS[:4]
    root = tmp_path / 'src'
    (root / 'images').mkdir(parents=True)
    (root / 'grab.json').write_text(json.dumps({str(i): grab_json[str(p)] for i, p in enumerate(pids)}))
    sources = {}
    for k, pid in enumerate(pids):
        sources[pid] = _matplotlib_plot((2600, 2000) if k % 2 else (1200, 900), pid)   # resized, and not
        assert sources[pid].mode == 'RGBA'
        sources[pid].save(root / grab_json[str(pid)]['image'])
    out = data.build_tsv(tmp_path / 'GRAB.tsv', root, progress=False, workers=2)
    table = pd.read_csv(out, sep='\t')
    assert table['pid'].tolist() == pids
    for pid, cell in zip(table['pid'], table['image']):
        prepared = np.asarray(_decode(cell))
        assert prepared.shape[:2] == ((1575, 2048) if pids.index(pid) % 2 else (900, 1200))
        assert np.array_equal(prepared, _previous_pipeline(sources[pid]))


def test_unreadable_image_names_the_pid(grab_json, tmp_path):
    _manual_layout(tmp_path / 'src', grab_json, SAMPLE_PIDS[:3])
    (tmp_path / 'src' / grab_json['570']['image']).write_bytes(b'\x89PNG\r\n\x1a\n not a png')
    with pytest.raises(data.GrabDataError, match=r'GRAB pid 570, column "image": \S+ cannot be read as an image'):
        data.build_tsv(tmp_path / 'GRAB.tsv', tmp_path / 'src', progress=False, workers=2)
    assert not (tmp_path / 'GRAB.tsv').exists()
