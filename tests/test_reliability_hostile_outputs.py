"""Hostile model outputs through the kit's run.py: replies that quote option texts, quote the kit's failure text,
break spreadsheets, hold invalid unicode or the API key. The loopback server is the model (the kit's GPT4V class)."""
from __future__ import annotations

import json
import re

import pytest

from vlmeval_ext.core.io import read_table
from vlmeval_ext.launcher import PROBE_PROMPT
from vlmeval_ext.testing.kit_run import loopback_model_config, run_kit, write_config


def _options_block(item: dict) -> str:
    return '\n'.join(f'{c}. {item[c]}' for c in 'ABCD')


def test_rococo_mcq_model_answering_with_caption_text_is_read_by_text(tmp_path, loopback, kit_env):
    """Two models on the RoCOCO-MCQ demo: one always replies with the adversarial twin's caption (capitalised, as
    a sentence), one always with the right caption. The article 'A'/'a' that starts most captions is not option A:
    truth is 0 % accuracy / 100 % twin rate, and 100 % accuracy."""
    from vlmeval_ext.rococo.make_demo import DEMO_NAME, DEMO_TSV

    demo = read_table(DEMO_TSV).to_dict('records')
    by_block = {_options_block(item): item for item in demo}

    def reply(body) -> str:
        text = body['messages'][-1]['content']
        text = text if isinstance(text, str) else ' '.join(p.get('text', '') for p in text)
        item = next(it for block, it in by_block.items() if block in text)
        if body['model'] == 'twin-model':
            caption = item[item['twin']]
            return caption[0].upper() + caption[1:] + '.'
        return item[item['answer']]

    loopback.script(re.escape(PROBE_PROMPT), 'OK')
    loopback.default = reply
    cfg = loopback_model_config(loopback, {DEMO_NAME: {'class': 'RoCOCOMCQ', 'dataset': DEMO_NAME}},
                                model_name='TwinByText', model='twin-model')
    cfg['model']['RightByText'] = dict(cfg['model']['TwinByText'], model='right-model')
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4'],
                   env=kit_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    twin = json.loads(next((tmp_path / 'out' / 'TwinByText').rglob(f'*_{DEMO_NAME}_score.json')).read_text())
    right = json.loads(next((tmp_path / 'out' / 'RightByText').rglob(f'*_{DEMO_NAME}_score.json')).read_text())
    assert twin['n'] == right['n'] == len(demo) == 24
    assert (twin['accuracy'], twin['twin_rate'], twin['unparsed']) == (0.0, 100.0, 0)
    assert (right['accuracy'], right['twin_rate'], right['unparsed']) == (100.0, 0.0, 0)
    assert twin['parsed_by'] == right['parsed_by'] == {'text': 24}       # none read as a letter
