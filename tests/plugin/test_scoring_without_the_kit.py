"""`vlmeval-ext eval` of a benchmark scored by rules (GRAB without an LLM judge, ReMI, RoCOCO-MCQ, RoCOCO retrieval)
does not import the kit: it runs the pure function of `dataset/utils/<bench>.py` that the kit-dialect `evaluate`
wraps, and writes its tables as the kit's `dump` does. Here both paths score the same predictions (answers right,
wrong, empty, the kit's failure text; for retrieval, the embeddings of a real-annotation gallery) and every file
they write must have the same bytes; the kit-free path must not import `vlmeval` and the kit path must."""
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
PROBE = ('import json, sys\nfrom vlmeval_ext.cli import main\ncode = 0\ntry:\n    main(sys.argv[1:])\n'
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


def test_only_an_llm_judge_or_a_benchmark_without_rules_needs_the_kit():
    from vlmeval_ext.evaluation import needs_the_kit
    from vlmeval_ext.registry import benchmark_of
    grab, remi, rbench = (benchmark_of(n) for n in ('GRAB', 'ReMI', 'R-Bench-Full'))
    mcq, retrieval = benchmark_of('RoCOCO-MCQ-same_concept'), benchmark_of('RoCOCO-T2I-mix')
    assert not needs_the_kit(grab, {}) and not needs_the_kit(grab, {'model': 'offline'})
    assert needs_the_kit(grab, {'model': 'gpt-4o-mini'})
    assert not needs_the_kit(remi, {'model': 'gpt-4o-mini'}) and not needs_the_kit(mcq, {'model': 'gpt-4o-mini'})
    assert not needs_the_kit(retrieval, {})
    assert needs_the_kit(rbench, {'model': 'offline'}) and needs_the_kit(rbench, {'model': 'gpt-4o-mini'})
