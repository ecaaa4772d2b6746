"""R-Bench's 33 real-world distortions at strengths 1-3 (numpy, Pillow and OpenCV only).

`corrupt(image, distortion, strength, seed)` is deterministic for its four arguments and returns an image of
the same size and mode. Parameters come from dataset_specs/corrupt.yaml; names, steps and groups from the one
R-Bench table (the kit dialect's vlmeval_ext.dataset.utils.rbench_full.DISTORTIONS, R-Bench's own definition),
read only when asked for (`distortion_info`).

Every kernel works on an HxWx3 uint8 RGB array. The random stream is seeded by (seed, distortion) but NOT by
strength, so strengths 1-3 draw the same noise field / block order / occluder sequence and differ only in
amount: stronger levels are supersets of weaker ones, which keeps the quality drop monotone.
"""
from __future__ import annotations

import io
import math
from typing import Callable

import cv2
import numpy as np
from PIL import Image

from vlmeval_ext.dataset.utils.rbench_full import DISTORTIONS
from vlmeval_ext.spec import load_spec

DISTORTION_IDS = tuple(DISTORTIONS)
STRENGTHS = (1, 2, 3)


def distortion_table() -> dict[int, dict]:
    """{id: {'name', 'step', 'group'}} of R-Bench's 33 distortions."""
    return {i: {'name': n, 'step': s, 'group': g} for i, (n, s, g) in DISTORTIONS.items()}

Kernel = Callable[[np.ndarray, float, dict, np.random.Generator, float], np.ndarray]


# ----------------------------------------------------------------------------------------------- spec access
def corrupt_spec() -> dict:
    spec = load_spec('corrupt')
    missing = [d for d in DISTORTION_IDS if d not in spec.get('distortions', {})]
    if missing:
        raise ValueError(f'dataset_specs/corrupt.yaml: distortions {missing} have no entry')
    return spec


def check_distortion(distortion) -> int:
    if isinstance(distortion, bool) or not isinstance(distortion, (int, np.integer)) or int(distortion) not in DISTORTION_IDS:
        raise ValueError(f'unknown distortion id {distortion!r}: R-Bench distortions are 1-33')
    return int(distortion)


def check_strength(strength) -> int:
    if isinstance(strength, bool) or not isinstance(strength, (int, np.integer)) or int(strength) not in STRENGTHS:
        raise ValueError(f'unknown strength {strength!r}: strengths are 1 (low), 2 (mid), 3 (high)')
    return int(strength)


def distortion_info(distortion: int) -> dict:
    """id, name, step, group (R-Bench's table), levels and approximation note (None when faithful)."""
    did = check_distortion(distortion)
    params = corrupt_spec()['distortions'][did]
    return {'id': did, **distortion_table()[did], 'levels': list(params['levels']),
            'approximation': params.get('approximation')}


def approximations() -> dict[int, str]:
    """{id: note} for the distortions that are approximations of R-Bench's real ones (reports must say so)."""
    return {d: p['approximation'].strip() for d, p in corrupt_spec()['distortions'].items()
            if p.get('approximation')}


# ------------------------------------------------------------------------------------------------ helpers
def _f32(img: np.ndarray) -> np.ndarray:
    return img.astype(np.float32) * (1.0 / 255.0)


def _u8(x: np.ndarray) -> np.ndarray:
    return np.clip(x * 255.0 + 0.5, 0, 255).astype(np.uint8)


def _lut(img: np.ndarray, curve: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Apply a per-value curve on [0, 1] through a 256-entry lookup table (fast, exact for uint8)."""
    table = _u8(curve(np.arange(256, dtype=np.float32) / 255.0))
    return cv2.LUT(img, table)


_SRGB_TO_LINEAR = (np.arange(256, dtype=np.float32) / 255.0) ** 2.2
# linear [0, 1] -> sRGB uint8 through a 65536-entry table: much faster than a per-pixel power
_LINEAR_TO_SRGB = _u8((np.arange(65536, dtype=np.float32) / 65535.0) ** (1 / 2.2))


def _to_linear(img: np.ndarray) -> np.ndarray:
    return _SRGB_TO_LINEAR[img]


def _from_linear(lin: np.ndarray) -> np.ndarray:
    return _LINEAR_TO_SRGB[(np.clip(lin, 0, 1) * 65535.0 + 0.5).astype(np.uint16)]


def _px(value: float, scale: float, minimum: float = 0.5) -> float:
    return max(minimum, value * scale)


def _filter(img: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    return cv2.filter2D(img, -1, kernel.astype(np.float32), borderType=cv2.BORDER_REFLECT)


def _normal(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def _chosen_blocks(img, level, params, rng, scale, even=False):
    """Block side and the blocks hit: a fixed random order, of which the first `level` fraction is taken."""
    h, w = img.shape[:2]
    bs = max(1, min(max(4, int(round(params['block'] * scale))), h, w))
    cells = [(r, c) for r in range(h // bs) for c in range(w // bs)]
    order = rng.permutation(len(cells))
    k = min(len(cells), max(1, int(round(level * len(cells)))))
    if even:  # exchanged blocks come in pairs
        k = max(2, k) if len(cells) >= 2 else 0
        k -= k % 2
    return bs, [cells[i] for i in order[:k]]


# ------------------------------------------------------------------------------------------------ kernels
def motion_blur(img, level, params, rng, scale):
    length = _px(level, scale, 1.0)
    size = int(math.ceil(length)) | 1
    kernel = np.zeros((size, size), np.float32)
    c = size // 2
    half = (length - 1) / 2
    cv2.line(kernel, (int(round(c - half)), c), (int(round(c + half)), c), 1.0, 1)
    angle = float(rng.uniform(0, 180))
    kernel = cv2.warpAffine(kernel, cv2.getRotationMatrix2D((c, c), angle, 1.0), (size, size))
    return _filter(img, kernel / kernel.sum())


def bright_illumination(img, stops, params, rng, scale):
    lin = _to_linear(img) * (2.0 ** stops)
    excess = np.maximum(lin - 1.0, 0)
    # light spilling from clipped highlights (bloom), radius tied to the image size
    bloom = cv2.GaussianBlur(excess, (0, 0), _px(0.02 * 512, scale, 1.0))
    return _from_linear(lin + 0.35 * bloom)


def dark_illumination(img, stops, params, rng, scale):
    lin = _to_linear(img) * (2.0 ** -stops)
    full_well = 6000.0  # electrons at full scale: shot noise std = sqrt(signal / full_well)
    read_noise = 0.002
    z = _normal(rng, img.shape)
    noisy = lin + z * np.sqrt(lin / full_well + read_noise ** 2)
    return _from_linear(noisy)


def _soft_noise(rng, h, w, cells=6):
    """Low-frequency texture in [0, 1] (a coarse random grid upsampled smoothly)."""
    grid = rng.random((cells, cells), dtype=np.float32)
    return cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC)


def _occluder_sequence(rng, h, w, side, count, size_range):
    kind = rng.integers(0, 2, count)
    cx, cy = rng.uniform(0, w, count), rng.uniform(0, h, count)
    a, b = rng.uniform(*size_range, (2, count)) * side
    angle = rng.uniform(0, 180, count)
    tone = rng.uniform(0.05, 0.35, (count, 3))
    return [{'kind': int(kind[i]), 'cx': float(cx[i]), 'cy': float(cy[i]), 'a': float(a[i]), 'b': float(b[i]),
             'angle': float(angle[i]), 'tone': tuple(float(t) for t in tone[i])} for i in range(count)]


def _composite(img: np.ndarray, overlay: np.ndarray, mask: np.ndarray, soften: float) -> np.ndarray:
    """uint8 alpha compositing of `overlay` over `img` through a softened 0/255 mask (OpenCV, no float copies)."""
    alpha = cv2.GaussianBlur(mask, (0, 0), soften).astype(np.float32) * (1.0 / 255.0)
    return cv2.blendLinear(img, overlay, 1.0 - alpha, alpha)


def _shapes_for_coverage(shapes, h, w, coverage):
    """The prefix of a fixed shape sequence that covers `coverage` of the frame (counted on a small mask)."""
    k = 128.0 / max(h, w)
    small = np.zeros((max(1, round(h * k)), max(1, round(w * k))), np.uint8)
    used = []
    for s in shapes:
        if small.mean() / 255.0 >= coverage:
            break
        _draw_shape(small, s, scale=k)
        used.append(s)
    return used


def _draw_shape(canvas, s, value=255, scale=1.0):
    cx, cy, a, b = s['cx'] * scale, s['cy'] * scale, s['a'] * scale, s['b'] * scale
    if s['kind'] == 0:
        cv2.ellipse(canvas, (int(cx), int(cy)), (max(1, int(a)), max(1, int(b))), s['angle'], 0, 360, value, -1,
                    cv2.LINE_AA)
    else:  # bar / post
        box = cv2.boxPoints(((cx, cy), (2 * a, 0.5 * b), s['angle']))
        cv2.fillPoly(canvas, [np.round(box).astype(np.int32)], value, cv2.LINE_AA)


def blocking_obstacle(img, coverage, params, rng, scale):
    h, w = img.shape[:2]
    shapes = _occluder_sequence(rng, h, w, max(h, w), 200, (0.04, 0.12))  # each < the gap between levels
    texture = _soft_noise(rng, h, w)
    mask = np.zeros((h, w), np.uint8)
    colour = np.zeros((h, w, 3), np.float32)
    for s in _shapes_for_coverage(shapes, h, w, coverage):  # each occluder its own tone, later ones on top
        _draw_shape(mask, s)
        _draw_shape(colour, s, value=s['tone'])
    colour *= (0.6 + 0.8 * texture)[..., None]  # uneven lighting on the obstacle
    return _composite(img, _u8(colour), mask, _px(1.5, scale))


def lens_blur(img, radius, params, rng, scale):
    r = _px(radius, scale)
    size = 2 * int(math.ceil(r)) + 1
    yy, xx = np.mgrid[:size, :size] - size // 2
    kernel = np.clip(r + 0.5 - np.hypot(xx, yy), 0, 1).astype(np.float32)  # anti-aliased disk
    return _filter(img, kernel / kernel.sum())


def resolution_limit(img, factor, params, rng, scale):
    h, w = img.shape[:2]
    small = cv2.resize(img, (max(1, round(w / factor)), max(1, round(h / factor))), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def lens_obstacle(img, coverage, params, rng, scale):
    h, w = img.shape[:2]
    drops = _occluder_sequence(rng, h, w, max(h, w), 400, (0.02, 0.08))
    mask = np.zeros((h, w), np.uint8)
    for d in _shapes_for_coverage([{**d, 'kind': 0} for d in drops], h, w, coverage):
        _draw_shape(mask, d)
    soft = cv2.GaussianBlur(mask, (0, 0), _px(3, scale)).astype(np.float32)[..., None] / 255.0
    x = _f32(img)
    # the drops are far out of focus: blur a quarter-size copy (same look, 16x less work) and scale it back
    small = cv2.resize(x, (max(1, w // 4), max(1, h // 4)), interpolation=cv2.INTER_AREA)
    defocused = cv2.resize(cv2.GaussianBlur(small, (0, 0), _px(2.5, scale)), (w, h), interpolation=cv2.INTER_LINEAR)
    haze = np.array([0.82, 0.8, 0.76], np.float32)  # dirt scatters light: lifted, slightly warm
    drop_look = 0.65 * defocused + 0.35 * haze
    return _u8(x * (1 - soft) + drop_look * soft)


def lens_shaking(img, extent, params, rng, scale):
    steps = 96
    velocity = np.cumsum(_normal(rng, (steps, 2)), axis=0)
    path = np.cumsum(velocity, axis=0)
    path -= path.mean(axis=0)
    path *= _px(extent, scale, 1.0) / max(1e-6, float(np.abs(path).max()) * 2)
    size = int(math.ceil(np.abs(path).max() * 2)) + 3
    kernel = np.zeros((size, size), np.float32)
    p = path + size // 2
    x0, y0 = np.floor(p[:, 0]).astype(int), np.floor(p[:, 1]).astype(int)
    fx, fy = p[:, 0] - x0, p[:, 1] - y0
    for dx, dy, wgt in ((0, 0, (1 - fx) * (1 - fy)), (1, 0, fx * (1 - fy)), (0, 1, (1 - fx) * fy), (1, 1, fx * fy)):
        np.add.at(kernel, (y0 + dy, x0 + dx), wgt)  # bilinear splat of the trajectory
    return _filter(img, kernel / kernel.sum())


def white_noise(img, var, params, rng, scale):
    return _u8(_f32(img) + _normal(rng, img.shape) * math.sqrt(var))


def color_noise(img, var, params, rng, scale):
    ycc = cv2.cvtColor(_f32(img), cv2.COLOR_RGB2YCrCb)
    sd = math.sqrt(var)
    ycc += _normal(rng, img.shape) * np.array([sd / 2, sd, sd], np.float32)
    return _u8(cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB))


def impulse_noise(img, amount, params, rng, scale):
    h, w = img.shape[:2]
    hit = rng.random((h, w), dtype=np.float32)
    salt = rng.random((h, w), dtype=np.float32) < 0.5
    out = img.copy()
    struck = hit < amount
    out[struck & salt] = 255
    out[struck & ~salt] = 0
    return out


def multiplicative_noise(img, var, params, rng, scale):
    x = _f32(img)
    return _u8(x + x * _normal(rng, img.shape) * math.sqrt(var))


def clock_jittering(img, sd, params, rng, scale):
    h, w = img.shape[:2]
    offsets = _normal(rng, (h, 1)) * _px(sd, scale, 0.25)
    map_x = np.arange(w, dtype=np.float32)[None, :] + offsets
    map_y = np.repeat(np.arange(h, dtype=np.float32)[:, None], w, axis=1)
    return cv2.remap(img, np.broadcast_to(map_x, (h, w)).astype(np.float32), map_y, cv2.INTER_LINEAR,
                     borderMode=cv2.BORDER_REFLECT)


def color_quantization(img, colours, params, rng, scale):
    # median-cut palette from a thumbnail (the full-size median cut costs ~1 s), then nearest-colour mapping
    full = Image.fromarray(img)
    thumb = full.copy()
    thumb.thumbnail((160, 160), Image.Resampling.BOX)
    palette = thumb.quantize(colors=int(colours), method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    return np.asarray(full.quantize(palette=palette, dither=Image.Dither.NONE).convert('RGB'))


def jpeg2000(img, ratio, params, rng, scale):
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, 'JPEG2000', quality_mode='rates', quality_layers=[float(ratio)])
    buf.seek(0)
    return np.asarray(Image.open(buf).convert('RGB'))


def _opencv_codec(img, ext, flag, quality):
    ok, data = cv2.imencode(ext, cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [flag, int(quality)])
    if not ok:
        raise RuntimeError(f'OpenCV could not encode {ext} at quality {quality}')
    return cv2.cvtColor(cv2.imdecode(data, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def jpeg(img, quality, params, rng, scale):
    return _opencv_codec(img, '.jpg', cv2.IMWRITE_JPEG_QUALITY, quality)


def webp(img, quality, params, rng, scale):
    return _opencv_codec(img, '.webp', cv2.IMWRITE_WEBP_QUALITY, max(1, quality))


def grayscale_quantization(img, levels, params, rng, scale):
    n = int(levels) - 1
    return _lut(img, lambda x: np.round(x * n) / n)


def _block_view(img, bs, r, c):
    return img[r * bs:(r + 1) * bs, c * bs:(c + 1) * bs]


def block_exchange(img, level, params, rng, scale):
    bs, chosen = _chosen_blocks(img, level, params, rng, scale, even=True)
    out = img.copy()
    for (r1, c1), (r2, c2) in zip(chosen[0::2], chosen[1::2]):
        _block_view(out, bs, r1, c1)[:] = _block_view(img, bs, r2, c2)
        _block_view(out, bs, r2, c2)[:] = _block_view(img, bs, r1, c1)
    return out


def block_repeat(img, level, params, rng, scale):
    bs, chosen = _chosen_blocks(img, level, params, rng, scale)
    n_rows, n_cols = img.shape[0] // bs, img.shape[1] // bs
    out = img.copy()
    for r, c in chosen:  # concealment by repeating the previous block on the line (the next one at column 0)
        if n_cols > 1:
            _block_view(out, bs, r, c)[:] = _block_view(img, bs, r, c - 1 if c > 0 else 1)
        elif n_rows > 1:  # a one-block-wide image: repeat the block above (below for the first row)
            _block_view(out, bs, r, c)[:] = _block_view(img, bs, r - 1 if r > 0 else 1, c)
        # a single-block image has nothing to repeat from and stays as it is
    return out


def block_lost(img, level, params, rng, scale):
    bs, chosen = _chosen_blocks(img, level, params, rng, scale)
    out = img.copy()
    for r, c in chosen:
        _block_view(out, bs, r, c)[:] = 0
    return out


def block_interpolation(img, level, params, rng, scale):
    bs, chosen = _chosen_blocks(img, level, params, rng, scale)
    h, w = img.shape[:2]
    x = img.astype(np.float32)
    out = x.copy()
    t = (np.arange(bs, dtype=np.float32) + 1) / (bs + 1)
    for r, c in chosen:
        y0, y1, x0, x1 = r * bs, min((r + 1) * bs, h), c * bs, min((c + 1) * bs, w)
        top = x[max(y0 - 1, 0), x0:x1]
        bottom = x[min(y1, h - 1), x0:x1]
        left = x[y0:y1, max(x0 - 1, 0)]
        right = x[y0:y1, min(x1, w - 1)]
        ty, tx = t[:y1 - y0, None, None], t[None, :x1 - x0, None]
        vertical = (1 - ty) * top[None] + ty * bottom[None]
        horizontal = (1 - tx) * left[:, None] + tx * right[:, None]
        out[y0:y1, x0:x1] = 0.5 * (vertical + horizontal)  # conceal from the surrounding border pixels
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def hsv_saturation(img, factor, params, rng, scale):
    hsv = cv2.cvtColor(_f32(img), cv2.COLOR_RGB2HSV)
    hsv[..., 1] *= factor
    return _u8(cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB))


def lab_saturation(img, factor, params, rng, scale):
    lab = cv2.cvtColor(_f32(img), cv2.COLOR_RGB2LAB)
    lab[..., 1:] *= factor
    return _u8(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB))


def maximum_brighten(img, p, params, rng, scale):
    return _lut(img, lambda x: 1 - (1 - x) ** (1 + p))


def minimum_darken(img, p, params, rng, scale):
    return _lut(img, lambda x: x ** (1 + p))


def mean_shift(img, shift, params, rng, scale):
    sign = 1.0 if rng.random() < 0.5 else -1.0
    return _lut(img, lambda x: x + sign * shift)


def gaussian_filter(img, sigma, params, rng, scale):
    return cv2.GaussianBlur(img, (0, 0), _px(sigma, scale, 0.3), borderType=cv2.BORDER_REFLECT)


def color_diffusion(img, sigma, params, rng, scale):
    lab = cv2.cvtColor(_f32(img), cv2.COLOR_RGB2LAB)
    lab[..., 1:] = cv2.GaussianBlur(lab[..., 1:], (0, 0), _px(sigma, scale))
    return _u8(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB))


def color_shift(img, offset, params, rng, scale):
    h, w = img.shape[:2]
    angle = float(rng.uniform(0, 2 * math.pi))
    d = _px(offset, scale)
    dx, dy = d * math.cos(angle), d * math.sin(angle)
    out = img.copy()
    for ch, sign in ((0, 1.0), (2, -1.0)):  # red one way, blue the other: misregistered colour planes
        shift = np.float32([[1, 0, sign * dx], [0, 1, sign * dy]])
        out[..., ch] = cv2.warpAffine(np.ascontiguousarray(img[..., ch]), shift, (w, h),
                                      flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return out


def cnn_denoise(img, sd, params, rng, scale):
    noisy = _u8(_f32(img) + _normal(rng, img.shape) * sd)
    h = 255.0 * sd * 0.9
    return cv2.fastNlMeansDenoisingColored(noisy, None, h, h, 5, 9)  # 5x5 patches, 9x9 search: 3x faster than 21


def sharpness_change(img, amount, params, rng, scale):
    x = _f32(img)
    blurred = cv2.GaussianBlur(x, (0, 0), _px(params.get('sigma', 1.5), scale))
    return _u8(x + amount * (x - blurred))


def contrast_change(img, factor, params, rng, scale):
    mean = float(img.mean()) / 255.0
    return _lut(img, lambda x: (x - mean) * factor + mean)


KERNELS: dict[int, Kernel] = {
    1: motion_blur, 2: bright_illumination, 3: dark_illumination, 4: blocking_obstacle, 5: lens_blur,
    6: resolution_limit, 7: lens_obstacle, 8: lens_shaking, 9: white_noise, 10: color_noise, 11: impulse_noise,
    12: multiplicative_noise, 13: clock_jittering, 14: color_quantization, 15: jpeg2000, 16: jpeg, 17: webp,
    18: grayscale_quantization, 19: block_exchange, 20: block_repeat, 21: block_lost, 22: block_interpolation,
    23: hsv_saturation, 24: lab_saturation, 25: maximum_brighten, 26: minimum_darken, 27: mean_shift,
    28: gaussian_filter, 29: color_diffusion, 30: color_shift, 31: cnn_denoise, 32: sharpness_change,
    33: contrast_change,
}
assert set(KERNELS) == set(DISTORTION_IDS)


# ------------------------------------------------------------------------------------------------ public API
def corrupt_array(rgb: np.ndarray, distortion: int, strength: int, seed: int = 0) -> np.ndarray:
    """Distort an HxWx3 uint8 RGB array; returns a new array of the same shape and dtype."""
    did, level_idx = check_distortion(distortion), check_strength(strength) - 1
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f'corrupt_array needs an HxWx3 uint8 RGB array, got {rgb.dtype} {rgb.shape}')
    spec = corrupt_spec()
    params = spec['distortions'][did]
    # spatial sizes follow the image, but never shrink below half so thumbnails still get a visible effect
    scale = max(0.5, max(rgb.shape[:2]) / float(spec['reference_side']))
    # strength is deliberately not part of the seed: see the module docstring
    rng = np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, did]))
    out = KERNELS[did](np.ascontiguousarray(rgb), params['levels'][level_idx], params, rng, scale)
    assert out.shape == rgb.shape and out.dtype == np.uint8, (did, out.shape, out.dtype)
    return out


def corrupt(image: Image.Image, distortion: int, strength: int, seed: int = 0) -> Image.Image:
    """Distort a PIL image; the result has the same size and mode (alpha channels are carried over untouched)."""
    mode = image.mode
    alpha = None
    if mode in ('RGBA', 'LA', 'PA') or (mode == 'P' and 'transparency' in image.info):
        rgba = image.convert('RGBA')
        alpha = rgba.getchannel('A')
        rgb = np.asarray(rgba.convert('RGB'))
    else:
        rgb = np.asarray(image if mode == 'RGB' else image.convert('RGB'))
    out = Image.fromarray(corrupt_array(rgb, distortion, strength, seed), 'RGB')
    if mode == 'RGB':
        return out
    if mode == 'RGBA':
        out.putalpha(alpha)
        return out
    if mode == 'LA':
        return Image.merge('LA', (out.convert('L'), alpha))
    if mode in ('P', 'PA'):
        if alpha is not None:  # keep transparency through an RGBA palette
            out.putalpha(alpha)
            result = out.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
            return result if mode == 'P' else result.convert('PA')
        return out.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    try:
        return out.convert(mode)
    except ValueError as err:
        raise ValueError(f'cannot convert the distorted image back to mode {mode!r}: {err}') from err
