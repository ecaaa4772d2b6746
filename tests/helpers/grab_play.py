"""The scripted GRAB run the end-to-end tests share: a model that answers each demo plot exactly, in prose or
wrongly (by the plot it is shown), a judge that extracts the answer from the official prompt, and the scores that
must follow."""
from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pandas as pd

from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
from helpers.kit_run import REPO_ROOT, kit_output, loopback_model_config, write_config
from helpers.loopback_server import LoopbackServer

JUDGE_MARK = 'A generative model has been asked this question'
KIT_FAIL_MSG = 'Failed to obtain answer via API.'
KINDS = ('exact', 'prose', 'wrong')


def echo_judge(body) -> str:
    """A GRAB extraction judge that answers with the model's output as it stands in the prompt."""
    prompt = body['messages'][-1]['content']
    # Kit difference: ms-vlmeval sends a text-only prompt as a string, upstream VLMEvalKit as a list of text parts.
    prompt = prompt if isinstance(prompt, str) else ' '.join(p.get('text', '') for p in prompt)
    return prompt.split('The output from the model answering the question is: "')[1].split('"\n')[0]


def demo() -> pd.DataFrame:
    return pd.read_csv(DEMO_TSV, sep='\t', dtype={'answer': str})


def _wrong(answer: str) -> str:
    return re.sub(r'-?\d+(?:\.\d+)?', lambda m: str(Decimal(m.group(0)) + 20), answer, count=1)


def model_reply_for(answer: str, kind: str) -> str:
    return {'exact': answer, 'prose': f'Reading the plot, the answer is {answer}.', 'wrong': _wrong(answer)}[kind]


def judge_reply_for(output: str) -> str:
    """The extraction an honest judge gives: the text after 'answer is', else the whole output."""
    if not re.search(r'\d', output):
        return 'None'                           # e.g. the "model" sent garbage: no answer in it
    return output.split('answer is ')[-1].rstrip('.') if 'answer is ' in output else output.strip()


def expected_scores(data: pd.DataFrame, garbage: set = frozenset()) -> dict:
    """Overall % of a clean run: official counts exact replies only; normalized and llm_extracted also prose.

    `garbage`: row positions whose prediction is injected garbage text (what the "model" said: wrong).
    """
    kinds = ['wrong' if i in garbage else KINDS[i % 3] for i in range(len(data))]
    n = len(kinds)
    return {'official': 100 * kinds.count('exact') / n,
            'normalized': 100 * (kinds.count('exact') + kinds.count('prose')) / n,
            'llm_extracted': 100 * (kinds.count('exact') + kinds.count('prose')) / n}


def _thumb(raw: bytes):
    import numpy as np
    from PIL import Image
    with Image.open(io.BytesIO(raw)) as image:
        return np.asarray(image.convert('L').resize((32, 24)), dtype=float)


class GrabPlay:
    """The model and judge replies for GRAB_DEMO, and which item each logged request was about."""

    def __init__(self, data: pd.DataFrame, model_delay: float = 0.0, judge_delay: float = 0.0):
        self.data = data
        self.thumbs = [_thumb(base64.b64decode(x)) for x in data['image']]
        self.model_delay, self.judge_delay = model_delay, judge_delay

    def item_of_image(self, body) -> int | None:
        """Row position of the demo image in a model request (the kit re-encodes it as JPEG: nearest thumbnail)."""
        for message in body.get('messages', []):
            for part in message['content'] if isinstance(message['content'], list) else []:
                if part.get('type') == 'image_url':
                    seen = _thumb(base64.b64decode(part['image_url']['url'].partition(',')[2]))
                    return min(range(len(self.thumbs)), key=lambda i: float(abs(self.thumbs[i] - seen).sum()))
        return None

    def model(self, body) -> str:
        item = self.item_of_image(body)
        if item is None:
            return 'ready'                      # the judge preflight shares the default route
        time.sleep(self.model_delay)
        return model_reply_for(self.data['answer'][item], KINDS[item % 3])

    @staticmethod
    def judged_output(prompt: str) -> str:
        return re.search(r'The output from the model answering the question is: "(.*)"\n', prompt, re.S).group(1)

    def judge(self, body) -> str:
        time.sleep(self.judge_delay)
        content = body['messages'][-1]['content']
        # Kit difference: ms-vlmeval sends a text-only prompt as a string, upstream VLMEvalKit as a list of text parts.
        prompt = content if isinstance(content, str) else ' '.join(p.get('text', '') for p in content)
        return judge_reply_for(self.judged_output(prompt))

    def start_server(self, seed: int = 0) -> LoopbackServer:
        server = LoopbackServer(seed=seed).start()
        server.script(JUDGE_MARK, self.judge)
        server.default = self.model
        return server


def kit_command(tmp_path: Path, server: LoopbackServer, *extra) -> list[str]:
    """One fixed run.py command (the same text for every run of a scenario, as a user would retype it)."""
    # Small kit timeouts/waits so injected timeouts and retries cost little; GPT4V retry = attempts per item.
    cfg = loopback_model_config(server, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}},
                                retry=1, wait=0, timeout=2)
    return [sys.executable, str(REPO_ROOT / 'run.py'), '--config', write_config(tmp_path, cfg),
            '--work-dir', str(tmp_path / 'out'), '--judge', 'loopback-judge', '--judge-timeout', '2',
            '--reuse', *extra]


def run(cmd, env, timeout=400) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def results(tmp_path: Path):
    out = tmp_path / 'out' / 'LoopbackGPT'
    scores = json.loads(kit_output(out, 'LoopbackGPT_GRAB_DEMO_score.json').read_text())
    items = pd.read_csv(kit_output(out, 'LoopbackGPT_GRAB_DEMO_items.tsv'), sep='\t', dtype={'answer': str, 'index': str, 'prediction': str,
                                                                                     'extracted': str})
    return scores, items


def model_requests(server, play) -> list[tuple[int, str, str | None]]:
    """(item, outcome, reply) for every model request the server saw."""
    return [(play.item_of_image(r.body), r.outcome, r.reply) for r in list(server.log) if r.n_images]


def judge_requests(server, play) -> list[tuple[str, str, str | None]]:
    return [(play.judged_output(r.prompt), r.outcome, r.reply) for r in list(server.log) if JUDGE_MARK in r.prompt]
