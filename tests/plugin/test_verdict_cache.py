"""The verdict cache shared across runs, through the kit's evaluate() with the loopback server as the judge.

R-Bench-Full_DEMO (24 real items, LLaVA-1.5's real outputs on them) and GRAB_DEMO are evaluated in process (the
kit is imported once); every judge request is counted at the server. The cache lives in VLMEVAL_EXT_CACHE (a
fresh folder per test, see conftest.py).
"""
from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from vlmeval_ext import judging
from helpers.fixtures import llava15_items
from helpers.kit_run import FAKE_KEY
from helpers.loopback_server import LoopbackServer

RB_MARK = 'Please only provide the result in the following format: Score:'
GRAB_MARK = 'A generative model has been asked this question'
BENCHMARKS = Path(__file__).resolve().parents[2] / 'benchmarks'


def _deterministic_judge():
    spec = importlib.util.spec_from_file_location('rbench_judge_calls', BENCHMARKS / 'rbench_judge_calls.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.deterministic_judge


def _prompt(body) -> str:
    content = body['messages'][-1]['content']
    return content if isinstance(content, str) else ' '.join(p.get('text', '') for p in content)


def _grab_judge(body) -> str:
    out = _prompt(body).split('The output from the model answering the question is: "')[1].split('"\n')[0]
    return out.split('answer is ')[-1].rstrip('.') if 'answer is ' in out else out


def _start_judge(host: str = '127.0.0.1') -> LoopbackServer:
    server = LoopbackServer(host=host).start()
    rbench = _deterministic_judge()
    server.script(RB_MARK, lambda body: rbench(_prompt(body)))
    server.script(GRAB_MARK, _grab_judge)
    server.default = 'ready'
    return server


@pytest.fixture(scope='module')
def kit_classes():
    import vlmeval.dataset  # noqa: F401
    from vlmeval_ext.datasets import GRAB
    from vlmeval_ext.datasets import RBenchFull
    return {'R-Bench-Full_DEMO': RBenchFull, 'GRAB_DEMO': GRAB}


@pytest.fixture
def judge(monkeypatch):
    server = _start_judge()
    monkeypatch.setenv('OPENAI_API_BASE', server.chat_url)
    monkeypatch.setenv('OPENAI_API_KEY', FAKE_KEY)
    try:
        yield server
    finally:
        server.stop()


def rbench_predictions(folder: Path, fixtures_dir: Path) -> Path:
    """R-Bench-Full_DEMO predictions with LLaVA-1.5's real outputs for those items."""
    from vlmeval_ext.prepare.demos import RBENCH_DEMO_TSV as DEMO_TSV
    data = pd.read_csv(DEMO_TSV, sep='\t', keep_default_na=False, dtype={'answer': str}).drop(columns=['image'])
    items = llava15_items(fixtures_dir / 'rbench')
    data['prediction'] = [items[int(p)][f'pred_{v}'] for p, v in zip(data['pair_id'], data['variant'])]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / 'LLaVA_R-Bench-Full_DEMO.tsv'
    data.to_csv(path, sep='\t', index=False)
    return path


def grab_predictions(folder: Path) -> Path:
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
    data = pd.read_csv(DEMO_TSV, sep='\t', dtype={'answer': str}).drop(columns=['image'])
    data['prediction'] = [f'Reading the plot, the answer is {a}.' if i % 2 else 'It is 12345'
                          for i, a in enumerate(data['answer'])]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / 'LoopbackGPT_GRAB_DEMO.tsv'
    data.to_csv(path, sep='\t', index=False)
    return path


def evaluate(kit_classes, data: str, path: Path, **judge_args) -> dict:
    kwargs = {'model': 'loopback-judge', 'nproc': 8, 'judge_backoff': 0.02, **judge_args}
    kit_classes[data].for_predictions(data, path).evaluate(str(path), **kwargs)
    tag = '_efficient' if judge_args.get('judge_mode') == 'efficient' else ''
    return json.loads(path.with_name(f'{path.stem}{tag}_score.json').read_text())


def store_rows() -> int:
    return judging.VerdictStore(judging.cache_dir() / judging.STORE_FILE).count()


# ------------------------------------------------------------------------------------------- R-Bench
def test_same_predictions_in_a_new_work_dir_make_no_judge_call(kit_classes, judge, tmp_path, fixtures_dir):
    first = rbench_predictions(tmp_path / 'run1', fixtures_dir)
    score1 = evaluate(kit_classes, 'R-Bench-Full_DEMO', first, judge_mode='official')
    asked = judge.count(RB_MARK)
    paid = score1['judge_calls']
    assert asked == paid['made'] == score1['judge']['calls_made'] > 300 and paid['reused_from_cache'] == 0
    # Another work dir (a colleague's copy of the predictions, a new version of the package): 0 calls.
    second = tmp_path / 'run2' / first.name
    second.parent.mkdir()
    shutil.copyfile(first, second)
    judge.reset_log()
    score2 = evaluate(kit_classes, 'R-Bench-Full_DEMO', second, judge_mode='official')
    assert judge.count(RB_MARK) == 0
    assert score2['judge_calls']['made'] == 0 and score2['judge_calls']['reused_from_cache'] == asked
    # settled from the cache before the kit's judging loop, and not counted twice as kept in the progress file
    assert score2['judge_calls']['kept_from_progress_file'] == 0 and score2['judge']['calls_cached'] == asked
    assert score2['absolute'] == score1['absolute'] and score2['relative'] == score1['relative']
    scores = [pd.read_csv(p.with_name(p.stem + '_scores.csv')) for p in (first, second)]
    pd.testing.assert_frame_equal(scores[0], scores[1])
    assert (Path(os.environ[judging.CACHE_ENV]) / judging.STORE_FILE).is_file() and store_rows() == asked
    # The work dir's call log holds the calls paid for there, once each.
    log = [json.loads(line) for line in first.with_name(f'{first.stem}_loopback-judge_verdicts.jsonl').open()]
    assert len(log) == asked and len({(r['prompt_sha256'], r['slot']) for r in log}) == asked
    assert not second.with_name(f'{second.stem}_loopback-judge_verdicts.jsonl').exists()


def test_one_changed_prediction_asks_only_that_items_calls(kit_classes, judge, tmp_path, fixtures_dir):
    path = rbench_predictions(tmp_path, fixtures_dir)
    evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='official')
    data = pd.read_csv(path, sep='\t', keep_default_na=False, dtype={'answer': str})
    row = data.index[(data['type'] == 'VQA') & (data['variant'] == 'dis')][0]
    data.loc[row, 'prediction'] = 'a changed answer nobody gave before'
    data.to_csv(path, sep='\t', index=False)
    judge.reset_log()
    score = evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='official')
    asked = [r.prompt for r in judge.log if RB_MARK in r.prompt]
    # dis and com of that item: 5 + 5 official calls, each about the changed output; nothing else.
    assert len(asked) == 10 and all('a changed answer nobody gave before' in p for p in asked)
    assert score['judge_calls']['made'] == 10


def test_cache_false_asks_every_call_and_writes_nothing(kit_classes, judge, tmp_path, fixtures_dir):
    """`cache: false` turns off the per-user verdict cache; an evaluation still resumes from its own progress file
    beside the predictions (the kit's way), so the second evaluation reads a copy in another folder."""
    path = rbench_predictions(tmp_path / 'a', fixtures_dir)
    evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='efficient')
    asked, rows = judge.count(RB_MARK), store_rows()
    judge.reset_log()
    path = rbench_predictions(tmp_path / 'b', fixtures_dir)
    score = evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='efficient', cache=False)
    assert judge.count(RB_MARK) == asked > 0 and store_rows() == rows
    assert score['judge_calls']['reused_from_cache'] == 0 and score['judge_calls']['made'] == asked
    assert score['judge_calls']['cache'] == 'off'
    with pytest.raises(ValueError, match='"cache" must be true or false'):
        evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='efficient', cache='maybe')


def test_same_judge_name_at_another_endpoint_reuses_nothing(kit_classes, judge, tmp_path, fixtures_dir,
                                                            monkeypatch):
    path = rbench_predictions(tmp_path, fixtures_dir)
    evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='efficient')
    asked = judge.count(RB_MARK)
    other = _start_judge(host='localhost')     # same --judge name, another --judge-base-url
    try:
        monkeypatch.setenv('OPENAI_API_BASE', other.chat_url)
        score = evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='efficient')
        assert other.count(RB_MARK) == asked and score['judge_calls']['reused_from_cache'] == 0
        assert score['judge']['calls_cached'] == 0      # nor the first run's progress file beside the predictions
    finally:
        other.stop()


def test_judge_base_url_of_another_server_on_the_same_host_reuses_nothing(kit_classes, judge, tmp_path):
    """`--judge-base-url` (the kit's judge argument `api_base`) naming another server, same --judge name, same
    host: every verdict is asked there; the first server's verdicts are not reused."""
    path = grab_predictions(tmp_path)
    first = evaluate(kit_classes, 'GRAB_DEMO', path, api_base=judge.chat_url)
    asked = judge.count(GRAB_MARK)
    assert asked == first['judge_calls']['made'] == first['llm_extracted']['counts']['calls_made'] > 0
    other = _start_judge()                     # 127.0.0.1 again, another port
    try:
        judge.reset_log()
        second = evaluate(kit_classes, 'GRAB_DEMO', path, api_base=other.chat_url)
        assert other.count(GRAB_MARK) == asked and judge.count(GRAB_MARK) == 0
        assert second['llm_extracted']['counts']['calls_cached'] == 0
        assert second['judge_calls']['reused_from_cache'] == 0
        again = evaluate(kit_classes, 'GRAB_DEMO', path, api_base=judge.chat_url)   # back to the first: all kept
        assert judge.count(GRAB_MARK) == 0 and again['llm_extracted']['counts']['calls_cached'] == asked
    finally:
        other.stop()


def test_efficient_mode_reuses_official_verdicts(kit_classes, judge, tmp_path, fixtures_dir):
    path = rbench_predictions(tmp_path, fixtures_dir)
    official = evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='official')
    judge.reset_log()
    efficient = evaluate(kit_classes, 'R-Bench-Full_DEMO', path, judge_mode='efficient')
    assert judge.count(RB_MARK) == 0 and efficient['judge_calls']['made'] == 0
    assert efficient['judge_calls']['reused_from_cache'] == efficient['judge']['calls'] > 0
    assert efficient['judge']['calls'] < official['judge']['calls'] / 2


# ------------------------------------------------------------------------------------------- GRAB
def test_grab_llm_extracted_uses_the_same_cache(kit_classes, judge, tmp_path):
    first = grab_predictions(tmp_path / 'a')
    score1 = evaluate(kit_classes, 'GRAB_DEMO', first)
    asked = judge.count(GRAB_MARK)
    assert asked == score1['judge_calls']['made'] > 0
    second = grab_predictions(tmp_path / 'b')
    judge.reset_log()
    score2 = evaluate(kit_classes, 'GRAB_DEMO', second)
    assert judge.count(GRAB_MARK) == 0 and score2['judge_calls']['reused_from_cache'] == asked
    assert score2['llm_extracted']['Overall'] == score1['llm_extracted']['Overall']
    assert store_rows() == asked


# ------------------------------------------------------------------------------------------- the store
def test_cache_location_is_documented_and_overridable(tmp_path, monkeypatch):
    monkeypatch.setenv(judging.CACHE_ENV, str(tmp_path / 'mine'))
    assert judging.cache_dir() == tmp_path / 'mine'
    store = judging.shared_store()
    assert store.path == tmp_path / 'mine' / judging.STORE_FILE and store.path.is_file()
    monkeypatch.delenv(judging.CACHE_ENV)
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
    assert judging.cache_dir() == tmp_path / 'xdg' / 'vlmeval-ext'
    monkeypatch.delenv('XDG_CACHE_HOME')
    assert judging.cache_dir() == Path.home() / '.cache' / 'vlmeval-ext'
    with sqlite3.connect(str(tmp_path / 'mine' / judging.STORE_FILE)) as db:
        assert db.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'


def test_an_unusable_cache_folder_is_one_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / 'a-file'
    blocker.write_text('not a folder')
    monkeypatch.setenv(judging.CACHE_ENV, str(blocker))
    with pytest.raises(judging.VerdictCacheError, match='VLMEVAL_EXT_CACHE.*"cache": false'):
        judging.shared_store()


def _key(text: str) -> tuple:
    import hashlib
    return ('judge', 'h:1/v1', 'params', hashlib.sha256(text.encode()).hexdigest(), 1)


def _writer(path: str, worker: int, n: int, queue) -> None:
    store = judging.VerdictStore(path)
    kept = {}
    for i in range(n):
        key = i if i % 2 else n + worker * n + i           # even i: this writer's own keys; odd i: shared keys
        kept[key] = store.put(_key(f'prompt {key}'), f'reply {key} by {worker}')
    queue.put((worker, kept))


def test_two_processes_write_at_once_and_agree(tmp_path):
    path = str(tmp_path / judging.STORE_FILE)
    n = 600
    ctx = multiprocessing.get_context('fork')
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, n, queue)) for w in range(3)]
    for p in procs:
        p.start()
    kept = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    store = judging.VerdictStore(path)
    assert store.count() == 3 * (n // 2) + n // 2        # own keys of each writer + the shared ones once
    for key in range(1, n, 2):                           # every writer went on with the one stored verdict
        stored = store.get(_key(f'prompt {key}'))
        assert {kept[w][key] for w in kept} == {stored}
