"""RoCOCO kit TSVs: prepare from official-format annotations + generated COCO images, the vector codec, retrieval
scoring from a predictions table (the dataset's score_predictions), MCQ evaluation, and the shipped demo's
provenance."""
from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import pytest

from vlmeval_ext.dataset.utils import rococo_retrieval as R
from vlmeval_ext.io import DataError, read_table, write_kit_tsv
from vlmeval_ext.prepare import demos
from vlmeval_ext.prepare import rococo as D
from vlmeval_ext.prepare import rococo as P
from vlmeval_ext.cli.rococo import main as rococo_main
from vlmeval_ext.cli.rococo import score_embeddings


def score_retrieval(preds, direction, source):
    return R.score_predictions(preds, direction, source)[0]

from helpers.rococo_sources import fake_predictions, write_sources


def test_prepare_i2t_and_score_equals_protocol(fixtures_dir, tmp_path, capsys):
    ann_dir, coco = write_sources(fixtures_dir, tmp_path)
    assert rococo_main(['prepare', 'RoCOCO-I2T-same_concept', '--ann-dir', str(ann_dir), '--coco-root', str(coco),
                        '--out-dir', str(tmp_path / 'lmu')]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    frame = read_table(summary['tsv'])
    ann = P.load_annotation(ann_dir / 'same_concept.json')
    assert summary['rows'] == len(frame) == 5 + 51 == ann.n_images + ann.n_texts
    assert frame['index'].tolist() == [str(i) for i in range(len(frame))]     # read as the text written
    assert frame['kind'].tolist() == ['image'] * 5 + ['text'] * 51
    # image rows carry the COCO file's bytes unchanged, in annotation order
    for k, row in frame.head(5).iterrows():
        assert row['source'] == ann.images[k]
        assert base64.b64decode(row['image']) == (coco / ann.images[k]).read_bytes()
    texts = frame[frame['kind'] == 'text']
    assert texts['question'].tolist() == ann.texts                      # normalised, file order
    assert (texts['ground_truth'] == 'yes').sum() == 5 * 5 + 1          # 4 x 5 + 6 ground-truth captions
    preds, vectors = fake_predictions(frame)
    shuffled = preds.sample(frac=1, random_state=1)                     # evaluate sorts by index
    got = score_retrieval(shuffled, 'i2t', 'preds.tsv')
    assert got['metrics'] == score_embeddings(ann, vectors[:5], vectors[5:], 'i2t')
    assert got['n_images'] == 5 and got['n_texts'] == 51 and got['dim'] == 6


def test_prepare_t2i_makes_mixed_images_and_scores_per_seed(fixtures_dir, tmp_path, capsys):
    pytest.importorskip('torch')                                          # make_mixed replays torch's RNG
    ann_dir, coco = write_sources(fixtures_dir, tmp_path, rows=[0, 1, 2])
    rococo_main(['prepare', 'RoCOCO-T2I-patch', '--ann-dir', str(ann_dir), '--coco-root', str(coco),
                 '--mixed-root', str(tmp_path / 'mixed'), '--out-dir', str(tmp_path / 'lmu')])
    frame = read_table(json.loads(capsys.readouterr().out.strip().splitlines()[-1])['tsv'])
    images = frame[frame['kind'] == 'image']
    assert images['seed'].tolist() == ['0'] * 3 + ['1'] * 3 + ['10'] * 3 + ['100'] * 3
    assert images['source'].iloc[3] == 'patch_0.9_seed1/' + images['source'].iloc[0].split('/')[-1]
    assert (tmp_path / 'mixed' / 'patch_0.9_seed100').is_dir()
    assert base64.b64decode(images['image'].iloc[3]) == (tmp_path / 'mixed' / images['source'].iloc[3]).read_bytes()
    ann = P.load_annotation(ann_dir / 'coco_karpathy_test.json')
    preds, v = fake_predictions(frame, seed=3)
    got = score_retrieval(preds, 't2i', 'preds.tsv')
    per_seed = {str(s): score_embeddings(ann, np.concatenate([v[:3], v[3 * k:3 * k + 3]]), v[12:], 't2i')
                for k, s in ((1, 1), (2, 10), (3, 100))}
    assert got['per_seed'] == per_seed
    assert got['metrics'] == {k: pytest.approx(np.mean([m[k] for m in per_seed.values()])) for k in per_seed['1']}
    table = R.retrieval_table(got)
    assert table['seed'].tolist() == ['seed 1', 'seed 10', 'seed 100', 'mean']


def test_prepare_errors_name_what_is_missing(fixtures_dir, tmp_path, monkeypatch):
    ann_dir, coco = write_sources(fixtures_dir, tmp_path, rows=[0, 1])
    monkeypatch.delenv('COCO_ROOT', raising=False)
    with pytest.raises(DataError, match='COCO_ROOT'):
        D.resolve_coco_root(None, str(ann_dir))
    assert D.resolve_coco_root(None, str(coco)) == coco                  # --from folder holding val2014/
    with pytest.raises(DataError, match='danger.json: RoCOCO annotation not found'):
        D.frame_for('RoCOCO-I2T-danger', ann_dir, coco)
    with pytest.raises(DataError, match='unknown RoCOCO dataset'):
        D.parse_name('RoCOCO-I2T-mix')
    missing = coco / json.loads((ann_dir / 'same_concept.json').read_text())[1]['image']
    missing.unlink()
    with pytest.raises(DataError, match=f'gallery item 1: image .*{missing.name} not found'):
        D.frame_for('RoCOCO-I2T-same_concept', ann_dir, coco)


def test_vector_codec_and_garbled_predictions(fixtures_dir, tmp_path):
    v = np.random.default_rng(0).standard_normal(7).astype(np.float32)
    assert np.array_equal(R.decode_vector(R.encode_vector(v), 'x'), v)           # f32 is exact
    assert np.allclose(R.decode_vector(R.encode_vector(v, 'f16'), 'x'), v, atol=1e-2)
    cell = R.encode_vector(v)
    for bad, msg in [('A photo of a dog', 'not an embedding'), (cell[:-8], 'truncated'),
                     ('emb:f64:7:AAAA', 'malformed'), ('emb:f32:7:@@@@', 'not valid base64'),
                     (R.encode_vector(np.array([np.nan, 1.0])), 'not finite'), ('', 'not an embedding')]:
        with pytest.raises(ValueError, match=msg):
            R.decode_vector(bad, 'f.tsv: row 9')
    ann_dir, coco = write_sources(fixtures_dir, tmp_path, rows=[0, 1])
    preds, _ = fake_predictions(D.frame_for('RoCOCO-I2T-clean', ann_dir, coco))
    garbled = preds.copy()
    garbled.loc[4, 'prediction'] = 'Sorry, I cannot help.'
    with pytest.raises(ValueError, match=r"preds.tsv: row 6 \(index 4\), column 'prediction': not an embedding"):
        score_retrieval(garbled, 'i2t', 'preds.tsv')
    with pytest.raises(ValueError, match='not items 0..'):
        score_retrieval(preds.drop(index=5), 'i2t', 'preds.tsv')
    mixed_dims = preds.copy()
    mixed_dims.loc[3, 'prediction'] = R.encode_vector(np.ones(4))
    with pytest.raises(ValueError, match=r"row 5 \(index 3\), column 'prediction': a 4-dim embedding"):
        score_retrieval(mixed_dims, 'i2t', 'preds.tsv')


def test_mcq_evaluation_never_guesses(tmp_path):
    from vlmeval_ext.dataset.rococo_mcq import RoCOCOMCQ
    options = {'A': 'a dog on a couch', 'B': 'a cat on a couch', 'C': 'a red bus', 'D': 'two men'}
    preds = pd.DataFrame({'index': [0, 1, 2, 3, 4], 'question': 'q', **{k: [v] * 5 for k, v in options.items()},
                          'answer': ['A', 'B', 'C', 'D', 'A'], 'twin': ['B', 'A', 'D', 'C', 'B'],
                          'prediction': ['A', 'A', 'Failed to obtain answer via API.', '', 'nonsense']})
    path = tmp_path / 'p.tsv'
    preds.to_csv(path, sep='\t', index=False)
    dataset = object.__new__(RoCOCOMCQ)
    dataset.dataset_name = 'RoCOCO-MCQ-same_concept'
    dataset.evaluate(str(path))                     # the kit's failure text is matched exactly
    result = json.loads((tmp_path / 'p_score.json').read_text())
    items = pd.read_csv(tmp_path / 'p_items.tsv', sep='\t')
    # The inference failure is counted and left out of the means: 1 of 4 answered rows is right.
    assert result['n'] == 4 and result['n_items'] == 5
    assert result['accuracy'] == 25.0 and result['twin_rate'] == 25.0
    assert result['unparsed'] == 2 and result['inference_failed'] == 1 and result['empty'] == 1
    assert result['chance'] == 25.0 and items['how'].tolist()[2:] == ['inference_failed', 'empty', 'unparsed']
    preds.assign(twin=['B', 'A', 'D', 'C', 'E']).to_csv(path, sep='\t', index=False)
    with pytest.raises(ValueError, match="p.tsv: row 6, column 'twin': 'E' is not one of the options"):
        dataset.evaluate(str(path))


def test_shipped_demo_is_rebuilt_from_the_real_file(fixtures_dir, tmp_path):
    out = demos.build_rococo(fixtures_dir / 'rococo' / 'same_concept.json', tmp_path / 'demo.tsv')
    assert open(out, 'rb').read() == demos.ROCOCO_DEMO_TSV.read_bytes()
    assert demos.ROCOCO_DEMO_TSV.stat().st_size < 1_000_000
    demo = read_table(demos.ROCOCO_DEMO_TSV)
    ann = P.load_annotation(fixtures_dir / 'rococo' / 'same_concept.json')
    assert len(demo) == 24 and '83' in demo['index'].tolist()
    for row in demo.to_dict('records'):
        twin = int(row['twin_text_row'])
        assert row[row['answer']] == ann.texts[ann.ground_truth[int(row['index'])][0]]
        assert row[row['twin']] == ann.texts[twin] and not ann.is_ground_truth[twin]


def test_registered_names_follow_the_spec():
    from vlmeval_ext.spec import load_spec
    spec = load_spec('rococo')
    assert D.I2T_NAMES == spec['datasets']['i2t'] and D.T2I_NAMES == spec['datasets']['t2i']
    assert D.MCQ_NAMES == spec['datasets']['mcq'] and demos.ROCOCO_DEMO_NAME == spec['datasets']['demo']
    assert list(D.MIX_SEEDS) == spec['mixing']['seeds'] and D.MIX_LAM == spec['mixing']['lam']


def test_streaming_tsv_equals_the_in_memory_one(fixtures_dir, tmp_path):
    """prepare writes image cells from file paths row by row; the file is byte for byte the in-memory frame's,
    T2I with its mixed images included, and missing files are still named before anything is written."""
    ann_dir, coco = write_sources(fixtures_dir, tmp_path, rows=[0, 1, 2])
    for name in ('RoCOCO-I2T-same_concept', 'RoCOCO-T2I-patch'):
        eager = write_kit_tsv(D.frame_for(name, ann_dir, coco, progress=False), tmp_path / f'eager-{name}.tsv')
        lazy_frame = D.frame_for(name, ann_dir, coco, progress=False, lazy_images=True)
        assert any(isinstance(cell, type(coco)) for cell in lazy_frame['image'])
        lazy = D.write_tsv_streaming(lazy_frame, tmp_path / f'lazy-{name}.tsv')
        assert open(eager, 'rb').read() == open(lazy, 'rb').read()
        assert open(f'{eager}.md5').read() == open(f'{lazy}.md5').read()
    first = json.loads((ann_dir / 'same_concept.json').read_text())[0]['image']
    (coco / first).write_bytes(b'')
    with pytest.raises(DataError, match=f'gallery item 0: image .*{first.split("/")[-1]} is empty'):
        D.frame_for('RoCOCO-I2T-same_concept', ann_dir, coco, lazy_images=True)
