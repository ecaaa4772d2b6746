"""Random API faults across every benchmark in ONE run.py call: R-Bench-Full (LLM-judged), ReMI and
RoCOCO-MCQ (rule-based) and a `-RC` variant (TextVQA_VAL-RC, the kit's own VQA score), the loopback server
playing the model (the kit's GPT4V class) and R-Bench's judge.

Run 1: 20 % of all calls fail at random (seeded; 429, 500, timeout, malformed JSON, empty and garbage text), one
model attempt per item and two per judge call, so failures happen and must be counted (plus one forced model
failure per benchmark and one forced judge failure, so each kind happens whatever the random draw). Run 2: the
same command, faults off: only what failed is asked again, and the scores equal a clean run's. Then every file of the run and
the console are searched for the fake API key. Two subprocesses (~1-2 min each).

Clean expectations come from the scripted replies: R-Bench through its own pure pipeline with a perfect judge,
ReMI / RoCOCO through their pure scorers, TextVQA 'cat' = 1.0 on every row. Garbage text from the *model* is what
the model said (a wrong answer, as for a real API); the kit keeps it, so the expectation uses it for those rows.

Figures: run with `-s` (docs/RELIABILITY.md quotes them).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from helpers.kit_tables import textvqa_tsv
from helpers.rbench_play import _MCQ, _OPEN, BROKEN, PREFLIGHT, ScriptedModel, _assert_scores, judge_reply, model_output
from helpers.secrets_check import KEY_PARTS, leaks
from vlmeval_ext.io import write_kit_tsv
from helpers.rbench_protocol import run_protocol
from vlmeval_ext.corrupt.variants import INDEX_SLOT, build_rc_frame
from vlmeval_ext.dataset.utils.rbench_full import pair_rows
from vlmeval_ext.dataset.utils import remi as remi_score
from vlmeval_ext.dataset.utils import rococo_mcq as Q
from vlmeval_ext.judging import STORE_FILE
from vlmeval_ext.launcher import PROBE_PROMPT
from vlmeval_ext.prepare.demos import DEMO_DIR
from vlmeval_ext.prepare.demos import RBENCH_DEMO_TSV as RBENCH_TSV
from helpers.kit_run import FAKE_KEY, REPO_ROOT, kit_environment, kit_output, loopback_model_config, write_config
from helpers.loopback_server import FAULT_KINDS, LoopbackServer

MODEL = 'LoopbackGPT'
RB, REMI, ROCOCO, RC = 'R-Bench-Full_DEMO', 'ReMI_DEMO', 'RoCOCO-MCQ-same_concept_DEMO', 'TextVQA_VAL-RC'
CLASSES = {RB: 'RBenchFull', REMI: 'ReMI', ROCOCO: 'RoCOCOMCQ', RC: 'CorruptedDataset'}
FAIL_MSG = 'Failed to obtain answer via API.'
# In run 1 one item per benchmark always gets an empty 200 reply (the kit's failure text), so every benchmark
# has at least one inference failure whatever the random faults hit; the random ones come on top.
FORCED = {RB: (0, 'ref'), REMI: 0, ROCOCO: 0, RC: 2}


class FirstJudgePromptFails:
    """In run 1 the first R-Bench judge prompt the server sees gets HTTP 500 on every attempt, so the run has at
    least one judge-failed score whatever the random faults hit (two attempts per call make a random one rare)."""

    def __init__(self):
        self.lock, self.prompt = threading.Lock(), None

    def __call__(self, prompt: str) -> int | None:
        if PREFLIGHT in prompt or PROBE_PROMPT in prompt or not (_MCQ.search(prompt) or _OPEN.search(prompt)):
            return None
        with self.lock:
            self.prompt = self.prompt or prompt
            return 500 if prompt == self.prompt else None


# ------------------------------------------------------------------------------------- the scripted model
def _text(body) -> str:
    texts = []
    for message in body.get('messages', []):
        content = message.get('content', '')
        # Kit difference: ms-vlmeval sends a text-only prompt as a string, upstream VLMEvalKit as a list of text parts.
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(p.get('text', '') for p in content if p.get('type') == 'text')
    return '\n'.join(texts)


def _first_image(body) -> str | None:
    for message in body.get('messages', []):
        for part in message['content'] if isinstance(message.get('content'), list) else []:
            if part.get('type') == 'image_url':
                return part['image_url']['url']
    return None


class Play:
    """Replies for all four benchmarks and, for any logged request, which benchmark item it was about."""

    def __init__(self):
        self.rbench = pd.read_csv(RBENCH_TSV, sep='\t', keep_default_na=False, dtype={'answer': str})
        self.rb_model = ScriptedModel(self.rbench)
        self.remi = pd.read_csv(DEMO_DIR / f'{REMI}.tsv', sep='\t', dtype={'answer': str})
        self.remi_fragments = []            # (the question's longest text piece, index)
        self.remi_reply = {}
        for row in self.remi.to_dict('records'):
            piece = max(re.split(r'<image\d+>', row['question']), key=len).strip()[:40]
            self.remi_fragments.append((piece, int(row['index'])))
            answer = row['answer'].split(',')[-1].strip() if row['task'] == 'RefCoco' else row['answer']
            # Maps and IQ wrong (one parseable, one not); the rest right
            self.remi_reply[int(row['index'])] = {
                'Maps': json.dumps({'explanation': 'guess', 'answer': 'south'}),
                'IQ': 'I cannot tell from these pictures.'}.get(
                row['task'], json.dumps({'explanation': 'worked it out', 'answer': answer}))
        self.rococo = pd.read_csv(DEMO_DIR / f'{ROCOCO}.tsv', sep='\t')
        self.rococo_prompt, self.rococo_reply = {}, {}
        for row in self.rococo.to_dict('records'):
            item = {c: row[c] for c in Q.LETTERS if isinstance(row.get(c), str) and row[c]}
            self.rococo_prompt[Q.prompt_text({'question': row['question'], **item})] = int(row['index'])
            other = next(c for c in item if c not in (row['answer'], row['twin']))
            # a third right, a third the adversarial twin, a third another caption
            self.rococo_reply[int(row['index'])] = [row['answer'], row['twin'], other][int(row['index']) % 3]
        assert len(self.remi_fragments) == 13 and len(self.rococo_prompt) == 24
        self.force_failures = True

    def item_of(self, body) -> tuple[str, object]:
        text = _text(body)
        image = _first_image(body)
        if image is None:
            return 'judge', None
        m = re.search(r'vqa item=(\d)', text)
        if m:
            return RC, int(m.group(1))
        if Q.QUESTION in text:
            return ROCOCO, next(i for p, i in self.rococo_prompt.items() if p in text)
        for piece, index in self.remi_fragments:
            if piece in text:
                return REMI, index
        return RB, self.rb_model.classify(image)         # (pair_id, 'ref' | 'dis') from the image itself

    def reply_for(self, bench, key) -> str:
        if bench == RB:
            return model_output(self.rb_model.rows[key[0]], key[1])
        return {REMI: self.remi_reply, ROCOCO: self.rococo_reply}.get(bench, {}).get(key, 'cat')

    def __call__(self, body) -> str:
        bench, key = self.item_of(body)
        if bench == 'judge':
            prompt = _text(body)
            if PROBE_PROMPT in prompt:               # the launcher's one test call to the model
                return 'OK'
            return 'ready' if PREFLIGHT in prompt else judge_reply(prompt)
        if self.force_failures and FORCED[bench] == key:
            return ''
        return self.reply_for(bench, key)


# ------------------------------------------------------------------------------------- expectations
def rbench_rows(records, tmp: Path) -> list[dict]:
    """R-Bench per-item scores of these predictions with a perfect judge (the dataset's own protocol steps)."""
    items, _, _ = pair_rows(pd.DataFrame(records).astype(str), 'expected')
    scores, _ = run_protocol(items, judge_reply, 'official')

    def value(key):
        v = scores.get(key)
        return None if isinstance(v, str) else v
    return [{c: it[c] for c in ('pair_id', 'name', 'type', 'distortion', 'strength')}
            | {f'score_{k}': value(f"{it['pair_id']}|{k}") for k in ('ref', 'dis', 'com')} for it in items]


def remi_expected(play, predictions: dict) -> dict:
    rows = [{'index': r['index'], 'task': r['task'], 'answer': r['answer'],
             **remi_score.score_item(r['task'], predictions[int(r['index'])], r['answer'])}
            for r in play.remi.to_dict('records')]
    return remi_score.summarise(rows, 'interleaved')


def rococo_expected(play, predictions: dict, tmp: Path) -> dict:
    """The kit dialect's RoCOCO-MCQ evaluation of these predictions, in a folder of its own."""
    from vlmeval_ext.dataset.rococo_mcq import RoCOCOMCQ
    preds = play.rococo.drop(columns=['image']).assign(prediction=[predictions[int(i)] for i in play.rococo['index']])
    (tmp / 'expected').mkdir(exist_ok=True)
    path = tmp / 'expected' / f'M_{ROCOCO}.tsv'
    preds.to_csv(path, sep='\t', index=False)
    dataset = object.__new__(RoCOCOMCQ)
    dataset.dataset_name = ROCOCO
    dataset.evaluate(str(path))
    return json.loads((tmp / 'expected' / f'M_{ROCOCO}_score.json').read_text())


# ------------------------------------------------------------------------------------- running and reading
def command(tmp_path: Path, server) -> list[str]:
    cfg = loopback_model_config(server, {d: {'class': c, 'dataset': d} for d, c in CLASSES.items()},
                                retry=1, wait=0, timeout=2)
    # Two attempts per judge call (the one test call of the judge before evaluating gets three).
    protocol = {'judge_mode': 'official', 'judge_retries': 1, 'judge_backoff': 0}
    return [sys.executable, str(REPO_ROOT / 'run.py'), '--config', write_config(tmp_path, cfg),
            '--work-dir', str(tmp_path / 'out'), '--judge', 'loopback-judge', '--judge-timeout', '2',
            '--api-nproc', '8', '--judge-args', json.dumps(protocol), '--reuse']


def run(cmd, env) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)


def out_file(tmp_path: Path, data: str, suffix: str) -> Path:
    return kit_output(tmp_path / 'out' / MODEL, f'{MODEL}_{data}{suffix}')


def predictions(tmp_path: Path, data: str) -> pd.DataFrame:
    return pd.read_csv(out_file(tmp_path, data, '.tsv'), sep='\t', dtype={'prediction': str}, keep_default_na=False)


def score_json(tmp_path: Path, data: str) -> dict:
    return json.loads(out_file(tmp_path, data, '_score.json').read_text())


def cache_keys(tmp_path: Path) -> list[tuple[str, str]]:
    lines = out_file(tmp_path, RB, '_loopback-judge_verdicts.jsonl').read_text().splitlines()
    return [(json.loads(line)['prompt_sha256'], json.loads(line)['slot']) for line in lines if line.strip()]


def stored_verdicts(tmp_path: Path) -> int:
    """Verdicts in the run's verdict store (kit_environment points $VLMEVAL_EXT_CACHE into tmp_path): one row per
    (judge, endpoint, prompt, call), so a call asked twice adds no row."""
    import sqlite3
    with sqlite3.connect(tmp_path / 'verdict-cache' / STORE_FILE) as db:
        return db.execute('SELECT COUNT(*) FROM verdicts').fetchone()[0]


def key_of_row(data: str, row: dict):
    if data == RB:
        return int(row['pair_id']), row['variant']
    if data == RC:
        return int(row['index']) % INDEX_SLOT
    return int(row['index'])


def model_log(play, log) -> list[tuple[str, object, str, str | None]]:
    """(benchmark, item key, outcome, reply) of every model request."""
    return [(*play.item_of(r.body), r.outcome, r.reply) for r in log if r.n_images]


def judge_log(log) -> list:
    return [r for r in log if r.n_images == 0 and PREFLIGHT not in r.prompt and PROBE_PROMPT not in r.prompt]


def shows(summary: str, key: str, n: int) -> bool:
    """The end-of-run summary prints `key=n`, `key: n` or a table row `key   n`."""
    return re.search(rf'(^|[ ;\]]){re.escape(key)}(=|: |\s+){n}(;|$)', summary, re.M) is not None


# ------------------------------------------------------------------------------------------------- the test
def test_random_faults_across_all_benchmarks_counted_listed_retried_and_no_key_leaks(tmp_path, monkeypatch):
    # test_rbench_e2e's module fixture makes its scripted judge refuse one item; here every verdict is given
    monkeypatch.setitem(BROKEN, 'marker', None)
    play = Play()
    env = kit_environment(tmp_path, None)
    lmu = Path(env['LMUData'])
    base = textvqa_tsv(3)
    base.to_csv(lmu / 'TextVQA_VAL.tsv', sep='\t', index=False)
    write_kit_tsv(build_rc_frame(base, [26], [1, 3], progress=False), lmu / f'{RC}.tsv')   # 3 items x 3 rows

    server = LoopbackServer(seed=8).start()
    server.default = play
    server.fault_rate, server.fault_kinds, server.timeout_sleep = 0.2, FAULT_KINDS, 2.5
    server.rejection_rule = FirstJudgePromptFails()
    env['OPENAI_API_BASE'] = server.chat_url
    assert env['OPENAI_API_KEY'] == FAKE_KEY
    cmd = command(tmp_path, server)
    try:
        t0 = time.time()
        first = run(cmd, env)
        first_wall = time.time() - t0
        first_log = list(server.log)
        # ---- run 1 finishes; the launcher exits 0 (an inference or judge failure is counted, not an error)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        assert '[vlmeval-ext] FAILED' not in first.stderr
        injected = Counter(r.outcome for r in first_log if r.outcome not in ('ok', 'rejected'))
        assert set(injected) == set(FAULT_KINDS), injected
        models = model_log(play, first_log)
        assert {b for b, *_ in models} == {RB, REMI, ROCOCO, RC}
        sent = {}                              # (bench, key) -> replies the server really sent (ok or garbage)
        for bench, key, outcome, reply in models:
            if reply is not None:
                sent.setdefault((bench, key), set()).add(reply.strip())     # the kit strips replies
        garbage_sent = {reply for *_, outcome, reply in models if outcome == 'garbage'}

        failed, garbage_kept, preds1 = {}, {}, {}
        for data in CLASSES:
            pred = predictions(tmp_path, data)
            preds1[data] = pred
            failed[data], garbage_kept[data] = set(), set()
            for row in pred.to_dict('records'):
                key = key_of_row(data, row)
                if FAIL_MSG in row['prediction']:
                    failed[data].add(key if data != RC else int(row['index']))
                else:       # every prediction is a reply the server sent for THAT item
                    assert row['prediction'] in sent.get((data, key), set()), (data, key, row['prediction'])
                    if row['prediction'] in garbage_sent:
                        garbage_kept[data].add(key if data != RC else int(row['index']))
        for data in CLASSES:
            assert failed[data], data          # at least the forced one

        # ---- R-Bench: a score is the perfect judge's, or excluded and counted; failed rows are listed
        rb = score_json(tmp_path, RB)
        fails = rb['judge']['failures']
        assert fails['inference_failed_rows'] == len(failed[RB])
        listed = {(int(pred_row['pair_id']), pred_row['variant']) for pred_row in preds1[RB].to_dict('records')
                  if any(str(i) == str(pred_row['index']) for i, _ in fails['failed_rows'])}
        assert listed == failed[RB]
        perfect = rbench_rows(preds1[RB].to_dict('records'), tmp_path)       # one row per pair_id, in order
        got = pd.read_csv(out_file(tmp_path, RB, '_scores.csv')).to_dict('records')
        assert [r['name'] for r in got] == [r['name'] for r in perfect]
        excluded = Counter()
        for row, want in zip(got, perfect):
            pid = want['pair_id']
            for kind in ('ref', 'dis', 'com'):
                value = row[f'score_{kind}']
                if pd.isna(value):
                    excluded[f'score_{kind}'] += 1
                    needs = {'ref': ['ref'], 'dis': ['dis'], 'com': ['ref', 'dis']}[kind]
                    infer = any((pid, v) in failed[RB] for v in needs)
                    judged = f'{pid}|{kind}' in rb['judge']['failed_keys']
                    assert infer or judged, (pid, kind)      # every gap has a listed reason
                else:
                    assert value == pytest.approx(want[f'score_{kind}'], abs=1e-9), (pid, kind)
        assert dict(excluded) == {k: v for k, v in fails['excluded_scores'].items() if v}
        judge_failed = fails['judge_failed_scores']
        assert judge_failed == len(rb['judge']['failed_keys']) > 0
        rb_judge = judge_log(first_log)
        keys1 = cache_keys(tmp_path)
        # every verdict the judge sent (ok or garbage: a 200 reply) is on disk once: 0 lost
        answered1 = sum(1 for r in rb_judge if r.outcome in ('ok', 'garbage'))
        assert answered1 == len(keys1) == len(set(keys1)) == stored_verdicts(tmp_path)

        # ---- ReMI: failure text = inference failure (excluded, counted, listed), never parsed as an answer
        remi = score_json(tmp_path, REMI)
        remi_items = pd.read_csv(out_file(tmp_path, REMI, '_items.tsv'), sep='\t')
        assert set(remi_items.loc[remi_items.status == 'inference_failure', 'index']) == failed[REMI]
        assert remi['counts']['inference_failures'] == len(failed[REMI])
        failed_remi = remi_items.status == 'inference_failure'
        assert remi_items.loc[failed_remi, ['official', 'lenient']].isna().all().all()
        for index in garbage_kept[REMI]:            # garbage from the model: wrong, counted as a parse failure
            row = remi_items[remi_items['index'] == index].iloc[0]
            assert row['status'] in ('no_json', 'not_object') and not row['lenient'] and not row['official']

        # ---- RoCOCO: failure text listed (how = inference_failed) and counted
        roc = score_json(tmp_path, ROCOCO)
        roc_items = pd.read_csv(out_file(tmp_path, ROCOCO, '_items.tsv'), sep='\t')
        assert set(roc_items.loc[roc_items.how == 'inference_failed', 'index']) == failed[ROCOCO]
        assert roc['inference_failed'] == len(failed[ROCOCO])
        assert roc_items.loc[roc_items.how == 'inference_failed', 'choice'].isna().all()
        for index in garbage_kept[ROCOCO]:
            assert roc_items.loc[roc_items['index'] == index, 'how'].iloc[0] == 'unparsed'

        # ---- TextVQA_VAL-RC: failed rows not handed to the kit's scorer, counted per variant
        rc = score_json(tmp_path, RC)
        assert sum(f['inference_failed'] for f in rc['failures'].values()) == len(failed[RC])

        # ---- the end-of-run summary shows every benchmark's failure count
        from vlmeval_ext.records.summary import format_score_file
        summaries = {d: format_score_file(out_file(tmp_path, d, '_score.json')) for d in CLASSES}
        assert shows(summaries[RB], 'failures.inference_failed_rows', len(failed[RB]))
        assert shows(summaries[RB], 'failures.judge_failed_scores', judge_failed)
        assert shows(summaries[REMI], 'inference_failures', len(failed[REMI]))
        assert shows(summaries[ROCOCO], 'inference_failed', len(failed[ROCOCO]))
        assert shows(summaries[RC], 'failed_rows', len(failed[RC]))

        # ---- run 2: the same command, faults off: only what failed is asked again
        server.fault_rate, play.force_failures, server.rejection_rule = 0.0, False, None
        server.reset_log()
        second = run(cmd, env)
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
        second_log = list(server.log)
        asked = {}
        for bench, key, _, _ in model_log(play, second_log):
            asked.setdefault(bench, []).append(key)
        for data in CLASSES:
            again = sorted(asked.get(data, []), key=str)
            want = sorted(failed[data], key=str) if data != RC else sorted(k % INDEX_SLOT for k in failed[RC])
            assert again == want, (data, again, want)        # each failed item once, nothing else
        # No verdict asked twice: each judge reply of run 2 is a new row of the verdict store (a call asked again
        # would add none). Counted in the store, not in the work dir's call log: an upstream checkout starts a new
        # run folder on --reuse, so that log is not one file across both runs.
        second_judge = judge_log(second_log)
        assert all(r.outcome == 'ok' for r in second_judge)
        assert stored_verdicts(tmp_path) - answered1 == len(second_judge) > 0

        # ---- final scores = a clean run's (garbage the model said stays its answer)
        final = {d: predictions(tmp_path, d) for d in CLASSES}
        for data, pred in final.items():
            for row in pred.to_dict('records'):
                key = key_of_row(data, row)
                assert FAIL_MSG not in row['prediction']
                garbage = (key if data != RC else int(row['index'])) in garbage_kept[data]
                assert row['prediction'] == play.reply_for(data, key).strip() or garbage, (data, key)
        rb = score_json(tmp_path, RB)
        rb_records = [{**r, 'prediction': p} for r, p in zip(
            play.rbench.drop(columns=['image']).to_dict('records'),
            final[RB].set_index('index').loc[play.rbench['index'], 'prediction'])]
        _assert_scores(rb, rbench_rows(rb_records, tmp_path))
        assert rb['judge']['failures']['judge_failed_scores'] == 0 and rb['judge']['failures']['failed_rows'] == []
        remi = score_json(tmp_path, REMI)
        want = remi_expected(play, dict(zip(final[REMI]['index'].astype(int), final[REMI]['prediction'])))
        assert remi['accuracy'] == want['accuracy'] and remi['counts'] == want['counts']
        assert remi['counts']['inference_failures'] == 0
        roc = score_json(tmp_path, ROCOCO)
        want = rococo_expected(play, dict(zip(final[ROCOCO]['index'].astype(int), final[ROCOCO]['prediction'])),
                           tmp_path)
        for k in ('accuracy', 'twin_rate', 'unparsed', 'inference_failed'):
            assert roc[k] == pytest.approx(want[k]), k
        rc = score_json(tmp_path, RC)
        assert rc['failed_rows'] == 0
        for tag, part in rc['per_variant'].items():
            slot_rows = [r for r in final[RC].to_dict('records')
                         if (r['variant'] == 'ref') == (tag == 'ref') and (tag == 'ref' or tag == 'd26_s{}'.format(
                             int(r['strength'])))]
            assert part['mean'] == pytest.approx(sum(r['prediction'] == 'cat' for r in slot_rows) / len(slot_rows))
    finally:
        server.stop()

    # ---- secrets: no trace of the key in any file of the run (xlsx members too) or on the console
    assert first_log and all(r.had_auth for r in first_log + second_log)     # the key was really sent
    files = [p for p in tmp_path.rglob('*') if p.is_file()]
    assert {'.json', '.jsonl', '.tsv', '.csv'} <= {p.suffix for p in files}     # predictions: TSV (run.py)
    assert leaks(tmp_path) == []
    for proc in (first, second):
        for stream in (proc.stdout, proc.stderr):
            assert not any(k in stream for k in KEY_PARTS)

    n_items = {d: len(preds1[d]) for d in CLASSES}
    print(f'\n[figures] all benchmarks, 20 % faults: run 1 {len(first_log)} requests in {first_wall:.0f} s '
          f'({sum(1 for r in first_log if r.n_images)} model, {len(rb_judge)} judge); injected {dict(injected)} '
          f'({sum(injected.values())} faults); model rows per benchmark {n_items}; inference failures counted '
          f'and listed {{{", ".join(f"{d}: {len(failed[d])}" for d in CLASSES)}}}; R-Bench judge-failed scores '
          f'{judge_failed} (of {len(rb_judge)} judge requests); garbage model replies kept as (wrong) answers '
          f'{{{", ".join(f"{d}: {len(garbage_kept[d])}" for d in CLASSES)}}}; verdicts on disk {len(keys1)} '
          f'= the judge\'s 200 replies (0 lost)')
    print(f'[figures] rerun, faults off: {len(second_log)} requests = '
          f'{sum(len(v) for v in asked.values())} predictions (= the failed ones) + {len(second_judge)} judge '
          f'calls (= verdicts not on disk); duplicate calls 0; scores = clean run; '
          f'{len(files)} files + console searched for the key: 0 hits')
