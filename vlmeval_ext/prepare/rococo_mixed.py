"""Deterministic mixed / patched gallery images, reproducing the official RoCOCO mix_images.py.

Official recipe (pseulki/rococo mix_images.py): torch.manual_seed(seed) and np.random.seed(seed); a
DataLoader(batch_size=64, shuffle=True) over the clean annotation's images resized to 384x384 (bicubic) and
converted to [0, 1] tensors; per batch a torch.randperm partner and either
  mix:   x = lam * x + (1 - lam) * x[perm]
  patch: one CutMix box per batch (side int(384 * sqrt(1 - lam)), centre np.random.randint twice) copied from x[perm];
saved with torchvision's save_image under the original basename (so JPEG by extension).

The RNG draws are replayed here without a DataLoader: on iteration the loader first draws its worker base seed from
the global torch generator, then RandomSampler draws its own seed and permutes with a private generator; the
training loop then draws one randperm per batch. tests/plugin/test_rococo_mixed_images.py checks this against a real DataLoader.
torch is needed for the draws only (its randperm defines the official order): make_mixed makes them in a
short-lived worker process, so torch's ~0.7 GB is returned before the first image is read; the mixing arithmetic
is the same float32 operations in numpy (checked value for value against torch in the tests).
"""
from __future__ import annotations

import math
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from vlmeval_ext.spec import load_spec

# The official recipe's parameters: dataset_specs/rococo.yaml `mixing` is their one source.
_MIXING = load_spec('rococo')['mixing']
SIZE = _MIXING['resize'][0]
BATCH_SIZE = _MIXING['batch_size']
LAM = _MIXING['lam']
SEEDS = tuple(_MIXING['seeds'])
METHODS = tuple(_MIXING['methods'])
# torchvision's save_image hands the uint8 image to Pillow with the format taken from the file name: the COCO
# names end in .jpg, so the official mixed images are JPEG at Pillow's default quality, 75 (~21 KB at 384x384,
# benchmarks/scale.md). Writing them the same way keeps the gallery the paper scored; lossless PNG would be ~9x
# larger and a different gallery.
JPEG_QUALITY = 75


@dataclass
class MixBatch:
    indices: list[int]                    # annotation rows in this batch (loader order)
    partner: list[int]                    # torch.randperm(len(batch)): position of each row's partner
    box: tuple[int, int, int, int] | None  # patch: (x1, y1, x2, y2) on dims (2, 3) as the official slices them


def rand_bbox(size: int, lam: float, rng: np.random.RandomState | None = None) -> tuple[int, int, int, int]:
    """The official CutMix box for a square `size` image (numpy global RNG unless `rng` is given)."""
    draw = (rng or np.random).randint
    cut = int(size * math.sqrt(1.0 - lam))
    cx, cy = draw(size), draw(size)
    x1, y1 = int(np.clip(cx - cut // 2, 0, size)), int(np.clip(cy - cut // 2, 0, size))
    x2, y2 = int(np.clip(cx + cut // 2, 0, size)), int(np.clip(cy + cut // 2, 0, size))
    return x1, y1, x2, y2


def plan_batches(n_images: int, seed: int, method: str, lam: float = LAM, batch_size: int = BATCH_SIZE,
                 size: int = SIZE) -> list[MixBatch]:
    """Replay the official run's random draws: loader order, partners and boxes (global RNG state is restored)."""
    import torch

    if method not in METHODS:
        raise ValueError(f'method must be one of {METHODS}, got {method!r}')
    np_state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        np.random.seed(seed)
        try:
            torch.empty((), dtype=torch.int64).random_()                # DataLoader iterator: worker base seed
            sampler_seed = int(torch.empty((), dtype=torch.int64).random_().item())   # RandomSampler seed
            order = torch.randperm(n_images, generator=torch.Generator().manual_seed(sampler_seed)).tolist()
            plan = []
            for start in range(0, n_images, batch_size):
                batch = order[start:start + batch_size]
                partner = torch.randperm(len(batch)).tolist()
                box = rand_bbox(size, lam) if method == 'patch' else None
                plan.append(MixBatch(batch, partner, box))
        finally:
            np.random.set_state(np_state)
    return plan


def load_resized(path: str | Path, size: int = SIZE) -> np.ndarray:
    """(3, size, size) float32 in [0, 1]: PIL bicubic resize + ToTensor, as torchvision does for PIL input."""
    with Image.open(path) as img:
        arr = np.asarray(img.convert('RGB').resize((size, size), Image.BICUBIC), dtype=np.uint8)
    return arr.transpose(2, 0, 1).astype(np.float32) / 255.0


def plan_batches_in_worker(n_images: int, seed: int, method: str, lam: float = LAM, batch_size: int = BATCH_SIZE,
                           size: int = SIZE) -> list[MixBatch]:
    """plan_batches in a short-lived worker process, which imports torch and exits: the caller never holds torch's
    memory while it mixes images."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context('spawn')) as pool:
        return pool.submit(plan_batches, n_images, seed, method, lam, batch_size, size).result()


def apply_batch(images: np.ndarray, batch: MixBatch, method: str, lam: float = LAM) -> np.ndarray:
    """Mix one batch ((B, 3, H, W) float32 in [0, 1], changed in place) exactly as the official loop does;
    returns uint8 (B, H, W, 3).

    The official torch expressions on float32 tensors, as numpy float32 operations in the same order (a Python
    scalar meets a float32 tensor as float32 in both): lam * x + (1 - lam) * x[perm], then save_image's
    x * 255 + 0.5, clamped to [0, 255], truncated to uint8."""
    x = images
    if method == 'patch':
        x1, y1, x2, y2 = batch.box
        x[:, :, x1:x2, y1:y2] = x[batch.partner, :, x1:x2, y1:y2]
    else:
        # One image at a time: the same operations on every element (so the same values) with one output batch
        # in memory instead of four batch-sized temporaries.
        keep, mix_in = np.float32(lam), np.float32(1 - lam)
        out = np.empty_like(x)
        for i, j in enumerate(batch.partner):
            np.multiply(x[i], keep, out=out[i])
            out[i] += x[j] * mix_in
        x = out
    x *= np.float32(255)
    x += np.float32(0.5)
    np.clip(x, 0, 255, out=x)
    return x.transpose(0, 2, 3, 1).astype(np.uint8)


def make_mixed(image_paths: list[str], coco_root: str | Path, out_dir: str | Path, method: str, seed: int,
               lam: float = LAM, batch_size: int = BATCH_SIZE, size: int = SIZE, progress: bool = True) -> list[Path]:
    """Write the mixed twin of every image (annotation order in, loader order processed) to out_dir/<basename>."""
    coco_root, out_dir = Path(coco_root), Path(out_dir)
    missing = [(i, p) for i, p in enumerate(image_paths) if not (coco_root / p).is_file()]
    if missing:
        i, p = missing[0]
        raise FileNotFoundError(f'{len(missing)} COCO images missing under --coco-root {coco_root}; first: '
                                f'annotation row {i}: {coco_root / p}')
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = plan_batches_in_worker(len(image_paths), seed, method, lam, batch_size, size)
    written = []
    iterator = plan
    if progress:
        from tqdm import tqdm
        iterator = tqdm(plan, desc=f'make-mixed {method} seed {seed}', unit='batch')
    for batch in iterator:
        stack = np.empty((len(batch.indices), 3, size, size), dtype=np.float32)   # filled in place: one copy
        for row, i in enumerate(batch.indices):
            stack[row] = load_resized(coco_root / image_paths[i], size)
        mixed = apply_batch(stack, batch, method, lam)
        for row, i in enumerate(batch.indices):
            target = out_dir / os.path.basename(image_paths[i])
            save_mixed(mixed[row], target)
            written.append(target)
    return written


def save_mixed(array: np.ndarray, target: Path) -> None:
    """One mixed image as the official save_image writes it: the format from the file name (JPEG for COCO's .jpg
    names, at quality JPEG_QUALITY, Pillow's default)."""
    image = Image.fromarray(array)
    if target.suffix.lower() in ('.jpg', '.jpeg'):
        image.save(target, format='JPEG', quality=JPEG_QUALITY)
    else:
        image.save(target)
