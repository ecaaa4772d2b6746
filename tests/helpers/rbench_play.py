"""The scripted R-Bench run the end-to-end tests share: a model that answers each demo item from its image (right
on the reference image, right or wrong on the distorted one by pair id), a judge that grades the official prompts,
and what the scores must then be."""
from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlmeval_ext.prepare.demos import RBENCH_DEMO_TSV as DEMO_TSV, WIDTH0
from vlmeval_ext.dataset.utils.rbench_full import rbench_table
from vlmeval_ext.dataset.utils.rbench_full import caption_pick, parse_captions
from vlmeval_ext.offline.judge import parse_choices

MODEL = 'LoopbackGPT'
DATA = 'R-Bench-Full_DEMO'
PREFLIGHT = 'Reply with the single word: ready'
UNPARSEABLE = 'I cannot decide.'
_MCQ = re.compile(r'with option \[(?P<correct>.*?)\] being the correct answer\..*?there will be an answer '
                  r'\[(?P<answer>.*?)\] provided by a respondent', re.S)
_OPEN = re.compile(r'(?:the response|the sentence) \[(?P<answer>.*?)\] completely matches the correct answer '
                   r'\[(?P<correct>.*?)\]\. ', re.S)


# ------------------------------------------------------------------------------------- the scripted model
def _demo() -> pd.DataFrame:
    return pd.read_csv(DEMO_TSV, sep='\t', keep_default_na=False, dtype={'answer': str})


def _pixels(b64: str) -> np.ndarray:
    from PIL import Image
    with Image.open(io.BytesIO(base64.b64decode(b64))) as im:
        return np.asarray(im.convert('RGB'), dtype=float)


def model_output(row, variant: str) -> str:
    """Reference image: right (MCQ letter, VQA answer, first reference caption). Distorted image: the same for
    even pair ids (identical outputs), a wrong one for odd pair ids."""
    pid, task = int(row['pair_id']), row['type']
    if task == 'MCQ':
        right = row['answer'].strip()
        wrong = next(k for k in parse_choices(row['choice']) if k != right)
        return right if variant == 'ref' or pid % 2 == 0 else wrong
    if task == 'VQA':
        return row['answer'] if variant == 'ref' or pid % 2 == 0 else f'something else entirely {pid}'
    first = parse_captions(row['answer'])[0]
    return first if variant == 'ref' or pid % 2 == 0 else f'a blurry picture {pid}'


class ScriptedModel:
    """Knows each request's item from the image width (WIDTH0 + pair_id) and ref/dis from the pixels."""

    def __init__(self, demo: pd.DataFrame):
        self.rows = {int(r['pair_id']): r for r in demo[demo.variant == 'ref'].to_dict('records')}
        self.pixels = {(int(r['pair_id']), r['variant']): _pixels(r['image']) for r in demo.to_dict('records')}
        self.seen = []          # (pair_id, variant, prompt text)

    def classify(self, data_url: str) -> tuple[int, str]:
        seen = _pixels(data_url.partition(',')[2])
        pid = seen.shape[1] - WIDTH0
        dist = {v: float(np.abs(self.pixels[(pid, v)] - seen).mean()) for v in ('ref', 'dis')}
        return pid, min(dist, key=dist.get)

    def __call__(self, body) -> str:
        content = body['messages'][-1]['content']
        # A judge request is text only. Kit difference: ms-vlmeval sends it as a string, upstream VLMEvalKit as a
        # list of text parts.
        if isinstance(content, str):
            return judge_reply(content)
        images = [p['image_url']['url'] for p in content if p.get('type') == 'image_url']
        texts = ' '.join(p.get('text', '') for p in content if p.get('type') == 'text')
        if not images:
            return judge_reply(texts)
        pid, variant = self.classify(images[0])
        self.seen.append((pid, variant, texts))
        return model_output(self.rows[pid], variant)


# ------------------------------------------------------------------------------------- the scripted judge
def unparseable_item(demo) -> int:
    """The first odd VQA pair: every judge prompt about its distorted output gets a reply without a verdict."""
    return min(int(p) for p, t in zip(demo.pair_id, demo.type) if t == 'VQA' and int(p) % 2)


BROKEN = {'marker': None}


def judge_reply(prompt: str) -> str:
    if PREFLIGHT in prompt:
        return 'ready'
    if BROKEN['marker'] and BROKEN['marker'] in prompt:
        return UNPARSEABLE
    m = _MCQ.search(prompt)
    if m:   # 'Score: 1.': the official last-character parse would read 0
        return f'Score: {int(m["answer"].strip() == m["correct"].strip())}.'
    m = _OPEN.search(prompt)
    assert m, prompt[:200]
    return f'Score: {2 if m["answer"].strip().lower() == m["correct"].strip().lower() else 0}'


def expected_rows(demo, mode: str = 'official', caption_seed: int | None = None) -> list[dict]:
    """Per-item scores the scripted model and judge must produce (None: the unparseable item's dis and com).
    Efficient mode judges one reference caption per CAP dis/ref score, drawn with the run's caption_seed."""
    broken = unparseable_item(demo)
    rows = []
    for r in demo[demo.variant == 'ref'].to_dict('records'):
        pid, task = int(r['pair_id']), r['type']
        same = pid % 2 == 0
        if task == 'CAP':
            caps = parse_captions(r['answer'])

            def matched(kind):
                judged = caps if mode == 'official' else [caption_pick(caps, caption_seed, f'{pid}|{kind}')]
                return sum(c.strip().lower() == caps[0].strip().lower() for c in judged) / len(judged)
            ref = matched('ref')
            dis = matched('dis') if same else 0.0
        else:
            ref, dis = 1.0, (1.0 if same else 0.0)
        com = 1.0 if same else 0.0
        if pid == broken:
            dis = com = None
        rows.append({'pair_id': pid, 'name': r['name'], 'type': task, 'distortion': int(r['distortion']),
                     'strength': int(r['strength']), 'score_ref': ref, 'score_dis': dis, 'score_com': com})
    return rows


def _judge_requests(log):
    from vlmeval_ext.launcher import PROBE_PROMPT      # the launcher's one test call to the model
    return [r for r in log if r.n_images == 0 and PREFLIGHT not in r.prompt and PROBE_PROMPT not in r.prompt]


def _score_json(work: Path, tag: str = '') -> dict:
    """The score file of a run; efficient mode's results carry the `_efficient` tag beside official ones."""
    return json.loads((work / MODEL / f'{MODEL}_{DATA}{tag}_score.json').read_text())


def _newest_kit_file(folder: Path, name: str) -> Path:
    """`name` as the kit's last run wrote it. Kit difference: an upstream checkout writes each run into
    <model>/<run id>/ and links the files into <model>/ only when the run finishes (not for a killed run)."""
    return max((p for p in folder.rglob(name) if not p.is_symlink()), key=lambda p: p.stat().st_mtime)


def _cache_keys(cache: Path) -> list[tuple[str, int]]:
    """(prompt sha256, slot) of every loopback-judge verdict in the verdict cache folder `cache`: the store itself,
    committed call by call, so a SIGKILL at any moment leaves it exact."""
    import sqlite3
    db = sqlite3.connect(str(cache / 'verdicts.sqlite'), timeout=30)
    try:
        return [tuple(r) for r in db.execute("SELECT prompt_sha256, slot FROM verdicts WHERE judge = 'loopback-judge'")]
    finally:
        db.close()


def _logged_keys(work: Path) -> list[tuple[str, int]]:
    """(prompt sha256, slot) of each line of the newest `_verdicts.jsonl` log. A process killed between storing
    a verdict and logging it leaves that line out (or torn): the log is a readable record, the cache is the store."""
    path = _newest_kit_file(work / MODEL, f'{MODEL}_{DATA}_loopback-judge_verdicts.jsonl')
    keys = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:      # a line torn by the kill
            continue
        keys.append((rec['prompt_sha256'], rec['slot']))
    return keys


def _assert_scores(score: dict, rows: list[dict]) -> None:
    table = rbench_table(rows)
    for metric in ('absolute', 'relative'):
        for dim, value in table[metric].items():
            assert score[metric][dim] == pytest.approx(value, abs=1e-9) if value is not None \
                else score[metric][dim] is None, (metric, dim)
