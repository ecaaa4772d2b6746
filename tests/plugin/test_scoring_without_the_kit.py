"""`vlmeval-ext eval` of a benchmark scored by rules (GRAB without an LLM judge, ReMI, RoCOCO-MCQ, RoCOCO retrieval)
does not import the kit: it runs the pure function of `dataset/utils/<bench>.py` that the kit-dialect `evaluate`
wraps, and writes its tables as the kit's `dump` does. Here both paths score the same predictions (answers right,
wrong, empty, the kit's failure text; for retrieval, the embeddings of a real-annotation gallery) and every file
they write must have the same bytes; the kit-free path must not import `vlmeval` and the kit path must. R-Bench is
scored without the kit with the offline judge, and with an LLM judge once every verdict it needs is cached."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from helpers.kit_run import REPO_ROOT

FAIL = 'Failed to obtain answer via API.'
PROBE = ('import json, sys\nfrom vlmeval_ext.cli.main import main\ncode = 0\ntry:\n    main(sys.argv[1:])\n'
         'except SystemExit as e:\n    code = e.code or 0\n'
         'print(json.dumps({"code": code, "vlmeval": "vlmeval" in sys.modules, "scipy": "scipy" in sys.modules, '
         '"pyplot": "matplotlib.pyplot" in sys.modules}), file=sys.stderr)\n')
# a mean of 0/1 items (GRAB, RoCOCO-MCQ) gets its interval and exact McNemar power from numpy alone, and no plot
# goes through pyplot: neither is imported by their evaluation
NO_SCIPY = ('GRAB_DEMO', 'RoCOCO-MCQ-same_concept_DEMO')
# the files each benchmark's evaluate writes (the plots are drawn from the score file: same code on both paths)
WRITTEN = {'GRAB_DEMO': ('_score.json', '_acc.csv', '_items.tsv'),
           'ReMI_DEMO': ('_score.json', '_items.tsv', '_tasks.csv'),
           'RoCOCO-MCQ-same_concept_DEMO': ('_score.json', '_acc.csv', '_items.tsv'),
           'RoCOCO-I2T-same_concept': ('_score.json', '_acc.csv', '_ranks.tsv')}


def _retrieval_predictions(folder, dataset: str, sources) -> str:
    """An embedding model's predictions for a gallery of real RoCOCO annotation entries (generated images)."""
    from helpers.rococo_sources import fake_predictions
    from vlmeval_ext.prepare import rococo
    preds, _ = fake_predictions(rococo.frame_for(dataset, *sources))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f'mymodel_{dataset}.tsv'
    preds.to_csv(path, sep='\t', index=False)
    return str(path)


def _predictions(folder, dataset: str) -> str:
    from vlmeval_ext.registry import benchmark_of
    data = pd.read_csv(benchmark_of(dataset).demo_file(dataset), sep='\t', dtype=str, keep_default_na=False)
    data = data.drop(columns=[c for c in ('image', 'image_path') if c in data])
    kinds = ['right', 'wrong', 'empty', 'failed', 'right', 'prose']
    predictions = []
    for k, answer in enumerate(data['answer']):
        kind = kinds[k % len(kinds)]
        predictions.append({'right': answer, 'wrong': f'{answer}9' if answer else 'x', 'empty': '', 'failed': FAIL,
                            'prose': f'The answer is {answer}.'}[kind])
    data['prediction'] = predictions
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f'mymodel_{dataset}.tsv'
    data.to_csv(path, sep='\t', index=False)
    return str(path)


def _eval(pred: str, dataset: str, lmu, extra=()) -> dict:
    proc = subprocess.run([sys.executable, '-c', PROBE, 'eval', '--data', dataset, '--pred', pred, *extra],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'LMUData': str(lmu)})
    last = [line for line in proc.stderr.splitlines() if line.startswith('{"code"')]
    assert last, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(last[-1])
    assert result['code'] == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return result


@pytest.mark.kit
@pytest.mark.slow
@pytest.mark.parametrize('dataset', sorted(WRITTEN))
def test_eval_without_the_kit_writes_the_bytes_the_kit_dialect_evaluate_writes(dataset, tmp_path, fixtures_dir):
    from vlmeval_ext.registry import benchmark_of, plugin_class_of
    free, kit = tmp_path / 'free', tmp_path / 'kit'
    retrieval = dataset.startswith('RoCOCO-I2T')
    if retrieval:
        from helpers.rococo_sources import write_sources
        pred = _retrieval_predictions(free, dataset, write_sources(fixtures_dir, tmp_path))
    else:
        pred = _predictions(free, dataset)
    kit.mkdir()
    shutil.copy(pred, kit)
    run = _eval(pred, dataset, tmp_path)
    assert (run['code'], run['vlmeval'], run['pyplot']) == (0, False, False)
    if dataset in NO_SCIPY:
        assert not run['scipy']

    import vlmeval.dataset  # noqa: F401  (the kit, as run.py loads it)
    from vlmeval_ext.evaluation import evaluate
    cls = plugin_class_of(benchmark_of(dataset))
    kit_pred = str(kit / os.path.basename(pred))
    os.environ['LMUData'] = str(tmp_path)
    try:
        evaluate(cls.for_predictions(dataset, kit_pred), benchmark_of(dataset), kit_pred, {})
    finally:
        os.environ.pop('LMUData')
    assert 'vlmeval' in sys.modules
    for suffix in WRITTEN[dataset]:
        name = f'mymodel_{dataset}{suffix}'
        assert (free / name).read_bytes() == (kit / name).read_bytes(), name
    score = json.loads((free / f'mymodel_{dataset}_score.json').read_text())
    assert 'ci95' in score
    if retrieval:                   # the 5 images and 51 captions of the gallery; R@K in percent
        assert (score['n_images'], score['n_texts']) == (5, 51) and 0 <= score['metrics']['R@1'] <= 100
    else:
        assert score['counts']['inference_failures'] > 0 and score['counts']['empty'] > 0
        assert 'coverage' in score


@pytest.mark.slow
def test_grab_with_the_offline_judge_is_scored_without_the_kit_and_says_llm_extracted_was_skipped(tmp_path):
    pred = _predictions(tmp_path / 'p', 'GRAB_DEMO')
    run = _eval(pred, 'GRAB_DEMO', tmp_path, ['--judge', 'offline'])
    assert (run['code'], run['vlmeval'], run['scipy']) == (0, False, False)
    score = json.loads((tmp_path / 'p' / 'mymodel_GRAB_DEMO_score.json').read_text())
    assert 'llm_extracted' not in score
    assert any('llm_extracted: skipped (--judge offline' in note for note in score['notes'])


def test_only_an_llm_judge_or_a_benchmark_without_rules_needs_the_kit(tmp_path):
    from vlmeval_ext.evaluation import RuleScoring, without_the_kit
    from vlmeval_ext.plugin.rbench import RBenchWithoutTheKit
    from vlmeval_ext.registry import benchmark_of
    grab, remi, rbench = (benchmark_of(n) for n in ('GRAB', 'ReMI', 'R-Bench-Full'))
    mcq, retrieval = benchmark_of('RoCOCO-MCQ-same_concept'), benchmark_of('RoCOCO-T2I-mix')
    pred = str(tmp_path / 'M_D.tsv')

    def free(record, kwargs):
        return without_the_kit(record, 'D', pred, kwargs)
    assert isinstance(free(grab, {}), RuleScoring) and isinstance(free(grab, {'model': 'offline'}), RuleScoring)
    assert free(grab, {'model': 'gpt-4o-mini'}) is None
    assert isinstance(free(remi, {'model': 'gpt-4o-mini'}), RuleScoring)
    assert isinstance(free(mcq, {'model': 'gpt-4o-mini'}), RuleScoring) and free(retrieval, {}) is not None
    # R-Bench: the offline judge needs no kit; an LLM judge the kit never built (no predictions, no verdicts) does
    assert isinstance(free(rbench, {'model': 'offline'}), RBenchWithoutTheKit)
    assert free(rbench, {'model': 'gpt-4o-mini'}) is None and free(rbench, {'model': 'exact_matching'}) is None


def _rbench_predictions(folder) -> str:
    from vlmeval_ext.prepare.demos import RBENCH_DEMO_TSV
    data = pd.read_csv(RBENCH_DEMO_TSV, sep='\t', dtype=str, keep_default_na=False).drop(columns=['image'])
    data['prediction'] = [('A', 'yes', '', FAIL, 'A dog on a sofa.')[k % 5] for k in range(len(data))]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / 'mymodel_R-Bench-Full_DEMO.tsv'
    data.to_csv(path, sep='\t', index=False)
    return str(path)


@pytest.mark.kit
@pytest.mark.slow
def test_rbench_with_every_verdict_cached_is_scored_without_the_kit_and_writes_what_the_kit_path_writes(tmp_path):
    """The first evaluation imports the kit, which builds the judge and asks it; the same predictions in another
    folder (no progress file) are then scored from the verdict cache alone: no kit, no call (not even the test
    call), the same per-item scores and robustness table. Other inputs to the kit's build_judge (another endpoint,
    an environment variable it reads) or the cache off send the evaluation back to the kit."""
    from helpers.kit_run import FAKE_KEY
    from helpers.loopback_server import LoopbackServer
    server, other = LoopbackServer().start(), LoopbackServer().start()
    server.default = other.default = '1'                # a verdict every scale reads
    os.environ['OPENAI_API_KEY'] = FAKE_KEY
    try:
        judge = ['--judge', 'loopback-judge', '--judge-base-url', server.base_url]
        first = _eval(_rbench_predictions(tmp_path / 'a'), 'R-Bench-Full_DEMO', tmp_path, judge)
        asked = len(server.log)
        assert first['vlmeval'] and asked > 24
        again = _eval(_rbench_predictions(tmp_path / 'b'), 'R-Bench-Full_DEMO', tmp_path, judge)
        assert (again['code'], again['vlmeval']) == (0, False) and len(server.log) == asked
        for suffix in ('_scores.csv', '_robustness.csv'):
            name = f'mymodel_R-Bench-Full_DEMO{suffix}'
            assert (tmp_path / 'a' / name).read_bytes() == (tmp_path / 'b' / name).read_bytes(), name
        a, b = (json.loads((tmp_path / f / 'mymodel_R-Bench-Full_DEMO_score.json').read_text()) for f in 'ab')
        for key in ('absolute', 'relative', 'counts', 'failed', 'coverage', 'ci95'):
            assert a[key] == b[key], key
        assert a['judge_calls']['made'] == asked - 1 and b['judge_calls']['made'] == 0      # less the test call
        assert b['judge_calls']['reused_from_cache'] == a['judge_calls']['made']
        assert b['judge_calls']['parameters_sha256'] == a['judge_calls']['parameters_sha256']
        assert b['judge_calls']['endpoint'] == a['judge_calls']['endpoint']
        assert a['judge']['endpoint_host'] == b['judge']['endpoint_host'] == '127.0.0.1'

        elsewhere = ['--judge', 'loopback-judge', '--judge-base-url', other.base_url]
        moved = _eval(_rbench_predictions(tmp_path / 'c'), 'R-Bench-Full_DEMO', tmp_path, elsewhere)
        assert moved['vlmeval'] and len(other.log) > 24           # another judge: its own verdicts, from the kit
        os.environ['LOCAL_LLM'] = 'another-model'                   # read by the kit's build_judge
        try:
            changed = _eval(_rbench_predictions(tmp_path / 'd'), 'R-Bench-Full_DEMO', tmp_path, judge)
        finally:
            os.environ.pop('LOCAL_LLM')
        assert changed['vlmeval']
        # efficient mode with a given caption seed asks a subset of the official calls: all cached, no kit; with
        # the cache off the evaluation goes to the kit, which writes the same tables, and both keep the seed for a resumed run
        asked = len(server.log)
        seeded = ['--judge-args', '{"judge_mode": "efficient", "caption_seed": 7}']
        quick = _eval(_rbench_predictions(tmp_path / 'f'), 'R-Bench-Full_DEMO', tmp_path, [*judge, *seeded])
        assert (quick['vlmeval'], len(server.log)) == (False, asked)
        slow = _eval(_rbench_predictions(tmp_path / 'g'), 'R-Bench-Full_DEMO', tmp_path,
                     [*judge, '--judge-args', '{"judge_mode": "efficient", "caption_seed": 7, "cache": false}'])
        assert slow['vlmeval'] and len(server.log) > asked
        for suffix in ('_efficient_scores.csv', '_efficient_robustness.csv'):
            name = f'mymodel_R-Bench-Full_DEMO{suffix}'
            assert (tmp_path / 'f' / name).read_bytes() == (tmp_path / 'g' / name).read_bytes(), name
        import pickle
        for folder in 'fg':
            with open(tmp_path / folder / 'mymodel_R-Bench-Full_DEMO_rbench_judge.pkl', 'rb') as f:
                assert pickle.load(f)['caption_seed'] == 7, folder
    finally:
        os.environ.pop('OPENAI_API_KEY', None)
        server.stop()
        other.stop()


@pytest.mark.slow
def test_rbench_with_the_offline_judge_is_scored_without_the_kit(tmp_path):
    run = _eval(_rbench_predictions(tmp_path / 'p'), 'R-Bench-Full_DEMO', tmp_path, ['--judge', 'offline'])
    assert (run['code'], run['vlmeval']) == (0, False)
    score = json.loads((tmp_path / 'p' / 'mymodel_R-Bench-Full_DEMO_score.json').read_text())
    assert score['counts']['items'] == 24 and 'offline' in score['judge']['label']
