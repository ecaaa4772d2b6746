"""RoCOCO embedding extraction sharded over 2 gloo ranks equals one process (and the image cache is per item).

The ranks run a small deterministic torch embedder, not CLIP: what is under test is the sharding and gathering of
embed_items (the real CLIP path runs in test_rococo_embed.py), and importing transformers in each spawned process
would triple the test's time.
"""
from __future__ import annotations

import datetime
import os
import time

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip('torch')

from vlmeval_ext.cli import rococo as E  # noqa: E402

TEXTS = [f'a photo of thing {i} on a table' for i in range(6)] + ['x' * 90]


def _normalise(t):
    return (t / t.norm(dim=-1, keepdim=True)).numpy()


class ToyEmbedder:
    """Linear maps of 4x4 thumbnails / character histograms, seeded: identical in every process."""
    name = 'toy'

    def __init__(self):
        gen = torch.Generator().manual_seed(0)
        self.image_proj = torch.randn(48, 8, generator=gen)
        self.text_proj = torch.randn(128, 8, generator=gen)

    def embed_images(self, images):
        pix = torch.stack([torch.as_tensor(np.asarray(im.resize((4, 4)), np.float32).reshape(-1)) for im in images])
        return _normalise(pix @ self.image_proj)

    def embed_texts(self, texts):
        hist = torch.stack([torch.bincount(torch.tensor([min(ord(c), 127) for c in t]), minlength=128).float()
                            for t in texts])
        return _normalise(hist @ self.text_proj)


def _worker(rank, world, init_file, images, out_dir):
    import torch.distributed as dist
    dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    emb = ToyEmbedder()
    np.save(os.path.join(out_dir, f'img_{rank}.npy'), E.embed_images(emb, images, None, 'f', batch_size=2,
                                                                     progress=False))
    np.save(os.path.join(out_dir, f'txt_{rank}.npy'), E.embed_texts(emb, TEXTS, None, 'f', batch_size=2,
                                                                    progress=False))
    dist.destroy_process_group()


def test_two_ranks_equal_one_process(tmp_path):
    import torch.multiprocessing as mp
    images = []
    for i in range(5):
        arr = np.zeros((20, 24, 3), np.uint8)
        arr[..., i % 3] = 50 * i
        arr[2:10, i:i + 8] = 255
        images.append(str(tmp_path / f'{i}.png'))
        Image.fromarray(arr).save(images[-1])
    emb = ToyEmbedder()
    single = {'img': E.embed_images(emb, images, None, 'f', batch_size=2, progress=False),
              'txt': E.embed_texts(emb, TEXTS, None, 'f', batch_size=2, progress=False)}
    assert np.unique(single['img'].round(5), axis=0).shape[0] == 5
    ranks = mp.spawn(_worker, args=(2, str(tmp_path / 'init'), images, str(tmp_path)), nprocs=2, join=False)
    deadline = time.time() + 300
    while not ranks.join(timeout=5):                       # raises when a rank fails
        if time.time() > deadline:
            for proc in ranks.processes:
                proc.kill()
            pytest.fail('the two ranks did not finish within 300 s')
    for kind in ('img', 'txt'):
        for rank in (0, 1):                                  # every rank ends with the whole, ordered array
            assert np.array_equal(np.load(tmp_path / f'{kind}_{rank}.npy'), single[kind])
    # rank 1 of 2 embeds batches 1 and 3 of a 7-item list in batches of 2
    assert E.batches_for_rank(7, 2, 1, 2) == [(2, 4), (6, 7)]


def test_cache_covers_items_embedded_by_any_rank(tmp_path):
    emb = ToyEmbedder()
    first = E.embed_texts(emb, TEXTS[:4], tmp_path, 'f.json', batch_size=3, progress=False)
    calls = []
    original = emb.embed_texts
    emb.embed_texts = lambda batch: calls.append(len(batch)) or original(batch)
    again = E.embed_texts(emb, TEXTS, tmp_path, 'f.json', batch_size=3, progress=False)
    assert sum(calls) == 3 and np.array_equal(again[:4], first)
