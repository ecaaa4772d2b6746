"""The plugin's own kit models. Neither is a model of anything; both need no weights.

- `Naive-Baseline` answers every prompt with the naive baseline of the benchmark it is evaluated on (the first
  option of an MCQ, 0 for a GRAB value, ...; `naive_answer` in vlmeval_ext/plugin/<bench>.py): the demo runs the
  whole pipeline offline, and its scores are the floor any real model should beat.
- `RoCOCO-Smoke-Hash` is a smoke test of the retrieval pipeline: captions as signed feature hashes of their words,
  images as the centred grey pixels of a thumbnail. The two share no meaning, so its recalls are about chance:
  they check the plumbing and are never compared with the paper.
"""
from __future__ import annotations

import hashlib
import re

import numpy as np
from vlmeval.vlm.base import BaseModel

from vlmeval_ext.vlm.rococo_embedding import RoCOCOEmbedding


class NaiveBaseline(BaseModel):
    INTERLEAVE = True
    is_api = False

    def __init__(self, name: str = 'Naive-Baseline', **kwargs):
        super().__init__()
        self.name = name

    def generate_inner(self, message, dataset=None):
        from vlmeval_ext.registry import benchmark_of, load_object
        record = benchmark_of(str(dataset))
        if record is None or record.naive is None:
            raise ValueError(f'Naive-Baseline answers the vlmeval-ext datasets scored from text (not {dataset!r}; '
                             'RoCOCO retrieval needs an embedding model such as RoCOCO-CLIP-B32)')
        prompt = '\n'.join(m['value'] for m in message if m['type'] == 'text')
        return load_object(record.naive)(prompt, dataset)


class SmokeHashEmbedder:
    """Weight-free, deterministic embeddings of `dim` numbers (a square number: the image thumbnail is square)."""

    def __init__(self, dim: int):
        side = int(round(dim ** 0.5))
        if side * side != dim or dim < 4:
            raise ValueError(f'RoCOCO-Smoke-Hash: dim must be a square number >= 4, not {dim}')
        self.dim, self.side, self.name = dim, side, f'smoke-hash:{dim}'

    @staticmethod
    def _unit(rows: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return (rows / np.where(norms == 0, 1, norms)).astype(np.float32)

    def embed_images(self, images):
        rows = []
        for im in images:
            grey = np.asarray(im.convert('L').resize((self.side, self.side)), dtype=np.float32).ravel()
            rows.append(grey - grey.mean())
        return self._unit(np.stack(rows))

    def embed_texts(self, texts):
        rows = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r'[a-z0-9]+', str(text).lower()):
                digest = hashlib.blake2b(word.encode('utf-8'), digest_size=8).digest()
                rows[i, digest[0] % self.dim] += 1.0 if digest[1] % 2 else -1.0
        return self._unit(rows)


class SmokeHashEmbedding(RoCOCOEmbedding):
    """RoCOCO's embedding model with the smoke-test embedder (no weights, no torch)."""

    def __init__(self, dim: int = 64, name: str = 'RoCOCO-Smoke-Hash', precision: str = 'f32'):
        BaseModel.__init__(self)
        self.embedder, self.precision, self.name = SmokeHashEmbedder(int(dim)), precision, name
