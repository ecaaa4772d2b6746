"""ReMI official parquet -> kit TSV, on generated items in exactly the official layout (every task)."""
from __future__ import annotations

import ast
import base64
import hashlib

import pandas as pd
import pytest

from vlmeval_ext.prepare import demos
from vlmeval_ext.prepare import remi as data


def sha(b: bytes) -> str:
    return hashlib.sha1(b).hexdigest()


@pytest.mark.parametrize('struct_images', [True, False])
def test_convert_every_task_keeps_images_in_slot_order(tmp_path, struct_images):
    items = demos.remi_items()
    assert len({i['task'] for i in items}) == 13 and {len(i['images']) for i in items} >= {2, 3, 4, 5, 6}
    demos.write_remi_parquet(tmp_path / 'src' / 'test.parquet', items, struct_images)
    out = data.write_tsv(data.convert_files(data.find_split_files(tmp_path / 'src')), tmp_path / 'ReMI.tsv')
    tsv = pd.read_csv(out, sep='\t', dtype={'answer': str, 'question': str}, keep_default_na=False)
    assert list(tsv.columns) == data.TSV_COLUMNS
    assert list(tsv['index']) == list(range(len(items)))
    for row, item in zip(tsv.itertuples(), items):
        assert (row.question, row.answer, row.task) == (item['question'], item['label'], item['task'])
        decoded = [base64.b64decode(x) for x in data.decode_image_cell(row.image)]
        assert [sha(b) for b in decoded] == [sha(b) for b in item['images']]
        # the kit's toliststr evaluates the cell as a Python list literal: it must read the same list
        assert ast.literal_eval(row.image) == data.decode_image_cell(row.image)
        assert row.image_count == len(item['images'])


def test_split_files_and_multiple_shards(tmp_path):
    items = demos.remi_items()
    demos.write_remi_parquet(tmp_path / 'default' / 'test' / '0000.parquet', items[:5])
    demos.write_remi_parquet(tmp_path / 'default' / 'test' / '0001.parquet', items[5:])
    demos.write_remi_parquet(tmp_path / 'default' / 'train' / '0000.parquet', items[:2])
    files = data.find_split_files(tmp_path, 'test')
    assert [f.name for f in files] == ['0000.parquet', '0001.parquet']
    frame = data.convert_files(files)
    assert list(frame['index']) == list(range(13)) and list(frame['task']) == [i['task'] for i in items]
    assert len(data.convert_files(data.find_split_files(tmp_path, 'train'))) == 2
    with pytest.raises(FileNotFoundError, match="no 'validation' parquet"):
        data.find_split_files(tmp_path, 'validation')


def test_bad_rows_name_file_row_and_column(tmp_path):
    items = demos.remi_items()[:3]
    frame = demos.remi_official_frame(items)
    frame.loc[1, 'image_2'] = None                     # hole before a used slot would shift the images
    with pytest.raises(data.ReMIDataError, match=r"src.parquet: row 1, column 'image_3'.*after the empty slot"):
        data.parquet_rows_to_frame(frame, 'src.parquet')
    frame = demos.remi_official_frame(items)
    frame.at[2, 'image_1'] = {'bytes': b'not an image', 'path': None}
    with pytest.raises(data.ReMIDataError, match=r"row 2, column 'image_1': not a decodable image"):
        data.parquet_rows_to_frame(frame, 'src.parquet')
    frame = demos.remi_official_frame(items).drop(columns=['label'])
    with pytest.raises(data.ReMIDataError, match=r"missing columns \['label'\]"):
        data.parquet_rows_to_frame(frame, 'src.parquet')
    frame = demos.remi_official_frame(items)
    frame.loc[0, 'task'] = None
    with pytest.raises(data.ReMIDataError, match=r"row 0, column 'task' is empty"):
        data.parquet_rows_to_frame(frame, 'src.parquet')


def test_unreachable_hub_gives_a_clear_error(monkeypatch, tmp_path):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, 'HF_HUB_OFFLINE', True)      # no network here either way; fail fast
    with pytest.raises(RuntimeError, match=r'could not download test.parquet.*--from DIR'):
        data.download_split('test', cache_dir=str(tmp_path / 'empty-cache'))
