"""Embedding models for RoCOCO retrieval, an on-disk cache, and extraction sharded across torchrun ranks.

Model specs (name on the hub or a local directory):
  hf-clip:<name|path>      transformers CLIPModel (+ CLIPProcessor)           e.g. hf-clip:openai/clip-vit-base-patch32
  open_clip:<arch>[/<tag>] open_clip create_model_and_transforms             e.g. open_clip:ViT-B-32/openai
  hf-blip:<name|path>      transformers BlipForImageTextRetrieval, ITC heads  e.g. hf-blip:Salesforce/blip-itm-base-coco
  smoke-hash:<dim>         a weight-free smoke test of the pipeline, not a model (chance-level recalls)
BLIP's published retrieval numbers re-rank the ITC top-256 with the ITM head; the ITC embeddings here give the
first-stage scores only (bring-your-own embeddings for anything else).

Sharding: items are cut into fixed global batches; rank r embeds batches r, r + world, ... and the results are
all-gathered. Every batch holds the same items whatever the world size, so one process and N processes produce
the same arrays.
"""
from __future__ import annotations

import hashlib
import os
import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable, Sequence

import numpy as np


# ----------------------------------------------------------------------------------------------------- models
class Embedder(ABC):
    """Maps PIL images and strings to L2-normalised float32 rows in one shared space."""
    name: str

    @abstractmethod
    def embed_images(self, images: list) -> np.ndarray: ...

    @abstractmethod
    def embed_texts(self, texts: list[str]) -> np.ndarray: ...


def _normalise(t):
    import torch
    return torch.nn.functional.normalize(t.float(), dim=-1).cpu().numpy().astype(np.float32)


class HFCLIPEmbedder(Embedder):
    def __init__(self, name_or_path: str, device: str = 'cpu'):
        import torch
        from transformers import CLIPModel, CLIPProcessor
        self.name = f'hf-clip:{name_or_path}'
        self.device = device
        self.model = CLIPModel.from_pretrained(name_or_path).to(device).eval()
        self.processor = CLIPProcessor.from_pretrained(name_or_path)
        self.max_length = self.model.config.text_config.max_position_embeddings
        self._torch = torch

    def embed_images(self, images):
        with self._torch.no_grad():
            pix = self.processor(images=images, return_tensors='pt')['pixel_values'].to(self.device)
            pooled = self.model.vision_model(pixel_values=pix).pooler_output
            return _normalise(self.model.visual_projection(pooled))

    def embed_texts(self, texts):
        with self._torch.no_grad():
            tok = self.processor(text=list(texts), return_tensors='pt', padding=True, truncation=True,
                                 max_length=self.max_length)
            pooled = self.model.text_model(input_ids=tok['input_ids'].to(self.device),
                                           attention_mask=tok['attention_mask'].to(self.device)).pooler_output
            return _normalise(self.model.text_projection(pooled))


class HFBLIPEmbedder(Embedder):
    def __init__(self, name_or_path: str, device: str = 'cpu'):
        import torch
        from transformers import BlipForImageTextRetrieval, BlipProcessor
        self.name = f'hf-blip:{name_or_path}'
        self.device = device
        self.model = BlipForImageTextRetrieval.from_pretrained(name_or_path).to(device).eval()
        self.processor = BlipProcessor.from_pretrained(name_or_path)
        self._torch = torch

    def embed_images(self, images):
        with self._torch.no_grad():
            pix = self.processor(images=images, return_tensors='pt')['pixel_values'].to(self.device)
            cls = self.model.vision_model(pixel_values=pix).last_hidden_state[:, 0, :]
            return _normalise(self.model.vision_proj(cls))

    def embed_texts(self, texts):
        with self._torch.no_grad():
            tok = self.processor(text=list(texts), return_tensors='pt', padding=True, truncation=True, max_length=35)
            out = self.model.text_encoder(input_ids=tok['input_ids'].to(self.device),
                                          attention_mask=tok['attention_mask'].to(self.device))
            return _normalise(self.model.text_proj(out.last_hidden_state[:, 0, :]))


class OpenCLIPEmbedder(Embedder):
    def __init__(self, spec: str, device: str = 'cpu'):
        try:
            import open_clip
        except ImportError as err:
            raise ImportError('open_clip:<arch> models need the open_clip_torch package '
                              '(pip install open_clip_torch); or use hf-clip:<name|path>') from err
        import torch
        arch, _, tag = spec.partition('/')
        self.name = f'open_clip:{spec}'
        self.device = device
        self.model, _, self.preprocess = open_clip.create_model_and_transforms(arch, pretrained=tag or None,
                                                                               device=device)
        self.model.eval()
        self.tokenizer = open_clip.get_tokenizer(arch)
        self._torch = torch

    def embed_images(self, images):
        with self._torch.no_grad():
            pix = self._torch.stack([self.preprocess(im) for im in images]).to(self.device)
            return _normalise(self.model.encode_image(pix))

    def embed_texts(self, texts):
        with self._torch.no_grad():
            return _normalise(self.model.encode_text(self.tokenizer(list(texts)).to(self.device)))


class SmokeHashEmbedder(Embedder):
    """A smoke-test backend, not a model: weight-free and deterministic, so the retrieval pipeline (prepare, the
    kit's run.py, ranking, reports) runs end to end on any machine. Captions: signed feature hashing of their
    lower-cased words into `dim` numbers; images: the centred grey pixels of a thumbnail of `dim` pixels. The two
    share no meaning, so its recalls are about chance: they check the plumbing and are never compared with the
    paper. Spec: `smoke-hash:<dim>` (a square number, e.g. 64)."""

    def __init__(self, spec: str, device: str = 'cpu'):
        try:
            dim = int(spec)
        except ValueError:
            raise ValueError(f'smoke-hash:{spec}: expected smoke-hash:<dim>, e.g. smoke-hash:64') from None
        side = int(round(dim ** 0.5))
        if side * side != dim or dim < 4:
            raise ValueError(f'smoke-hash:{spec}: dim must be a square number >= 4 (the image thumbnail is square)')
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


BACKENDS = {'hf-clip': HFCLIPEmbedder, 'hf-blip': HFBLIPEmbedder, 'open_clip': OpenCLIPEmbedder,
            'smoke-hash': SmokeHashEmbedder}


def load_embedder(spec: str, device: str = 'cpu') -> Embedder:
    backend, sep, target = spec.partition(':')
    if not sep or backend not in BACKENDS or not target:
        raise ValueError(f'model spec {spec!r}: expected one of {", ".join(k + ":<name|path>" for k in BACKENDS)}')
    return BACKENDS[backend](target, device=device)


# ------------------------------------------------------------------------------------------------------ cache
def _slug(text: str, n: int = 40) -> str:
    digest = hashlib.sha1(text.encode('utf-8')).hexdigest()[:12]
    return f'{re.sub(r"[^A-Za-z0-9._-]+", "_", text)[-n:]}-{digest}'


class EmbeddingCache:
    """<root>/<model>/<file>/<kind>/part-*.npz, each part holding item keys and their rows; resumable by item."""

    def __init__(self, root: str | Path, model: str, file: str, kind: str):
        self.dir = Path(root) / _slug(model) / _slug(file) / kind

    def load(self) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for part in sorted(self.dir.glob('part-*.npz')):
            with np.load(part, allow_pickle=False) as z:
                keys, rows = z['keys'], z['emb']
                if len(keys) != len(rows):
                    raise ValueError(f'{part}: {len(keys)} keys but {len(rows)} rows; delete the file')
                found.update(zip(keys.tolist(), rows))
        return found

    def save(self, keys: Sequence[str], rows: np.ndarray) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        n = len(list(self.dir.glob('part-*.npz')))
        path = self.dir / f'part-{n:05d}.npz'
        tmp = path.with_suffix('.tmp.npz')
        np.savez(tmp, keys=np.asarray(list(keys), dtype=str), emb=rows)
        os.replace(tmp, path)
        return path


def item_key_for_image(path: str | Path) -> str:
    """Images are keyed by path, size and mtime so an edited file is re-embedded."""
    st = os.stat(path)
    return f'{path}|{st.st_size}|{int(st.st_mtime_ns)}'


# ---------------------------------------------------------------------------------------------- distribution
def dist_info() -> tuple[int, int]:
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed_from_env() -> bool:
    """Under torchrun (WORLD_SIZE > 1) join the process group: nccl on GPU, gloo on CPU."""
    import torch
    import torch.distributed as dist
    if int(os.environ.get('WORLD_SIZE', '1')) <= 1 or dist.is_initialized():
        return dist.is_initialized()
    dist.init_process_group(backend='nccl' if torch.cuda.is_available() else 'gloo')
    return True


def batches_for_rank(n_items: int, batch_size: int, rank: int, world: int) -> list[tuple[int, int]]:
    starts = range(0, n_items, batch_size)
    return [(s, min(s + batch_size, n_items)) for b, s in enumerate(starts) if b % world == rank]


def embed_items(keys: Sequence[str], load: Callable[[int], object], embed: Callable[[list], np.ndarray],
                cache: EmbeddingCache | None = None, batch_size: int = 64, progress: bool = True,
                desc: str = 'embed') -> np.ndarray:
    """Embed items (keyed for the cache; `load(i)` gives the model input) with cache reuse and rank sharding."""
    rank, world = dist_info()
    cached = cache.load() if cache is not None else {}
    todo = [i for i, k in enumerate(keys) if k not in cached]
    mine = batches_for_rank(len(todo), batch_size, rank, world)
    iterator = mine
    if progress and rank == 0:
        from tqdm import tqdm
        iterator = tqdm(mine, desc=f'{desc} (rank 0 of {world})', unit='batch')
    computed = {}
    for s, e in iterator:
        rows = embed([load(todo[j]) for j in range(s, e)])
        if rows.shape[0] != e - s or not np.isfinite(rows).all():
            raise ValueError(f'{desc}: model returned {rows.shape} / non-finite rows for items '
                             f'{todo[s]}..{todo[e - 1]}')
        computed[s] = rows
    if world > 1:
        import torch.distributed as dist
        gathered = [None] * world
        dist.all_gather_object(gathered, computed)
        computed = {s: r for part in gathered for s, r in part.items()}
    new = np.concatenate([computed[s] for s in sorted(computed)]) if computed else None
    if new is not None and cache is not None and rank == 0:
        cache.save([keys[i] for i in todo], new)
    if world > 1:
        import torch.distributed as dist
        dist.barrier()
    dim = new.shape[1] if new is not None else next(iter(cached.values())).shape[0]
    out = np.empty((len(keys), dim), dtype=np.float32)
    fresh = dict(zip(todo, new)) if new is not None else {}
    for i, k in enumerate(keys):
        out[i] = fresh[i] if i in fresh else cached[k]
    return out


def embed_texts(embedder: Embedder, texts: Sequence[str], cache_root: str | Path | None, file_key: str,
                batch_size: int = 128, progress: bool = True) -> np.ndarray:
    cache = EmbeddingCache(cache_root, embedder.name, file_key, 'text') if cache_root else None
    return embed_items(list(texts), lambda i: texts[i], embedder.embed_texts, cache, batch_size, progress,
                       desc=f'texts {file_key}')


def embed_images(embedder: Embedder, paths: Sequence[str | Path], cache_root: str | Path | None, file_key: str,
                 batch_size: int = 64, progress: bool = True) -> np.ndarray:
    from PIL import Image

    def load(i):
        with Image.open(paths[i]) as im:
            return im.convert('RGB')

    missing = [str(p) for p in paths if not Path(p).is_file()]
    if missing:
        raise FileNotFoundError(f'{len(missing)} gallery images missing; first: {missing[0]}')
    cache = EmbeddingCache(cache_root, embedder.name, file_key, 'image') if cache_root else None
    keys = [item_key_for_image(p) for p in paths]
    return embed_items(keys, load, embedder.embed_images, cache, batch_size, progress, desc=f'images {file_key}')
