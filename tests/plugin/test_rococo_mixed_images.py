"""Mixed gallery images: the official RNG sequence (checked against a real DataLoader) and pixel arithmetic."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip('torch')  # noqa: E402  (torch is a hard dependency of the kit install)

from vlmeval_ext.prepare import rococo_mixed as M  # noqa: E402
from helpers.kit_run import REPO_ROOT  # noqa: E402


class _Indices(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def official_like_draws(n, seed, method, lam=0.9):
    """What mix_images.py's loop sees: a real shuffled DataLoader, then randperm (+ the box) per batch."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    loader = torch.utils.data.DataLoader(_Indices(n), batch_size=64, shuffle=True, num_workers=0)
    out = []
    for idx in loader:
        perm = torch.randperm(idx.size(0)).tolist()
        if method == 'patch':
            cut = int(384 * np.sqrt(1.0 - lam))
            cx, cy = np.random.randint(384), np.random.randint(384)
            box = (np.clip(cx - cut // 2, 0, 384), np.clip(cy - cut // 2, 0, 384),
                   np.clip(cx + cut // 2, 0, 384), np.clip(cy + cut // 2, 0, 384))
            box = tuple(int(v) for v in box)
        else:
            box = None
        out.append((idx.tolist(), perm, box))
    return out


@pytest.mark.parametrize('seed', M.SEEDS)
@pytest.mark.parametrize('method', M.METHODS)
def test_plan_replays_the_official_dataloader_draws(seed, method):
    n = 200
    plan = M.plan_batches(n, seed, method)
    expected = official_like_draws(n, seed, method)
    assert [(b.indices, b.partner, b.box) for b in plan] == expected
    assert sorted(i for b in plan for i in b.indices) == list(range(n))
    assert [len(b.indices) for b in plan] == [64, 64, 64, 8]


def test_plan_restores_global_rng_and_differs_by_seed():
    np.random.seed(123)
    torch.manual_seed(123)
    before_np, before_t = np.random.rand(), torch.rand(1).item()
    np.random.seed(123)
    torch.manual_seed(123)
    M.plan_batches(100, 1, 'patch')
    assert (np.random.rand(), torch.rand(1).item()) == (before_np, before_t)
    assert M.plan_batches(100, 1, 'mix')[0].indices != M.plan_batches(100, 10, 'mix')[0].indices
    box = M.plan_batches(100, 1, 'patch')[0].box
    side = int(384 * math.sqrt(0.1)) // 2 * 2
    assert box[2] - box[0] <= side and box[3] - box[1] <= side


def test_apply_batch_mix_and_patch_arithmetic():
    rng = np.random.default_rng(0)
    x = rng.random((4, 3, 384, 384), dtype=np.float32)
    batch = M.MixBatch(indices=[0, 1, 2, 3], partner=[2, 0, 3, 1], box=(10, 300, 131, 384))
    mixed = M.apply_batch(x.copy(), batch, 'mix').astype(int)
    want = np.floor((0.9 * x + 0.1 * x[[2, 0, 3, 1]]) * 255 + 0.5).clip(0, 255).transpose(0, 2, 3, 1)
    assert np.abs(mixed - want).max() <= 1
    patched = M.apply_batch(x.copy(), batch, 'patch').astype(int)
    orig = np.floor(x * 255 + 0.5).transpose(0, 2, 3, 1).astype(int)
    inside = np.zeros((384, 384), bool)
    inside[10:131, 300:384] = True                 # dims (2, 3) = (rows, cols) of the HWC output
    assert (patched[0][~inside] == orig[0][~inside]).all()
    assert (patched[0][inside] == orig[2][inside]).all()


def _write_images(root, n):
    rng = np.random.default_rng(1)
    paths = []
    (root / 'val2014').mkdir(parents=True)
    for i in range(n):
        arr = np.zeros((48 + i % 5, 64, 3), np.uint8)
        arr[..., 0] = np.linspace(0, 255, 64)[None, :]
        arr[..., 1] = (i * 3) % 256
        arr[10:30, 10:40, 2] = rng.integers(0, 256)
        rel = f'val2014/COCO_val2014_{i:012d}.jpg'
        Image.fromarray(arr).save(root / rel)
        paths.append(rel)
    return paths


def test_make_mixed_end_to_end_is_deterministic(tmp_path):
    paths = _write_images(tmp_path / 'coco', 70)
    out1 = M.make_mixed(paths, tmp_path / 'coco', tmp_path / 'a', 'mix', seed=1, progress=False)
    out2 = M.make_mixed(paths, tmp_path / 'coco', tmp_path / 'b', 'mix', seed=1, progress=False)
    out3 = M.make_mixed(paths, tmp_path / 'coco', tmp_path / 'c', 'mix', seed=10, progress=False)
    assert len(out1) == len(out2) == len(out3) == 70 and {p.name for p in out1} == {p.split('/')[-1] for p in paths}
    assert all(a.read_bytes() == (tmp_path / 'b' / a.name).read_bytes() for a in out1)
    assert any(a.read_bytes() != (tmp_path / 'c' / a.name).read_bytes() for a in out1)
    # a written image is 0.9 x its original + 0.1 x its partner (up to JPEG loss)
    plan = M.plan_batches(70, 1, 'mix')
    b = plan[1]
    i, j = b.indices[0], b.indices[b.partner[0]]
    want = 0.9 * M.load_resized(tmp_path / 'coco' / paths[i]) + 0.1 * M.load_resized(tmp_path / 'coco' / paths[j])
    got = np.asarray(Image.open(tmp_path / 'a' / paths[i].split('/')[-1]), np.float32).transpose(2, 0, 1) / 255
    assert got.shape == (3, 384, 384)
    assert np.abs(got - want).mean() < 0.02


def test_make_mixed_names_missing_image(tmp_path):
    paths = _write_images(tmp_path / 'coco', 3) + ['val2014/COCO_val2014_missing.jpg']
    with pytest.raises(FileNotFoundError, match='annotation row 3'):
        M.make_mixed(paths, tmp_path / 'coco', tmp_path / 'o', 'patch', seed=1, progress=False)


def test_mixed_images_are_stored_as_torchvision_save_image_writes_them(tmp_path):
    """COCO names end in .jpg: the stored mixed image is byte for byte what the official save_image writes (JPEG,
    quality 75), not a lossless PNG five times its size."""
    from torchvision.utils import save_image

    batch = torch.rand(2, 3, 384, 384, generator=torch.Generator().manual_seed(0))
    ours = M.apply_batch(batch.numpy(), M.MixBatch([0, 1], [1, 0], None), "mix")
    official = M.LAM * batch + (1 - M.LAM) * batch[torch.tensor([1, 0])]      # mix_images.py, then save_image
    for k in range(2):
        M.save_mixed(ours[k], tmp_path / f'ours_{k}.jpg')
        save_image(official[k], tmp_path / f'official_{k}.jpg')
        assert (tmp_path / f'ours_{k}.jpg').read_bytes() == (tmp_path / f'official_{k}.jpg').read_bytes()
        assert Image.open(tmp_path / f'ours_{k}.jpg').format == 'JPEG'


def test_mix_one_image_at_a_time_equals_the_batch_expression():
    """apply_batch mixes image by image (memory); the values are those of the official batch expression."""
    x = torch.rand(5, 3, 384, 384, generator=torch.Generator().manual_seed(3))
    batch = M.MixBatch(indices=list(range(5)), partner=[3, 0, 4, 1, 2], box=None)
    official = M.LAM * x + (1 - M.LAM) * x[torch.as_tensor(batch.partner), :]
    want = official.mul(255).add_(0.5).clamp_(0, 255).permute(0, 2, 3, 1).to('cpu', torch.uint8).numpy()
    assert np.array_equal(M.apply_batch(x.clone().numpy(), batch, 'mix'), want)


def test_the_mixing_and_protocol_parameters_come_from_the_spec():
    """dataset_specs/rococo.yaml and the code agree on every RoCOCO parameter (the dataset files that go upstream
    hold their own copies)."""
    from vlmeval_ext.spec import load_spec
    from vlmeval_ext.prepare import rococo as D
    from vlmeval_ext.dataset.utils import rococo_mcq as Q
    from vlmeval_ext.prepare import rococo_mixed as M
    from vlmeval_ext.dataset.utils import rococo_retrieval as R
    P = D
    spec = load_spec('rococo')
    mixing = spec['mixing']
    assert (M.SIZE, M.SIZE) == tuple(mixing['resize']) and M.BATCH_SIZE == mixing['batch_size']
    assert M.LAM == D.MIX_LAM == mixing['lam'] and M.SEEDS == D.MIX_SEEDS == tuple(mixing['seeds'])
    assert M.METHODS == D.MIX_METHODS == tuple(mixing['methods'])
    assert D.MCQ_SEED == spec['mcq_recast']['seed'] and P.ATTACKS == Q.ATTACKS == tuple(spec['attacks'])
    assert R.RECALL_AT == tuple(spec['protocol']['recall_at']) and R.BLOCK_ROWS == spec['protocol']['topk_block_rows']
    assert P.MAX_WORDS == spec['pre_caption']['max_words']
    assert P.N_ADVERSARIAL == spec['annotation_rules']['n_adversarial_per_entry']


def test_patch_equals_the_official_torch_expression():
    """patch: the CutMix box copied from the partner, then save_image's quantisation, value for value as torch."""
    x = torch.rand(4, 3, 384, 384, generator=torch.Generator().manual_seed(5))
    batch = M.MixBatch(indices=list(range(4)), partner=[1, 3, 0, 2], box=(7, 120, 128, 241))
    official = x.clone()
    x1, y1, x2, y2 = batch.box
    official[:, :, x1:x2, y1:y2] = official[torch.as_tensor(batch.partner), :, x1:x2, y1:y2]
    want = official.mul(255).add_(0.5).clamp_(0, 255).permute(0, 2, 3, 1).to('cpu', torch.uint8).numpy()
    assert np.array_equal(M.apply_batch(x.clone().numpy(), batch, 'patch'), want)


def test_make_mixed_leaves_torch_out_of_the_calling_process(tmp_path):
    """The draws are made in a worker process (the same plan as in-process); the process that mixes and writes the
    images never imports torch, whose ~0.7 GB would otherwise sit beside every batch."""
    import subprocess
    import sys

    paths = _write_images(tmp_path / 'coco', 5)
    assert M.plan_batches_in_worker(70, 10, 'patch') == M.plan_batches(70, 10, 'patch')
    code = ('import json, sys; from vlmeval_ext.prepare import rococo_mixed as M; '
            f'out = M.make_mixed({paths!r}, {str(tmp_path / "coco")!r}, {str(tmp_path / "w")!r}, "mix", seed=1, '
            'progress=False); print(json.dumps({"torch": "torch" in sys.modules, "written": len(out)}))')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {'torch': False, 'written': 5}
