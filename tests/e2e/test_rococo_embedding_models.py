"""RoCOCO embedding path: tiny randomly initialised CLIP / BLIP built from configs, cache, and the retrieval
datasets through run.py with the tiny CLIP as a --config model (2-rank sharding: tests/plugin/test_rococo_sharding.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')

from helpers.tiny_models import make_tiny_clip  # noqa: E402
from vlmeval_ext.cli import rococo as E  # noqa: E402
from vlmeval_ext.prepare import rococo as P  # noqa: E402
from vlmeval_ext.cli.rococo import score_embeddings  # noqa: E402

CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789 '


def make_images(root, n):
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        arr = np.zeros((40, 50, 3), np.uint8)
        arr[..., i % 3] = 40 * (i % 6)
        arr[5:20, 5 + i:25 + i, :] = 255 - 20 * i
        p = root / f'img_{i}.png'
        Image.fromarray(arr).save(p)
        paths.append(str(p))
    return paths


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    base = tmp_path_factory.mktemp('rococo_embed')
    return make_tiny_clip(base / 'tiny-clip'), make_images(base / 'imgs', 10), base


TEXTS = [f'a photo of thing {i} on a table' for i in range(9)] + ['x' * 200]


def test_hf_clip_local_path_embeds_and_scores(tiny):
    model_dir, images, _ = tiny
    emb = E.load_embedder(f'hf-clip:{model_dir}')
    img = E.embed_images(emb, images, None, 'f', batch_size=4, progress=False)
    txt = E.embed_texts(emb, TEXTS, None, 'f', batch_size=3, progress=False)
    assert img.shape == (10, 16) and txt.shape == (10, 16)
    assert np.allclose(np.linalg.norm(img, axis=1), 1, atol=1e-5)
    assert np.unique(img.round(5), axis=0).shape[0] == 10           # different images -> different rows
    # batching does not change the rows
    again = E.embed_images(emb, images, None, 'f', batch_size=10, progress=False)
    assert np.allclose(img, again, atol=1e-5)
    entries = [{'image': f'img_{i}.png', 'caption': TEXTS[i:i + 1] * 5} for i in range(2)]
    ann = P.parse_annotation(entries)
    txt_ann = E.embed_texts(emb, ann.texts, None, 'g', progress=False)
    result = score_embeddings(ann, img[:2], txt_ann, 'i2t')
    assert set(result) == {'R@1', 'R@5', 'R@10', 'R_mean', 'false_rate'} and result['R@10'] == 100.0


def test_cache_reuses_items_and_only_embeds_new_ones(tiny, tmp_path):
    model_dir, images, _ = tiny
    emb = E.load_embedder(f'hf-clip:{model_dir}')
    calls = []

    def counting(batch):
        calls.append(len(batch))
        return emb.embed_texts(batch)

    cache = E.EmbeddingCache(tmp_path, emb.name, 'same_concept.json', 'text')
    first = E.embed_items(TEXTS[:6], lambda i: TEXTS[i], counting, cache, batch_size=4, progress=False)
    assert sum(calls) == 6
    calls.clear()
    second = E.embed_items(TEXTS, lambda i: TEXTS[i], counting, cache, batch_size=4, progress=False)
    assert sum(calls) == 4                                             # only the 4 new captions
    assert np.array_equal(second[:6], first)
    other = E.EmbeddingCache(tmp_path, emb.name, 'danger.json', 'text')
    assert other.load() == {}                                          # keyed by file as well as model


def test_bad_model_specs_are_explained():
    with pytest.raises(ValueError, match='hf-clip:<name|path>'):
        E.load_embedder('clip-vit-b32')
    try:
        import open_clip  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match='open_clip_torch'):
            E.load_embedder('open_clip:ViT-B-32/openai')


def test_tiny_blip_itc_path(tmp_path):
    from transformers import (BertTokenizer, BlipConfig, BlipForImageTextRetrieval, BlipImageProcessor,
                              BlipProcessor)
    torch.manual_seed(0)
    words = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + list(CHARS.strip()) + ['##' + c for c in CHARS.strip()]
    (tmp_path / 'vocab.txt').write_text('\n'.join(words) + '\n')
    tok = BertTokenizer(str(tmp_path / 'vocab.txt'))
    cfg = BlipConfig(text_config=dict(vocab_size=len(words), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2, encoder_hidden_size=32,
                                      max_position_embeddings=64),
                     vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                        num_attention_heads=2, image_size=32, patch_size=8),
                     image_text_hidden_size=16)
    BlipForImageTextRetrieval(cfg).save_pretrained(tmp_path / 'blip')
    BlipProcessor(image_processor=BlipImageProcessor(size={'height': 32, 'width': 32}),
                  tokenizer=tok).save_pretrained(tmp_path / 'blip')
    emb = E.load_embedder(f'hf-blip:{tmp_path / "blip"}')
    images = make_images(tmp_path / 'imgs', 3)
    img = E.embed_images(emb, images, None, 'f', progress=False)
    txt = E.embed_texts(emb, TEXTS[:4], None, 'f', progress=False)
    assert img.shape == (3, 16) and txt.shape == (4, 16)
    assert np.allclose(np.linalg.norm(txt, axis=1), 1, atol=1e-5)


def test_retrieval_through_run_py_equals_protocol_on_in_process_embeddings(tiny, fixtures_dir, tmp_path):
    """RoCOCO-I2T and RoCOCO-T2I through the kit's run.py with the tiny CLIP as a --config model (local path):
    the scores equal protocol.py on embeddings computed here, one item at a time as the kit feeds them."""
    from vlmeval_ext.io import load_predictions, read_table
    from vlmeval_ext.dataset.utils import rococo_retrieval as R
    from vlmeval_ext.prepare import rococo as D
    from vlmeval_ext.cli.rococo import main as rococo_main
    from helpers.kit_run import kit_environment, run_kit, write_config
    from helpers.rococo_sources import write_sources

    model_dir = tiny[0]
    ann_dir, coco = write_sources(fixtures_dir, tmp_path, rows=[0, 1, 2, 83])
    env = dict(kit_environment(tmp_path), PRED_FORMAT='tsv')
    names = ['RoCOCO-I2T-same_concept', 'RoCOCO-T2I-mix']
    for name in names:
        assert rococo_main(['prepare', name, '--ann-dir', str(ann_dir), '--coco-root', str(coco),
                            '--out-dir', env['LMUData']]) == 0
    cfg = {'model': {'TinyCLIP': {'class': 'RoCOCOEmbedding', 'backend': 'hf-clip',
                                  'model_path': str(model_dir), 'device': 'cpu'}},
           'data': {n: {'class': 'RoCOCORetrieval', 'dataset': n} for n in names}}
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out'], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]

    emb = E.load_embedder(f'hf-clip:{model_dir}')

    def one_by_one(paths, texts):
        img = np.concatenate([E.embed_images(emb, [p], None, 'f', progress=False) for p in paths])
        txt = np.concatenate([emb.embed_texts([t]) for t in texts]) if texts else None
        return img, txt

    # image-to-text on the attack file: 4 images, 41 captions (one 11-caption entry)
    ann = P.load_annotation(ann_dir / 'same_concept.json')
    img, txt = one_by_one([coco / p for p in ann.images], ann.texts)
    pred_file = next((tmp_path / 'out').rglob('TinyCLIP_RoCOCO-I2T-same_concept.tsv'))
    preds = load_predictions(pred_file)                 # the kit's index as int: protocol order
    got = np.stack([R.decode_vector(c, 'x') for c in preds.sort_values('index')['prediction']])
    assert np.allclose(got, np.concatenate([img, txt]), atol=1e-5)
    scores = json.loads(pred_file.with_name(pred_file.stem + '_score.json').read_text())
    assert scores['n_images'] == 4 and scores['n_texts'] == 41
    assert scores['metrics'] == pytest.approx(score_embeddings(ann, img, txt, 'i2t'))

    # text-to-image: originals then the mixed twins of seeds 1, 10, 100 (written by prepare under the COCO root)
    clean = P.load_annotation(ann_dir / 'coco_karpathy_test.json')
    per_seed = {}
    orig, txt = one_by_one([coco / p for p in clean.images], clean.texts)
    for seed in D.MIX_SEEDS:
        folder = D.mixed_folder_name('mix', seed)
        mixed, _ = one_by_one([coco / P.mixed_image_path(p, folder) for p in clean.images], [])
        per_seed[str(seed)] = score_embeddings(clean, np.concatenate([orig, mixed]), txt, 't2i')
    pred_file = next((tmp_path / 'out').rglob('TinyCLIP_RoCOCO-T2I-mix.tsv'))
    scores = json.loads(pred_file.with_name(pred_file.stem + '_score.json').read_text())
    assert sorted(scores['per_seed']) == sorted(per_seed)
    for seed, metrics in per_seed.items():
        assert scores['per_seed'][seed] == pytest.approx(metrics)
    assert scores['metrics'] == pytest.approx({k: np.mean([m[k] for m in per_seed.values()]) for k in per_seed['1']})
    acc = read_table(pred_file.with_name(pred_file.stem + '_acc.csv'))
    assert acc['seed'].tolist() == ['seed 1', 'seed 10', 'seed 100', 'mean']
