"""`vlmeval-ext prepare`: the options each benchmark takes (--coco-root, --allow-subset), item-count checks (the
official release or a stated subset), and the layouts --from accepts, such as a Hugging Face snapshot as
downloaded (parquet files in subfolders)."""
from __future__ import annotations

import io

import pandas as pd
import pytest
from PIL import Image

from vlmeval_ext.cli.main import main
from vlmeval_ext.prepare.rbench import read_question_bank, records_from_dir, write_tsv
from vlmeval_ext.prepare import demos


def _cli(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def test_remi_prepare_checks_the_item_count_and_allow_subset_says_so(tmp_path, lmu, capsys):
    demos.write_remi_parquet(tmp_path / 'src' / 'test.parquet', demos.remi_items(), True)
    code, _, err = _cli(['prepare', 'ReMI', '--from', str(tmp_path / 'src')], capsys)
    assert code == 2 and 'Traceback' not in err
    assert 'the official release has 2600' in err and '--allow-subset' in err
    assert not (lmu / 'ReMI.tsv').exists()
    code, out, err = _cli(['prepare', 'ReMI', '--from', str(tmp_path / 'src'), '--allow-subset'], capsys)
    assert code == 0 and (lmu / 'ReMI.tsv').is_file()
    assert 'kept 13 items (--allow-subset); the official release has 2600' in err


def test_an_option_a_dataset_does_not_take_is_one_line(lmu, capsys):
    code, _, err = _cli(['prepare', 'ReMI', '--coco-root', '/nowhere'], capsys)
    assert code == 2 and '--coco-root does not apply' in err and 'Traceback' not in err


def test_rococo_prepare_takes_coco_root(tmp_path, lmu, capsys, monkeypatch):
    """--coco-root is an option of prepare (it used to be only the COCO_ROOT variable): its value reaches the
    RoCOCO builder, which names the missing annotations next."""
    monkeypatch.delenv('ROCOCO_ANNOTATIONS', raising=False)
    code, _, err = _cli(['prepare', 'RoCOCO-MCQ-danger', '--coco-root', str(tmp_path)], capsys)
    assert 'unrecognized arguments' not in err
    assert code == 2 and 'annotation' in err


def _png(color) -> bytes:
    buf = io.BytesIO()
    Image.new('RGB', (8, 6), color).save(buf, format='PNG')
    return buf.getvalue()


def test_rbench_reads_a_hugging_face_snapshot_with_parquet_in_subfolders(tmp_path, fixtures_dir):
    bank = read_question_bank(fixtures_dir / 'rbench' / 'Ref_Release.csv')[598:601]
    records = [{**b, 'ref_image': {'bytes': _png((1, 2, 3)), 'path': None},
                'dis_image': {'bytes': _png((4, 5, 6)), 'path': None}} for b in bank]
    snapshot = tmp_path / 'R-Bench'
    (snapshot / 'data').mkdir(parents=True)
    (snapshot / '.cache' / 'huggingface').mkdir(parents=True)
    pd.DataFrame(records).to_parquet(snapshot / 'data' / 'test-00000-of-00001.parquet')
    (snapshot / '.cache' / 'huggingface' / 'junk.parquet').write_bytes(b'not a parquet file')
    assert write_tsv(records_from_dir(snapshot), tmp_path / 'out.tsv') == 6


def test_a_missing_source_folder_is_one_line(tmp_path, lmu, capsys):
    for name in ('ReMI', 'R-Bench-Full', 'GRAB'):
        code, _, err = _cli(['prepare', name, '--from', str(tmp_path / 'nowhere')], capsys)
        assert code == 2 and 'Traceback' not in err and 'nowhere' in err, (name, err)
        assert len([line for line in err.splitlines() if line.strip()]) == 1, err


def test_no_network_is_one_line_with_the_way_out(lmu, capsys, monkeypatch):
    """The Hub unreachable (offline mode here): one line saying what failed and how to build it from a copy."""
    monkeypatch.setenv('HF_DATASETS_OFFLINE', '1')
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    for name in ('GRAB', 'ReMI'):
        code, _, err = _cli(['prepare', name], capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and 'Traceback' not in err and len(lines) == 1, (name, err[-2000:])
        assert f'vlmeval-ext prepare {name} --from DIR' in lines[0]
