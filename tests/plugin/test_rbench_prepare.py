"""Official release -> kit TSV: folder/parquet/saved-dataset sources, 2 rows per item, clear errors."""
import base64
import csv
import io
import sys

import pandas as pd
import pytest
from PIL import Image

from vlmeval_ext.prepare.rbench import (RBenchDataError, build_tsv, read_question_bank, records_from_dir,
                                     records_from_table, write_tsv)

csv.field_size_limit(sys.maxsize)


def _png(color):
    buf = io.BytesIO()
    Image.new('RGB', (8, 6), color).save(buf, format='PNG')
    return buf.getvalue()


def test_question_bank_is_real_release(fixtures_dir):
    warnings = []
    items = read_question_bank(fixtures_dir / 'rbench' / 'Ref_Release.csv', warnings)
    assert len(items) == 1485
    assert [sum(i['type'] == t for i in items) for t in ('MCQ', 'VQA', 'CAP')] == [495, 495, 495]
    assert items[0]['name'] == 'MMBench_35.jpg' and items[0]['distortion'] == 1 and items[0]['strength'] == 2
    # the one released MCQ whose answer is not among its options is kept and reported, with its row
    assert len(warnings) == 1 and 'row 1403 column answer' in warnings[0]


def _small_release(tmp_path, fixtures_dir, n=6):
    src = tmp_path / 'release'
    (src / 'ref_image').mkdir(parents=True)
    (src / 'dis_image').mkdir()
    with open(fixtures_dir / 'rbench' / 'Ref_Release.csv', encoding='latin-1', newline='') as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    picked = [r for t in ('MCQ', 'VQA', 'CAP') for r in [r for r in rows if r['type'] == t][:2]][:n]
    with open(src / 'Ref_Release.csv', 'w', encoding='latin-1', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=reader.fieldnames)
        writer.writeheader()
        writer.writerows(picked)
    for k in range(n):
        (src / 'ref_image' / f'{k}.png').write_bytes(_png((10 * k, 0, 0)))
        (src / 'dis_image' / f'{k}.jpg').write_bytes(_png((0, 10 * k, 0)))
    return src


def test_folder_source_to_tsv(tmp_path, fixtures_dir):
    src = _small_release(tmp_path, fixtures_dir)
    out = tmp_path / 'R-Bench-Full.tsv'
    result = build_tsv(src, out, allow_subset=True)
    assert result['rows'] == 12
    df = pd.read_csv(out, sep='\t')
    assert list(df['index']) == list(range(12))
    assert list(df['variant'][:4]) == ['ref', 'dis', 'ref', 'dis']
    assert (df['pair_id'] == df['index'] // 2).all()
    assert list(df['type'].unique()) == ['MCQ', 'VQA', 'CAP']
    cap = df[df['type'] == 'CAP'].iloc[0]
    assert cap['answer'].startswith('[') and cap['choice'] == 'N'
    img = Image.open(io.BytesIO(base64.b64decode(df.loc[1, 'image'])))
    assert img.getpixel((0, 0)) == (0, 0, 0) and Image.open(
        io.BytesIO(base64.b64decode(df.loc[3, 'image']))).getpixel((0, 0)) == (0, 10, 0)
    # the full release must have 1,485 items: a subset is refused unless asked for
    with pytest.raises(RBenchDataError, match='expected 1485 items'):
        build_tsv(src, tmp_path / 'full.tsv')
    assert not (tmp_path / 'full.tsv').exists()


def test_missing_image_names_row_and_column(tmp_path, fixtures_dir):
    src = _small_release(tmp_path, fixtures_dir)
    (src / 'dis_image' / '4.jpg').unlink()
    with pytest.raises(RBenchDataError, match=r'row 5 column dis_image'):
        list(records_from_dir(src))


def test_parquet_and_saved_dataset_sources(tmp_path, fixtures_dir):
    bank = read_question_bank(fixtures_dir / 'rbench' / 'Ref_Release.csv')[598:601]
    records = [{**b, 'ref_image': {'bytes': _png((1, 2, 3)), 'path': None},
                'dis_image': {'bytes': _png((4, 5, 6)), 'path': None}} for b in bank]
    pq = tmp_path / 'All.parquet'
    pd.DataFrame(records).to_parquet(pq)
    n = write_tsv(records_from_dir(pq), tmp_path / 'a.tsv')
    assert n == 6
    import datasets
    ds = datasets.Dataset.from_list(records)
    ds.save_to_disk(str(tmp_path / 'saved'))
    assert write_tsv(records_from_dir(tmp_path / 'saved'), tmp_path / 'b.tsv') == 6
    assert (tmp_path / 'a.tsv').read_text() == (tmp_path / 'b.tsv').read_text()


def test_bad_rows_are_named():
    good = {'name': 'x.jpg', 'question': 'q', 'choice': 'N', 'answer': "['a', 'b']", 'type': 'CAP',
            'distortion': 3, 'strength': 2, 'ref_image': _png((1, 1, 1)), 'dis_image': _png((2, 2, 2))}
    assert len(list(records_from_table([good], 'src.parquet'))) == 1
    for change, where in [({'answer': "['a', 'b'"}, 'row 2 column answer'), ({'distortion': 34}, 'row 2 column distortion'),
                          ({'type': 'OCR'}, 'row 2 column type'), ({'dis_image': None}, 'row 2 column dis_image'),
                          ({'strength': 'high'}, 'row 2 column strength')]:
        with pytest.raises(RBenchDataError, match=where):
            list(records_from_table([good, {**good, **change}], 'src.parquet'))


def test_parquet_source_is_read_one_row_group_at_a_time(tmp_path, fixtures_dir):
    """A parquet release is streamed: after the first row, memory holds its row group, not the file's images."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vlmeval_ext.prepare.rbench import _parquet_rows
    bank = read_question_bank(fixtures_dir / 'rbench' / 'Ref_Release.csv')[:40]
    import numpy as np
    rng = np.random.default_rng(0)

    def blob():          # a real PNG of noise: ~200 kB, incompressible
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (150, 150, 3), dtype=np.uint8)).save(buf, format='PNG')
        return {'bytes': buf.getvalue(), 'path': None}
    records = [{**b, 'ref_image': blob(), 'dis_image': blob()} for b in bank]
    path = tmp_path / 'All.parquet'
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=2)
    base = pa.total_allocated_bytes()
    rows = _parquet_rows(path, batch_rows=2)
    first = next(rows)
    # one group (2 rows x 2 images, read and unpacked: ~1.6-2.4 MB with the reader's buffers), far from the 16 MB of
    # images in the file
    size = len(records[0]['ref_image']['bytes'])
    assert pa.total_allocated_bytes() - base < 40 * 2 * size / 4
    assert first['name'] == bank[0]['name'] and first['ref_image']['bytes'] == records[0]['ref_image']['bytes']
    rest = list(rows)
    assert [r['name'] for r in [first, *rest]] == [b['name'] for b in bank]
    assert write_tsv(records_from_dir(path), tmp_path / 'a.tsv') == 80
