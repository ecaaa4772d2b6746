"""Hostile model outputs through the kit's run.py: replies that quote option texts, quote the kit's failure text,
break spreadsheets, hold invalid unicode or the API key. The loopback server is the model (the kit's GPT4V class)."""
from __future__ import annotations

import json
import re

import pytest

from vlmeval_ext.io import read_table
from vlmeval_ext.launcher import PROBE_PROMPT
from helpers.kit_run import loopback_model_config, run_kit, write_config


def _options_block(item: dict) -> str:
    return '\n'.join(f'{c}. {item[c]}' for c in 'ABCD')


def test_rococo_mcq_model_answering_with_caption_text_is_read_by_text(tmp_path, loopback, kit_env):
    """Two models on the RoCOCO-MCQ demo: one always replies with the adversarial twin's caption (capitalised, as
    a sentence), one always with the right caption. The article 'A'/'a' that starts most captions is not option A:
    truth is 0 % accuracy / 100 % twin rate, and 100 % accuracy."""
    from vlmeval_ext.prepare.demos import ROCOCO_DEMO_NAME as DEMO_NAME, ROCOCO_DEMO_TSV as DEMO_TSV

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


# ---- GRAB_DEMO with replies that break spreadsheets, quote the failure text, echo the key ----------------------
FAKE_KEY = 'sk-vlmevalext-FAKE-0123456789abcdef'       # kit_env's OPENAI_API_KEY
GRAB_REPLIES = (
    '=1+1',                                            # ms-vlmeval's xlsx: a live formula, read back as 0
    '=HYPERLINK("http://evil.example/","-9")',
    'y' * 40_000 + ' The answer is 7',                 # longer than an xlsx cell: the final answer would be cut
    'Failed to obtain answer via API. The answer is 5',   # quotes the kit's failure text: still an answer
    f'2 (gateway echo: Bearer {FAKE_KEY})',            # the endpoint echoes the key
    'ctrl\x00\x1b\x7f 4',                              # control characters: `_x0000_` escapes in xlsx
    '-9',
)


def _grab_reply_for(question: str, questions: list[str]) -> str:
    return GRAB_REPLIES[questions.index(question) % len(GRAB_REPLIES)]


def _grab_questions():
    import pandas as pd

    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
    data = pd.read_csv(DEMO_TSV, sep='\t', dtype=str, keep_default_na=False)
    return data, list(dict.fromkeys(data['question']))


def _serve_grab(loopback, questions, replies=None):
    def reply(body) -> str:
        content = body['messages'][-1]['content']
        text = content if isinstance(content, str) else ' '.join(p.get('text', '') for p in content)
        question = next(q for q in questions if q in text)
        return (replies or {}).get(question) or _grab_reply_for(question, questions)
    loopback.script(re.escape(PROBE_PROMPT), 'OK')
    loopback.default = reply


def test_grab_predictions_round_trip_exactly_and_are_scored_as_sent(tmp_path, loopback, kit_env):
    """The launcher has the kit write TSV for our datasets (PRED_FORMAT=tsv, said on the console): every reply is
    stored verbatim (40,000 characters, formulas, control characters), scored as sent, none excluded (a reply
    quoting the failure text is an answer), and the echoed key is in no file and no console line."""
    from vlmeval_ext.dataset.utils import grab as G

    data, questions = _grab_questions()
    _serve_grab(loopback, questions)
    cfg = loopback_model_config(loopback, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}},
                                verbose=True)       # the kit prints each answer
    env = {k: v for k, v in kit_env.items() if k != 'PRED_FORMAT'}
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4'],
                   env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'predictions written as TSV: every reply verbatim (PRED_FORMAT=xlsx to change)' in proc.stderr
    # (an upstream checkout also links the latest run's files into the model folder: links are not counted)
    preds = [p for p in (tmp_path / 'out').rglob('LoopbackGPT_GRAB_DEMO.tsv') if not p.is_symlink()]
    assert len(preds) == 1 and not list((tmp_path / 'out').rglob('LoopbackGPT_GRAB_DEMO.xlsx'))
    stored = read_table(preds[0])
    sent = [_grab_reply_for(q, questions).replace(FAKE_KEY, '***') for q in stored['question']]
    assert list(stored['prediction']) == sent                    # byte for byte, the key masked
    score = json.loads(next((tmp_path / 'out').rglob('*_GRAB_DEMO_score.json')).read_text())
    assert score['counts']['items'] == score['counts']['scored'] == 41
    assert score['counts']['inference_failures'] == 0
    truth = dict(zip(data['index'], data['answer']))
    rows = [G.score_response(r, truth[i], q) for i, r, q in zip(stored['index'], sent, stored['question'])]
    for name in ('official', 'normalized'):
        assert score[name]['Overall'] == pytest.approx(100 * sum(r[name] for r in rows) / 41, abs=0.01), name
    items = next((tmp_path / 'out').rglob('*_GRAB_DEMO_items.tsv')).read_text()
    for where in (items, preds[0].read_text(), proc.stdout, proc.stderr):
        assert FAKE_KEY not in where
    assert '(gateway echo: Bearer ***)' in proc.stdout + proc.stderr              # printed, masked



def test_grab_xlsx_predictions_formulas_read_as_text_and_cut_replies_refused(tmp_path, loopback, kit_env):
    """With the kit's xlsx chosen (PRED_FORMAT=xlsx) the launcher says what it costs; a reply cut at the cell
    limit stops the evaluation with one line naming the rows (never scored from its first 32,767 characters); a
    reply the kit's writer stored as a formula reads back as its text, not the cached 0. The whole replies are kept
    beside it as TSV, so the advised rerun (PRED_FORMAT=tsv, --reuse) asks the model for the cut rows only."""
    import openpyxl

    from vlmeval_ext.io import DataError, XLSX_CELL_LIMIT, load_predictions

    data, questions = _grab_questions()
    # no reply quoting the kit's failure text here: the kit asks those again on every run (see the test above)
    replies = {q: 'The answer is 5' if 'Failed to obtain' in _grab_reply_for(q, questions) else None
               for q in questions}
    _serve_grab(loopback, questions, replies)
    cfg = loopback_model_config(loopback, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}})
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4'],
                   env=dict(kit_env, PRED_FORMAT='xlsx'), cwd=tmp_path)
    assert 'are written as xlsx (PRED_FORMAT=xlsx)' in proc.stderr
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert not list((tmp_path / 'out').rglob('*_GRAB_DEMO_score.json'))          # nothing scored
    assert re.search(r'GRAB_DEMO: .*32,767 characters \(row\(s\) \[\d+', proc.stderr)
    xlsx = _newest(tmp_path / 'out', 'LoopbackGPT_GRAB_DEMO.xlsx')
    sheet = openpyxl.load_workbook(xlsx).active
    column = [c.value for c in sheet[1]].index('prediction') + 1
    cut = [sheet.cell(r, column).value for r in range(2, sheet.max_row + 1)]
    assert any(isinstance(v, str) and len(v) == XLSX_CELL_LIMIT for v in cut)      # the kit's writer cut it
    with pytest.raises(DataError, match='32,767'):
        load_predictions(xlsx)
    stored = read_table(xlsx)
    assert '=1+1' in list(stored['prediction']) and '=HYPERLINK("http://evil.example/","-9")' in list(
        stored['prediction'])                                                   # the text, never the cached 0
    n_cut = sum(isinstance(v, str) and len(v) == XLSX_CELL_LIMIT for v in cut)
    kept = read_table(xlsx.with_suffix('.tsv'))                                  # every row but the cut ones
    assert len(kept) == 41 - n_cut and all(len(v) < XLSX_CELL_LIMIT for v in kept['prediction'])
    assert f'the model is asked again for the {n_cut} cut row(s) only' in proc.stderr
    asked = loopback.count() - loopback.count(re.escape(PROBE_PROMPT))
    assert asked == 41
    again = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4',
                     '--reuse'], env=dict(kit_env, PRED_FORMAT='tsv'), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert n_cut > 0 and loopback.count() - loopback.count(re.escape(PROBE_PROMPT)) == asked + n_cut  # cut only
    final = read_table(_newest(tmp_path / 'out', 'LoopbackGPT_GRAB_DEMO.tsv'))
    assert list(final['prediction']).count('y' * 40_000 + ' The answer is 7') == n_cut    # now whole
    score = json.loads(_newest(tmp_path / 'out', 'LoopbackGPT_GRAB_DEMO_score.json').read_text())
    assert score['counts']['scored'] == 41


def test_reply_with_lone_surrogate_never_leaves_a_run_that_cannot_finish(tmp_path, loopback, kit_env):
    """A reply holding half an emoji ('\\ud83d') cannot be stored in any UTF-8 file; the kit's table of predictions
    refuses it. The launcher repairs the checkpoint (U+FFFD) and says to run again; the same command then finishes
    without asking the model again, and the reply is scored as repaired."""
    data, questions = _grab_questions()
    broken = {q: '3' for q in questions}
    broken.update({questions[0]: '\ud83d 3', questions[1]: 'two halves \ud83d\ude00 5'})
    _serve_grab(loopback, questions, broken)
    cfg = loopback_model_config(loopback, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}})
    # --reuse: an upstream checkout starts a new run folder per run unless told to resume (ms-vlmeval always does)
    command = ['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4', '--reuse']
    first = run_kit(command, env=kit_env, cwd=tmp_path)
    asked = loopback.count() - loopback.count(re.escape(PROBE_PROMPT))
    assert asked == 41
    if first.returncode != 0:                       # the kit could not write the predictions: said, and repaired
        assert 'run the same command again' in first.stderr, first.stderr[-3000:]
        second = run_kit(command, env=kit_env, cwd=tmp_path)
        assert second.returncode == 0, second.stderr[-3000:]
        assert loopback.count() - loopback.count(re.escape(PROBE_PROMPT)) == 41      # nothing asked again
    stored = read_table(_newest(tmp_path / 'out', 'LoopbackGPT_GRAB_DEMO.tsv'))
    by_question = dict(zip(stored['question'], stored['prediction']))
    assert by_question[questions[0]] == '\ufffd 3' and by_question[questions[1]] == 'two halves \U0001f600 5'
    score = json.loads(_newest(tmp_path / 'out', 'LoopbackGPT_GRAB_DEMO_score.json').read_text())
    assert score['counts']['scored'] == 41


def _newest(folder, name):
    return max((p for p in folder.rglob(name) if not p.is_symlink()), key=lambda p: p.stat().st_mtime)


def test_answers_quoting_the_kit_failure_text_are_scored_not_excluded(tmp_path, loopback, kit_env):
    """About half the replies quote the kit's failure text in a (wrong) answer: each is an answer, scored wrong;
    no item is excluded and the headline is not inflated (only the kit's exact failure values are failures)."""
    from vlmeval_ext.dataset.utils import grab as G

    data, questions = _grab_questions()
    first_answer = dict(zip(data['question'][::-1], data['answer'][::-1]))          # first row per question
    quoting = set(questions[::2])
    replies = {q: ('Failed to obtain answer via API. I cannot read the plot.' if q in quoting else first_answer[q])
               for q in questions}
    _serve_grab(loopback, questions, replies)
    cfg = loopback_model_config(loopback, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}})
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4'],
                   env=kit_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    score = json.loads(next((tmp_path / 'out').rglob('*_GRAB_DEMO_score.json')).read_text())
    quoted = sum(q in quoting for q in data['question'])
    assert quoted >= 15 and score['counts']['inference_failures'] == 0 and score['counts']['scored'] == 41
    official = [G.official_correct(replies[q], a) for q, a in zip(data['question'], data['answer'])]
    assert score['official']['Overall'] == pytest.approx(100 * sum(official) / 41, abs=0.01)
    assert score['official']['Overall'] <= 100 * (41 - quoted) / 41 + 0.01          # the quoting ones count wrong


def test_echoed_key_is_masked_in_the_predictions_file_and_ordinary_words_are_not(tmp_path, monkeypatch, capsys):
    """Masking is its own named step before an evaluation (mask_echoed_keys); reading a predictions file never
    writes it."""
    import pandas as pd

    from vlmeval_ext.io import load_predictions, write_kit_tsv
    from vlmeval_ext.secrets import mask_echoed_keys
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    monkeypatch.setenv('KEYBOARD_LAYOUT', 'english')           # a "key" variable that is no key
    path = tmp_path / 'M_GRAB_DEMO.tsv'
    write_kit_tsv(pd.DataFrame({'index': [0, 1], 'prediction': [f'3 ({FAKE_KEY})', 'english 4']}), path)
    before = path.read_bytes()
    assert list(load_predictions(path)['prediction'])[0] == f'3 ({FAKE_KEY})' and path.read_bytes() == before
    assert mask_echoed_keys(path) == 1 and mask_echoed_keys(path) == 0
    preds = load_predictions(path)
    assert list(preds['prediction']) == ['3 (***)', 'english 4']
    assert FAKE_KEY not in path.read_text() and 'english 4' in path.read_text()
    err = capsys.readouterr().err
    assert 'M_GRAB_DEMO.tsv: 1 prediction(s) held a configured API key (row(s) [2])' in err and FAKE_KEY not in err
    assert list(load_predictions(path)['prediction']) == ['3 (***)', 'english 4']      # rewritten: nothing left


def test_replies_that_look_like_missing_values_stay_verbatim_through_reruns(tmp_path, loopback, kit_env):
    """Replies 'None', 'NA', 'null' and 'N/A': the kit reads its TSV back when it resumes (--reuse, which our
    run.py passes) and rewrites it; they must stay the text the model sent, never become 'nan'."""
    import pandas as pd
    words = ['None', 'NA', 'null', 'N/A']
    _, questions = _grab_questions()
    replies = {q: words[k % 4] for k, q in enumerate(questions[:8])}
    _serve_grab(loopback, questions, replies)
    cfg = loopback_model_config(loopback, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}})
    for _ in range(2):                                           # the second run resumes from the first's files
        proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4'],
                       env=kit_env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    for pred in (p for p in (tmp_path / 'out').rglob('LoopbackGPT_GRAB_DEMO.tsv') if not p.is_symlink()):
        stored = read_table(pred)
        for question, prediction in zip(stored['question'], stored['prediction']):
            if question in replies:
                assert prediction == replies[question], (pred, question, prediction)
    items = pd.read_csv(max((tmp_path / 'out').rglob('*_GRAB_DEMO_items.tsv'), key=lambda p: p.stat().st_mtime_ns),
                        sep='\t', dtype=str, keep_default_na=False)
    assert set(words) <= set(items['prediction']) and 'nan' not in set(items['prediction'])
