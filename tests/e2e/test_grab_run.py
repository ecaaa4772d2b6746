"""GRAB end to end through run.py: the loopback server is the model and the extraction judge, on the shipped demo
split (real grab.json rows, generated plots). Plus evaluate() on hand-made predictions files (imports the kit).
"""
from __future__ import annotations

import base64
import io
import json
import re
from decimal import Decimal

import pandas as pd
import pytest

from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
from helpers.kit_run import loopback_model_config, run_kit, write_config

JUDGE_MARK = 'A generative model has been asked this question'


def _demo():
    return pd.read_csv(DEMO_TSV, sep='\t', dtype={'answer': str})


def _wrong(answer: str) -> str:
    """The answer with its first number moved by 20 (wrong at every GRAB precision)."""
    return re.sub(r'-?\d+(?:\.\d+)?', lambda m: str(Decimal(m.group(0)) + 20), answer, count=1)


# Each demo item gets one kind of reply: exact / wrapped in prose / no answer / wrong.
KINDS = ('exact', 'prose', 'none', 'wrong')


def _model_reply(answer: str, kind: str) -> str:
    return {'exact': answer, 'prose': f'Looking at the plot, the answer is {answer}.',
            'none': 'I cannot tell from this image.', 'wrong': _wrong(answer)}[kind]


def _judge_reply(body) -> str:
    """Emulates the extraction LLM: the model output's answer after 'is', whole if short, else "None"."""
    prompt = body['messages'][-1]['content']
    # Kit difference: ms-vlmeval sends a text-only prompt as a string, upstream VLMEvalKit as a list of text parts.
    prompt = prompt if isinstance(prompt, str) else ' '.join(p.get('text', '') for p in prompt)
    output = re.search(r'The output from the model answering the question is: "(.*)"\n', prompt, re.S).group(1)
    if 'cannot tell' in output:
        return 'None'
    return output.split('answer is ')[-1].rstrip('.')


def _thumbnail(png: bytes):
    """A small grey thumbnail: identifies a plot although the kit re-encodes (JPEG) what it sends."""
    import numpy as np
    from PIL import Image
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert('L').resize((48, 36)), dtype=float)


def item_kinds(demo) -> list[str]:
    """Reply kind per demo row; identical plots (same answer, same question type) share a kind."""
    groups: dict = {}
    kinds = []
    for row in demo.itertuples():
        key = _thumbnail(base64.b64decode(row.image)).tobytes()
        groups.setdefault(key, len(groups))
        kinds.append(KINDS[groups[key] % len(KINDS)])
    return kinds


@pytest.fixture(scope='module')
def demo_run(tmp_path_factory):
    from helpers.kit_run import kit_environment
    from helpers.loopback_server import LoopbackServer

    tmp_path = tmp_path_factory.mktemp('grab_e2e')
    demo = _demo()
    known = [(_thumbnail(base64.b64decode(row.image)), row.answer, kind)
             for row, kind in zip(demo.itertuples(), item_kinds(demo))]

    def model_reply(body):
        for message in body['messages']:
            for part in message['content'] if isinstance(message['content'], list) else []:
                if part.get('type') == 'image_url':
                    seen = _thumbnail(base64.b64decode(part['image_url']['url'].partition(',')[2]))
                    _, answer, kind = min(known, key=lambda k: float(abs(k[0] - seen).sum()))
                    return _model_reply(answer, kind)
        return 'ready'   # the judge preflight call

    server = LoopbackServer().start()
    try:
        server.script(JUDGE_MARK, _judge_reply)
        server.default = model_reply
        env = kit_environment(tmp_path, server)
        env.pop('PYTHONWARNINGS', None)            # the console as a user sees it: every warning shown
        cfg = loopback_model_config(server, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}})
        proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out',
                        '--judge', 'loopback-judge', '--api-nproc', '4'], env=env)
        log = list(server.log)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    # Kit difference: an upstream checkout writes into <model>/<run id>/ and links the files into <model>/.
    score_files = [p for p in (tmp_path / 'out').rglob('*GRAB_DEMO_score.json') if not p.is_symlink()]
    assert len(score_files) == 1, list((tmp_path / 'out').rglob('*'))
    return {'demo': demo, 'log': log, 'score_file': score_files[0], 'stdout': proc.stdout, 'stderr': proc.stderr}


def test_the_console_has_no_launcher_warning_one_short_format_line_and_no_zero_counters(demo_run):
    out = demo_run['stdout'] + demo_run['stderr']
    assert 'RuntimeWarning' not in out and 'found in sys.modules' not in out
    format_lines = [line for line in out.splitlines() if 'PRED_FORMAT' in line]
    assert format_lines == ['[vlmeval-ext] INFO: predictions written as TSV: every reply verbatim (PRED_FORMAT=xlsx '
                            'to change)']
    accounting = [line for line in out.splitlines() if re.match(r'GRAB_DEMO \[\w+\] ', line)]
    assert not [line for line in accounting if re.search(r'=0(\.0+)?(;|$)', line)], accounting
    assert out.count('answers to extract') == 1
    # the kit's inference bar of an API model carries no label: one line before it says what it counts
    assert out.count('is an API model: the kit shows one progress bar per dataset while it answers (GRAB_DEMO, in '
                     'this order); each bar counts its answers') == 1
    # no empty per-run folder is left behind (ms-vlmeval makes one per run and writes nothing into it; an upstream
    # checkout writes its status.json there)
    model_dir = demo_run['score_file'].parent
    run_dirs = [d for d in model_dir.parent.rglob('T2*') if d.is_dir()]
    assert all(any(d.iterdir()) for d in run_dirs), run_dirs


def test_model_saw_every_plot_with_the_official_prompt(demo_run):
    demo, log = demo_run['demo'], demo_run['log']
    model_requests = [r for r in log if r.n_images]
    assert len(model_requests) == len(demo)
    assert all(r.n_images == 1 for r in model_requests)
    questions = set(demo['question'])
    for request in model_requests:
        text = ' '.join(p[1] for p in request.parts if p[0] == 'text')
        assert 'Only provide the answer, no reasoning steps.\nIf you are unsure, still provide an answer.' in text
        assert any(q in text for q in questions)


def test_three_scorings_match_the_replies_given(demo_run):
    demo = demo_run['demo']
    n = len(demo)
    kinds = item_kinds(demo)
    scores = json.loads(demo_run['score_file'].read_text())
    assert set(scores) == {'official', 'normalized', 'llm_extracted', 'counts', 'judge', 'notes', 'coverage',
                           'judge_calls', 'ci95', 'ci95_n', 'ci95_method', 'detectable_difference'}
    paid = scores['judge_calls']
    assert (paid['made'], paid['reused_from_cache'], paid['failed']) == (n, 0, 0)
    assert '127.0.0.1' in paid['endpoint'] and paid['parameters']['model'] == 'loopback-judge'
    assert (scores['coverage']['dataset_items'], scores['coverage']['missing_items']) == (n, 0)
    assert scores['counts'] == {'items': n, 'scored': n, 'empty': 0, 'inference_failures': 0, 'judge_failures': 0}
    assert scores['judge'] == {'name': 'loopback-judge', 'mode': 'official', 'endpoint_host': '127.0.0.1',
                               'scoring': 'llm_extracted', 'calls_made': n, 'calls_cached': 0}
    # official: only exact replies; normalized: exact + prose; llm_extracted: the judge strips the prose too.
    assert scores['official']['Overall'] == pytest.approx(100 * kinds.count('exact') / n, abs=1e-3)
    expected_normalized = 100 * (kinds.count('exact') + kinds.count('prose')) / n
    assert scores['normalized']['Overall'] == pytest.approx(expected_normalized, abs=1e-3)
    assert scores['llm_extracted']['Overall'] == pytest.approx(expected_normalized, abs=1e-3)
    assert scores['normalized']['counts']['unparsed'] == kinds.count('none')
    llm = scores['llm_extracted']['counts']
    assert llm['no_answer'] == kinds.count('none') and llm['judge_failures'] == 0
    assert llm['judge'] == 'loopback-judge' and llm['calls_made'] == n
    # Per-task breakdown from the same items.
    for task in demo['task'].unique():
        task_kinds = [k for k, t in zip(kinds, demo['task']) if t == task]
        assert scores['official']['task'][task] == pytest.approx(100 * task_kinds.count('exact') / len(task_kinds),
                                                              abs=1e-3)
    for suffix in ('_acc.csv', '_items.tsv', '_complexity.png'):
        assert demo_run['score_file'].with_name(demo_run['score_file'].name.replace('_score.json', suffix)).is_file()


def test_judge_saw_the_official_extraction_prompt(demo_run):
    judge_requests = [r for r in demo_run['log'] if JUDGE_MARK in r.prompt]
    assert len(judge_requests) == len(demo_run['demo'])
    assert all(r.n_images == 0 for r in judge_requests)
    assert all('Return only the extracted numeric answer' in r.prompt for r in judge_requests)


# ------------------------------------------------------------------- evaluate() on hand-made prediction files

@pytest.fixture(scope='module')
def grab_cls():
    from vlmeval_ext.datasets import GRAB
    return GRAB


def _predictions(tmp_path, predictions, **overrides):
    demo = _demo().drop(columns=['image']).head(len(predictions))
    demo['prediction'] = predictions
    for column, values in overrides.items():
        demo[column] = values
    path = tmp_path / 'M_GRAB_DEMO.xlsx'
    demo.to_excel(path, index=False)
    return path, demo


def test_missing_columns_are_a_clear_error(grab_cls, tmp_path):
    path, demo = _predictions(tmp_path, ['1', '2'])
    demo.drop(columns=['answer', 'complexity']).to_excel(path, index=False)
    with pytest.raises(ValueError, match=r"M_GRAB_DEMO\.xlsx: missing column\(s\) \['answer', 'complexity'\]"):
        grab_cls.for_predictions('GRAB_DEMO', path).evaluate(str(path))


def test_failed_inference_and_empty_answers(grab_cls, tmp_path):
    demo = _demo()
    answers = demo['answer'].head(6).tolist()
    preds = [answers[0], 'Failed to obtain answer via API.', None, f' {answers[3]}', '', answers[5]]
    path, frame = _predictions(tmp_path, preds)
    grab_cls.for_predictions('GRAB_DEMO', path).evaluate(str(path))
    scores = json.loads((tmp_path / 'M_GRAB_DEMO_score.json').read_text())
    official = scores['official']
    assert 'llm_extracted' not in scores                           # no judge given
    # Only the kit's failure text is an inference failure; an empty cell (None or '') is an empty, wrong answer.
    assert official['counts'] == {'items': 6, 'scored': 5, 'not_scored': 1, 'inference_failures': 1}
    assert scores['counts'] == {'items': 6, 'scored': 5, 'empty': 2, 'inference_failures': 1, 'judge_failures': 0}
    assert scores['judge'] is None and 'llm_extracted: not run' in scores['notes'][0]
    # Correct: items 0 and 5 (exact) and 3 (leading space).
    assert official['Overall'] == pytest.approx(100 * 3 / 5)
    items = pd.read_csv(tmp_path / 'M_GRAB_DEMO_items.tsv', sep='\t', dtype=str, keep_default_na=False)
    assert items['answer'].tolist() == answers
    assert items['prediction_kind'].tolist() == ['answer', 'failed', 'empty', 'answer', 'empty', 'answer']


def test_an_answer_stored_as_a_number_is_a_clear_error(grab_cls, tmp_path):
    # A spreadsheet cell holding the number -1.0 reads back as "-1": the exact answer text is lost, so the row is
    # refused (the official rule compares strings) instead of being re-formatted by guesswork.
    demo = _demo()
    row = next(i for i, a in enumerate(demo['answer']) if a.endswith('.0'))
    path, frame = _predictions(tmp_path, ['1'] * (row + 1))
    frame['answer'] = [float(a) if i == row else a for i, a in enumerate(frame['answer'])]
    frame.to_excel(path, index=False)
    with pytest.raises(ValueError, match=rf"M_GRAB_DEMO\.xlsx: row {row + 2}, column 'answer': .*decimal"):
        grab_cls.for_predictions('GRAB_DEMO', path).evaluate(str(path))
