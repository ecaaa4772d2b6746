"""ReMI prompts (pure, no kit import): 'Question: ' + question + appendix, images placed at their <imageK> tags.

Three input modes (the paper found the mode changes scores, so the mode used is recorded with the results):
  interleaved  text, image, text, ... with the K-th image exactly at <imageK>
  labelled     tags become "Image K"; after the text, "Image 1:" <img1> "Image 2:" <img2> ... (all images)
  composite    tags become "Image K"; one image tiles all images with "Image K" captions (for models that
               read a single image: the kit's INTERLEAVE = False models keep only the first image)
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from vlmeval_ext.errors import ExtError

INPUT_MODES = ('interleaved', 'labelled', 'composite')


class ReMIPromptError(ExtError, ValueError):
    """A question whose tags do not match its images."""


def _spec() -> dict:
    from vlmeval_ext.core.spec import load_spec
    return load_spec('remi')


def appendix(task: str, spec: dict | None = None) -> str:
    prompt = (spec or _spec())['prompt']
    sentences = prompt['appendix_task']
    if task not in sentences:
        raise ReMIPromptError(f'unknown ReMI task {task!r}; known: {sorted(sentences)}')
    return prompt['appendix_common'] + sentences[task]


def prompt_text(question: str, task: str, spec: dict | None = None) -> str:
    spec = spec or _spec()
    return spec['prompt']['prefix'] + question + appendix(task, spec)


def split_at_tags(text: str, n_images: int, tag_regex: str = r'<image(\d+)>') -> list[tuple[str, object]]:
    """[('text', str) | ('image', k)] with k 0-based; raises when a tag names an image the row does not have."""
    parts: list[tuple[str, object]] = []
    pos = 0
    for match in re.finditer(tag_regex, text):
        k = int(match.group(1))
        if not 1 <= k <= n_images:
            raise ReMIPromptError(f'tag {match.group(0)} but the item has {n_images} image(s)')
        if match.start() > pos:
            parts.append(('text', text[pos:match.start()]))
        parts.append(('image', k - 1))
        pos = match.end()
    if pos < len(text):
        parts.append(('text', text[pos:]))
    return parts


def interleaved_message(question: str, task: str, images: Sequence[str], spec: dict | None = None) -> list[dict]:
    """The kit message with the K-th image at <imageK>. Images no tag names are appended at the end, in order
    (so nothing is dropped); `unreferenced_images` tells how many."""
    spec = spec or _spec()
    text = prompt_text(question, task, spec)
    parts = split_at_tags(text, len(images), spec['prompt']['image_tag_regex'])
    used = {k for kind, k in parts if kind == 'image'}
    message = [{'type': kind, 'value': value if kind == 'text' else images[value]} for kind, value in parts]
    message += [{'type': 'image', 'value': images[k]} for k in range(len(images)) if k not in used]
    return message


def unreferenced_images(question: str, n_images: int, tag_regex: str = r'<image(\d+)>') -> list[int]:
    used = {int(m.group(1)) - 1 for m in re.finditer(tag_regex, question)}
    return [k for k in range(n_images) if k not in used]


def text_with_labels(question: str, task: str, n_images: int, spec: dict | None = None) -> str:
    """The prompt text with every <imageK> replaced by "Image K" (for the non-interleaved modes)."""
    spec = spec or _spec()
    parts = split_at_tags(prompt_text(question, task, spec), n_images, spec['prompt']['image_tag_regex'])
    return ''.join(v if kind == 'text' else f'Image {v + 1}' for kind, v in parts)


def labelled_message(question: str, task: str, images: Sequence[str], spec: dict | None = None) -> list[dict]:
    message = [{'type': 'text', 'value': text_with_labels(question, task, len(images), spec)}]
    for k, image in enumerate(images):
        message.append({'type': 'text', 'value': f'Image {k + 1}:'})
        message.append({'type': 'image', 'value': image})
    return message


def make_composite(image_paths: Sequence[str], out_path: str | Path, max_columns: int = 3, cell_size: int = 448,
                   caption_height: int = 28):
    """Tile the images (each fitted into cell_size x cell_size, aspect kept) in a grid with "Image K" captions."""
    from PIL import Image, ImageDraw, ImageFont
    n = len(image_paths)
    columns = min(max_columns, n)
    rows = -(-n // columns)
    canvas = Image.new('RGB', (columns * cell_size, rows * (cell_size + caption_height)), 'white')
    draw = ImageDraw.Draw(canvas)
    try:
        font = ImageFont.load_default(size=max(12, caption_height - 8))
    except TypeError:  # Pillow < 10.1 has no sized default font
        font = ImageFont.load_default()
    for k, path in enumerate(image_paths):
        with Image.open(path) as im:
            im = im.convert('RGB')
            im.thumbnail((cell_size, cell_size))
            x0 = (k % columns) * cell_size
            y0 = (k // columns) * (cell_size + caption_height)
            draw.text((x0 + 6, y0 + 4), f'Image {k + 1}', fill='black', font=font)
            canvas.paste(im, (x0 + (cell_size - im.width) // 2, y0 + caption_height + (cell_size - im.height) // 2))
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(out)
    return out


def composite_message(question: str, task: str, image_paths: Sequence[str], composite_path: str | Path,
                      spec: dict | None = None) -> list[dict]:
    spec = spec or _spec()
    options = spec['prompt']['composite']
    if not Path(composite_path).exists():
        make_composite(image_paths, composite_path, options['max_columns'], options['cell_size'],
                       options['caption_height'])
    text = text_with_labels(question, task, len(image_paths), spec)
    note = (f' The picture tiles the {len(image_paths)} images, each captioned with its name '
            f'(Image 1 to Image {len(image_paths)}).')
    return [{'type': 'image', 'value': str(composite_path)}, {'type': 'text', 'value': text + note}]


def build_message(question: str, task: str, image_paths: Sequence[str], mode: str = 'interleaved',
                  composite_path: str | Path | None = None, spec: dict | None = None) -> list[dict]:
    if mode == 'interleaved':
        return interleaved_message(question, task, image_paths, spec)
    if mode == 'labelled':
        return labelled_message(question, task, image_paths, spec)
    if mode == 'composite':
        if composite_path is None:
            raise ValueError('composite mode needs composite_path (where the tiled image is written)')
        return composite_message(question, task, image_paths, composite_path, spec)
    raise ValueError(f'unknown ReMI input mode {mode!r}; choose one of {INPUT_MODES}')


# ---------------------------------------------------------------- dataset names carry the input mode

SPLITS = ('ReMI', 'ReMI_DEMO')
MODE_SUFFIX = {'interleaved': '', 'labelled': '_labelled', 'composite': '_composite'}


def dataset_names() -> dict[str, tuple[str, str]]:
    """Kit dataset name -> (split, input mode), e.g. 'ReMI_composite' -> ('ReMI', 'composite')."""
    return {split + suffix: (split, mode) for split in SPLITS for mode, suffix in MODE_SUFFIX.items()}


def input_mode_for(model, fallback: str | None = None) -> str:
    """Interleaved for models that take interleaved input (the kit's INTERLEAVE), else the fallback mode."""
    if getattr(model, 'INTERLEAVE', True):
        return 'interleaved'
    return fallback or _spec()['prompt']['default_fallback_mode']


def dataset_name_for(split: str, model, fallback: str | None = None) -> str:
    return split + MODE_SUFFIX[input_mode_for(model, fallback)]
