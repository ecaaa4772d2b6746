"""Small kit-format benchmark tables for the corruption tests: an MMBench-style MCQ and a TextVQA-style VQA TSV with
generated item pictures, and a scripted model that answers by what it sees (reference or corrupted picture)."""
from __future__ import annotations

import base64
import io
import re

import cv2
import numpy as np
import pandas as pd
from PIL import Image, ImageDraw


LETTERS = 'ABCD'
TEXTVQA_ANSWERS = ['cat'] * 7 + ['kitty'] * 3   # VQA score: 'cat' 1.0, 'kitty' 0.9 (partial credit)


def item_image(k: int) -> Image.Image:
    """A detailed image (checkerboard + text); its width (224 + 16k) names the item even after JPEG."""
    img = Image.new('RGB', (224 + 16 * k, 160), (200, 190, 170))
    draw = ImageDraw.Draw(img)
    for y in range(0, 160, 8):
        for x in range(0, img.width, 8):
            if (x // 8 + y // 8 + k) % 2:
                draw.rectangle([x, y, x + 7, y + 7], fill=(40 + 30 * k, 60, 110))
    draw.text((10, 10), f'item {k}', fill='red')
    return img


def b64_png(img: Image.Image) -> str:
    buf = io.BytesIO()
    img.save(buf, 'PNG')
    return base64.b64encode(buf.getvalue()).decode()


def luma_and_sharpness(img: Image.Image) -> tuple[float, float]:
    gray = cv2.cvtColor(np.asarray(img.convert('RGB')), cv2.COLOR_RGB2GRAY)
    return float(gray.mean()), float(cv2.Laplacian(gray, cv2.CV_32F).var())


def jpeg(img: Image.Image) -> Image.Image:
    buf = io.BytesIO()
    img.convert('RGB').save(buf, 'JPEG')  # what the kit's GPT4V sends
    return Image.open(io.BytesIO(buf.getvalue()))


# clean statistics per item width, as the model sees them (JPEG); the scripted model compares against them
CLEAN = {item_image(k).width: luma_and_sharpness(jpeg(item_image(k))) for k in range(4)}


def request_image(request: dict) -> Image.Image:
    for part in request['messages'][-1]['content']:
        if isinstance(part, dict) and part.get('type') == 'image_url':
            return Image.open(io.BytesIO(base64.b64decode(part['image_url']['url'].split(',', 1)[1])))
    raise AssertionError('no image in the request')


def seen(request: dict) -> tuple[bool, bool]:
    """(dark, blurred) relative to the clean item. Measured on these images after JPEG: luma ratio 0.33-0.62
    for d03 s1/s3 and d26 s3 vs 0.88-1.0 otherwise; sharpness ratio 0.01 for d05 s3 vs >= 0.12 otherwise.
    The thresholds sit inside those gaps, so the expected numbers below follow by hand."""
    img = request_image(request)
    luma, sharp = luma_and_sharpness(img)
    clean_luma, clean_sharp = CLEAN[img.width]
    return luma < 0.75 * clean_luma, sharp < 0.05 * clean_sharp


def text_of(request: dict) -> str:
    return ' '.join(p['text'] for p in request['messages'][-1]['content'] if p.get('type') == 'text')


def scripted_model(request: dict) -> str:
    """MCQ (AI2D_MINI-RC): items 0-2 right unless the image is dark or blurred (then the next letter); item 3
    answers 'I cannot tell' on images that look clean (names no option: wrong) and the key on dark/blurred ones.
    VQA (TextVQA_VAL-RC): item 0 'cat' (1.0), dark -> 'dog' (0); item 1 'kitty' (0.9), dark -> 'cat' (1.0);
    item 2 no answer at all on clean-looking images (empty reply -> the kit's API failure), dark -> 'cat'."""
    text = text_of(request)
    dark, blurred = seen(request)
    mcq = re.search(r'key=([ABCD]) item=(\d)', text)
    if mcq:
        key, item = mcq.group(1), int(mcq.group(2))
        if item == 3:
            return key if (dark or blurred) else 'I cannot tell.'
        return LETTERS[(LETTERS.index(key) + 1) % 4] if (dark or blurred) else key
    item = int(re.search(r'vqa item=(\d)', text).group(1))
    if item == 0:
        return 'dog' if dark else 'cat'
    if item == 1:
        return 'cat' if dark else 'kitty'
    return 'cat' if dark else ''


def mcq_tsv(n: int = 4) -> pd.DataFrame:
    """A small TSV in the kit's AI2D format (AI2D_MINI: a kit ImageMCQDataset the kit lists no md5 for)."""
    return pd.DataFrame([{'index': k, 'question': f'Which option is right? key={LETTERS[k]} item={k}', 'A': 'alpha',
                          'B': 'beta', 'C': 'gamma', 'D': 'delta', 'answer': LETTERS[k], 'category': 'synthetic',
                          'image': b64_png(item_image(k))} for k in range(n)])


def textvqa_tsv(n: int = 3) -> pd.DataFrame:
    """A small TSV in the kit's TextVQA_VAL format: answer = the ten annotators' answers as a list cell."""
    return pd.DataFrame([{'index': k, 'question': f'What animal is written? vqa item={k}',
                          'answer': str(TEXTVQA_ANSWERS), 'image': b64_png(item_image(k))} for k in range(n)])



def closed_port_url() -> str:
    """An OpenAI-style URL on a loopback port nothing listens on: no judge is reachable there."""
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    return f'http://127.0.0.1:{port}/v1/chat/completions'


# ------------------------------------------------------------------------------------------------ pure
