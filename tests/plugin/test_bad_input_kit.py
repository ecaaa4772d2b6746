"""Bad input through the kit-side classes and the CLI (issue 8). Imports the kit once (module fixture).

Dataset TSVs, images and prediction files that are wrong in one way each: a DataError naming the file, row/index
and column, or a counted failure in <stem>_score.json; the CLI exits != 0 with one line, no traceback.
"""
from __future__ import annotations

import base64
import io
import json

import numpy as np
import pandas as pd
import pytest

from vlmeval_ext.io import DataError

QUESTION = 'What is the value of the x-intercept of the function? Give your answer as an integer.'


@pytest.fixture(scope='module')
def kit():
    from vlmeval_ext.datasets import GRAB
    from vlmeval_ext.datasets import ReMI
    return {'GRAB': GRAB, 'ReMI': ReMI}


def _png_b64(color=(200, 30, 30)) -> str:
    from PIL import Image
    buf = io.BytesIO()
    Image.new('RGB', (8, 8), color).save(buf, format='PNG')
    return base64.b64encode(buf.getvalue()).decode()


def _grab_rows(n=2, **override):
    rows = [{'index': i, 'pid': i, 'question': QUESTION, 'answer': '-9', 'task': 'properties',
             'category': 'Intercepts and Gradients', 'complexity': 0, 'image': _png_b64()} for i in range(n)]
    for key, values in override.items():
        for row, value in zip(rows, values):
            row[key] = value
    return rows


def _write_grab(lmu, rows, drop=()):
    df = pd.DataFrame(rows).drop(columns=list(drop))
    df.to_csv(lmu / 'GRAB.tsv', sep='\t', index=False)
    return lmu / 'GRAB.tsv'


# ------------------------------------------------------------------------------------------- dataset TSVs

def test_image_path_with_dotdot_writes_nothing_outside(kit, lmu, tmp_path):
    _write_grab(lmu, _grab_rows(1, image_path=['../../escaped.png']))
    with pytest.raises(DataError, match=r"GRAB\.tsv: index 0: image name '\.\./\.\./escaped\.png' is absolute or "
                                        'leaves the image folder'):
        kit['GRAB']('GRAB')                               # images are dumped when the dataset is built
    assert not list(tmp_path.rglob('escaped.png'))


def test_absolute_image_path_writes_nothing_there(kit, lmu, tmp_path):
    target = tmp_path / 'outside' / 'abs.png'
    _write_grab(lmu, _grab_rows(1, image_path=[str(target)]))
    with pytest.raises(DataError, match='is absolute or leaves the image folder'):
        kit['GRAB']('GRAB')
    assert not target.exists() and not target.parent.exists()


def test_broken_base64_leaves_out_that_row_names_row_and_column(kit, lmu, capsys):
    _write_grab(lmu, _grab_rows(3, image=[_png_b64(), 'iVBORw0KGgo' + '!' * 80, _png_b64((1, 2, 3))]))
    ds = kit['GRAB']('GRAB')
    assert ds.data['index'].tolist() == [0, 2]             # the rest runs
    assert list(ds.bad_image_rows) == ['1']
    assert "GRAB.tsv: row 3, column 'image': not a base64 image" in ds.bad_image_rows['1']
    err = capsys.readouterr().err
    assert "GRAB.tsv: row 3, column 'image': not a base64 image" in err and 'left out of the run' in err
    ds.build_prompt(ds.data.iloc[1])


def test_valid_base64_that_does_not_decode_names_index_and_column(kit, lmu, capsys):
    _write_grab(lmu, _grab_rows(2, image=[_png_b64(), 'iVBORw0KGgo' + 'A' * 81]))
    ds = kit['GRAB']('GRAB')
    ds.build_prompt(ds.data.iloc[0])                      # the good row still works
    assert len(ds) == 1 and "GRAB.tsv: index 1, column 'image': not a decodable base64 image" in \
        ds.bad_image_rows['1']
    assert "index 1, column 'image': not a decodable base64 image" in capsys.readouterr().err


def test_base64_of_something_that_is_not_an_image(kit, lmu):
    not_image = base64.b64encode(b'%PDF-1.4 this is a pdf, not a picture ' * 4).decode()
    _write_grab(lmu, _grab_rows(1, image=[not_image]))
    with pytest.raises(DataError, match=r"no row holds a decodable image .*index 0, column 'image': not a "
                                        'decodable base64 image'):
        kit['GRAB']('GRAB')


def test_zero_byte_dataset_tsv(kit, lmu):
    (lmu / 'GRAB.tsv').write_bytes(b'')
    with pytest.raises(DataError, match=r'GRAB\.tsv: the file is empty \(0 bytes\)'):
        kit['GRAB']('GRAB')


def test_dataset_tsv_missing_a_required_column(kit, lmu):
    _write_grab(lmu, _grab_rows(), drop=('answer',))
    with pytest.raises(DataError, match=r"GRAB\.tsv: missing column\(s\) \['answer'\]"):
        kit['GRAB']('GRAB')


def test_dataset_tsv_with_duplicate_indices(kit, lmu):
    _write_grab(lmu, _grab_rows(3, index=[5, 6, 5]))
    with pytest.raises(DataError, match=r"GRAB\.tsv: row 4, column 'index': duplicate index '5' \(first at row 2\)"):
        kit['GRAB']('GRAB')


def test_empty_image_cell_names_the_line(kit, lmu):
    _write_grab(lmu, _grab_rows(2, image=[_png_b64(), '']))
    with pytest.raises(DataError, match=r"GRAB\.tsv: row 3, column 'image': empty"):
        kit['GRAB']('GRAB')


def test_damaged_demo_tsv_fails_its_md5(kit, lmu):
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV
    src = GRAB_DEMO_TSV.read_bytes()
    (lmu / 'GRAB_DEMO.tsv').write_bytes(src.replace(b'properties', b'propertieZ', 1))
    with pytest.raises(DataError, match=r'GRAB_DEMO\.tsv: md5 .* does not match the expected'):
        kit['GRAB']('GRAB_DEMO')


# ---------------------------------------------------------------------------------------- predictions files

def _grab_preds(tmp_path, predictions, answers=None):
    rows = _grab_rows(len(predictions))
    for row, pred in zip(rows, predictions):
        row.pop('image')
        row['prediction'] = pred
    if answers is not None:
        for row, answer in zip(rows, answers):
            row['answer'] = answer
    path = tmp_path / 'Model_GRAB.tsv'
    pd.DataFrame(rows).to_csv(path, sep='\t', index=False)
    return path


def test_grab_nan_answer_names_row_and_column(kit, lmu, tmp_path):
    path = _grab_preds(tmp_path, ['-9', '-9'], answers=['-9', None])
    with pytest.raises(ValueError, match=r"Model_GRAB\.tsv: row 3, column 'answer'"):
        kit['GRAB'].for_predictions('GRAB', path).evaluate(str(path))


def test_grab_bad_outputs_are_counted_never_silently_scored(kit, lmu, tmp_path):
    outputs = ['-9', None, '', 'x' * 1_000_000 + ' -9', '\x00\x01\x02-9', 'Failed to obtain answer via API.',
               '答案: -9']
    path = _grab_preds(tmp_path, outputs)
    kit['GRAB'].for_predictions('GRAB', path).evaluate(str(path))
    scores = json.loads((tmp_path / 'Model_GRAB_score.json').read_text())
    official = scores['official']['counts']
    items = pd.read_csv(tmp_path / 'Model_GRAB_items.tsv', sep='\t')
    # None (empty cell) is an empty answer in the kit's file; the kit's failure text is an inference failure,
    # counted and listed (column `failed` of _items.tsv).
    assert official['inference_failures'] == 1
    assert items.loc[items['failed'].notna(), 'index'].tolist() == [5]
    assert scores['counts']['empty'] == 2                        # None and '' (both empty cells once written)
    assert official['scored'] == len(outputs) - 1
    assert items.loc[items['index'] == 5, 'official'].isna().all()
    assert scores['normalized']['Overall'] == pytest.approx(100 * 4 / 6, abs=1e-3)   # -9, 1MB, binary, 答案


def test_remi_non_dict_json_outputs_are_counted(kit, lmu, tmp_path, monkeypatch):
    # The demo's own first six items (eval checks answers against the dataset's), one reply shape each.
    from vlmeval_ext.io import read_table
    from vlmeval_ext.prepare.demos import REMI_DEMO_TSV
    demo = read_table(REMI_DEMO_TSV).head(6)
    shapes = [lambda a: json.dumps({'answer': a}), lambda a: f'[{a}]', lambda a: json.dumps(a), lambda a: a,
              lambda a: 'null', lambda a: None]
    rows = [{'index': r['index'], 'task': r['task'], 'answer': r['answer'], 'question': r['question'],
             'prediction': shape(r['answer'])} for r, shape in zip(demo.to_dict('records'), shapes)]
    path = tmp_path / 'Model_ReMI_DEMO.tsv'
    pd.DataFrame(rows).to_csv(path, sep='\t', index=False)
    kit['ReMI'].for_predictions('ReMI_DEMO', path).evaluate(str(path))
    summary = json.loads((tmp_path / 'Model_ReMI_DEMO_score.json').read_text())
    counts = summary['counts']
    # The empty cell is an empty answer (wrong, counted), not an inference failure.
    assert counts['inference_failures'] == 0 and counts['empty'] == 1
    assert sum(counts['parse_failures'].values()) == 5 and counts['official_bad_json'] == 5
    items = pd.read_csv(tmp_path / 'Model_ReMI_DEMO_items.tsv', sep='\t')
    status = items['status'].tolist()
    assert status[0] == 'ok' and set(status[1:]) <= {'not_object', 'no_json'}
    assert items['lenient'].iloc[1:].eq(False).all() and items['official'].iloc[1:].eq(False).all()
    assert items['kind'].tolist() == ['answer'] * 5 + ['empty']


# ----------------------------------------------------------------------------------------------------- CLI

def _cli(argv, capsys):
    from vlmeval_ext.cli.main import main
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip()
    return exit_info.value.code, err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith('[20')]  # drop kit logs
    assert len(lines) == 1 and 'Traceback' not in err, err
    return lines[0]


def test_cli_eval_of_a_missing_predictions_file(kit, lmu, tmp_path, capsys):
    code, err = _cli(['eval', '--data', 'GRAB_DEMO', '--pred', str(tmp_path / 'nope.xlsx')], capsys)
    assert code == 2 and 'nope.xlsx not found' in _one_line(err)


def test_cli_eval_with_a_missing_column(kit, lmu, tmp_path, capsys):
    path = tmp_path / 'preds.tsv'
    pd.DataFrame({'index': [1], 'question': ['q'], 'answer': ['3']}).to_csv(path, sep='\t', index=False)
    code, err = _cli(['eval', '--data', 'GRAB_DEMO', '--pred', str(path)], capsys)
    line = _one_line(err)
    assert code == 2 and 'preds.tsv: missing column(s)' in line and "'prediction'" in line


def test_cli_eval_of_a_zero_byte_predictions_file(kit, lmu, tmp_path, capsys):
    path = tmp_path / 'preds.xlsx'
    path.write_bytes(b'')
    code, err = _cli(['eval', '--data', 'ReMI_DEMO', '--pred', str(path)], capsys)
    assert code == 2 and 'preds.xlsx: the file is empty (0 bytes)' in _one_line(err)


def test_cli_eval_of_an_unknown_dataset(kit, lmu, tmp_path, capsys):
    path = tmp_path / 'preds.tsv'
    path.write_text('index\tprediction\n1\tA\n')
    code, err = _cli(['eval', '--data', 'NoSuchBench', '--pred', str(path)], capsys)
    assert code == 2 and "unknown dataset 'NoSuchBench'" in _one_line(err)


def test_cli_rococo_score_with_nan_embeddings(tmp_path, capsys):
    from vlmeval_ext.cli.main import main
    entries = [{'image': f'img{i}.jpg', 'caption': [f'photo {i} thing {k}' for k in range(10)]} for i in range(2)]
    (tmp_path / 'ann.json').write_text(json.dumps(entries))
    np.save(tmp_path / 'img.npy', np.array([[1.0, 0.0], [np.nan, 1.0]]))
    np.save(tmp_path / 'txt.npy', np.ones((20, 2)))
    with pytest.raises(SystemExit) as exit_info:
        main(['rococo', 'score', '--direction', 'i2t', '--ann', str(tmp_path / 'ann.json'),
              '--image-emb', str(tmp_path / 'img.npy'), '--text-emb', str(tmp_path / 'txt.npy')])
    err = capsys.readouterr().err.strip()              # one prefixed line, status 2, like every set-up error
    assert exit_info.value.code == 2 and err.startswith('[vlmeval-ext] ERROR: ') and '\n' not in err
    assert 'row 1 column 0 is nan' in err


def test_cli_corrupt_image_with_an_unknown_distortion(tmp_path, capsys):
    from PIL import Image

    from vlmeval_ext.cli.main import main
    Image.new('RGB', (16, 16)).save(tmp_path / 'in.png')
    with pytest.raises(SystemExit) as exit_info:
        main(['corrupt-image', str(tmp_path / 'in.png'), '--out-dir', str(tmp_path / 'out'), '--distortion', '99'])
    code = exit_info.value.code
    err = capsys.readouterr().err
    assert code not in (0, None) and 'Traceback' not in err
    assert "unknown distortion id '99'" in err
    assert not list((tmp_path / 'out').glob('*.png')) if (tmp_path / 'out').exists() else True


@pytest.mark.parametrize('cell', ['iVBORw0KGgo=', base64.b64encode(b'<html>404 Not Found</html>').decode(), '7'])
def test_a_short_image_cell_that_names_no_row_is_a_bad_image_row(kit, lmu, capsys, cell):
    """A cell of at most 64 characters is how the kit refers to another row's image; one that names no other
    row (a PNG header only, an HTML error page saved as an image, an index that is not there) is a bad image
    row: left out and counted, and the rest runs."""
    _write_grab(lmu, _grab_rows(3, image=[_png_b64(), cell, _png_b64((1, 2, 3))]))
    ds = kit['GRAB']('GRAB')
    assert ds.data['index'].tolist() == [0, 2] and list(ds.bad_image_rows) == ['1'], ds.bad_image_rows
    assert 'left out of the run' in capsys.readouterr().err
