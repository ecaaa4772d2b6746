"""Everyday commands that run no model start without VLMEvalKit or torch: `list`, every `--help` (run.py's
included), `prepare`, the report commands, and `eval` of a benchmark scored by rules (the pure functions the kit
dialect's evaluate wraps: tests/plugin/test_scoring_without_the_kit.py), and of R-Bench with the offline judge or
with every verdict cached; `eval` with an LLM judge to ask scores with the kit's own dataset classes (the kit builds
the judge), so it imports the kit. Each command runs in a fresh interpreter that then says which of the two it
imported (timings: benchmarks/cli_startup.md)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from helpers.kit_run import REPO_ROOT

PROBE = '''
import json, sys
sys.argv = {argv!r}
code = 0
try:
    {call}
except SystemExit as e:
    code = e.code or 0
print(json.dumps({{'code': code, 'torch': 'torch' in sys.modules, 'vlmeval': 'vlmeval' in sys.modules}}),
      file=sys.stderr)
'''
CLI = 'from vlmeval_ext.cli.main import main; main(sys.argv[1:])'
RUN_PY = 'import runpy; runpy.run_path("run.py", run_name="__main__")'


def _probe(argv: list[str], call: str = CLI, env: dict | None = None) -> tuple[dict, str]:
    proc = subprocess.run([sys.executable, '-c', PROBE.format(argv=['prog', *argv], call=call)], cwd=REPO_ROOT,
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300)
    last = [line for line in proc.stderr.splitlines() if line.startswith('{"code"')]
    assert last, proc.stderr[-3000:]
    return json.loads(last[-1]), proc.stdout + proc.stderr


def _assert_kit_free(argv, call=CLI, env=None, torch=False):
    result, out = _probe(argv, call, env)
    assert result == {'code': 0, 'torch': torch, 'vlmeval': False}, (argv, out[-3000:])
    return out


HELPS = [['--help'], ['list'], ['summary', '--help'], ['leaderboard', '--help'], ['diff-manifests', '--help'],
         ['corrupt-image', '--help'], ['corrupt', '--help'], ['rococo', '--help'], ['rococo', 'score', '--help'],
         ['rococo', 'gallery', '--help'], ['eval', '--help'], ['prepare', '--help'], ['records', '--help'],
         ['run', '--help']]


@pytest.mark.parametrize('argv', HELPS, ids=lambda a: ' '.join(a))
def test_command_starts_without_the_kit(argv, tmp_path):
    out = _assert_kit_free(argv, env={'LMUData': str(tmp_path)})
    if argv == ['list']:
        assert 'GRAB_DEMO' in out and 'demo (ships in package)' in out and 'RoCOCO-T2I-mix' in out
    if argv == ['run', '--help']:
        assert '--judge-base-url' in out and 'GRAB_DEMO' in out and 'Naive-Baseline' in out


def test_run_py_help_reads_the_kits_options_without_importing_it():
    out = _assert_kit_free(['--help'], call=RUN_PY)
    for flag in ('--data', '--model', '--work-dir', '--judge', '--api-nproc', '--reuse', '--mode {all,infer,eval}'):
        assert flag in out, flag
    assert 'Did not detect the .env file' not in out


def _demo_predictions(tmp_path, dataset: str, answer_column: str = 'answer') -> str:
    from vlmeval_ext.registry import benchmark_of
    data = pd.read_csv(benchmark_of(dataset).demo_file(dataset), sep='\t', dtype=str, keep_default_na=False)
    data = data.drop(columns=[c for c in ('image', 'image_path') if c in data])
    data['prediction'] = data[answer_column]
    path = tmp_path / f'mymodel_{dataset}.tsv'
    data.to_csv(path, sep='\t', index=False)
    return str(path)


@pytest.mark.parametrize('dataset,extra,kit', [('GRAB_DEMO', [], False), ('ReMI_DEMO', [], False),
                                               ('RoCOCO-MCQ-same_concept_DEMO', [], False),
                                               ('R-Bench-Full_DEMO', ['--judge', 'offline'], False)])
def test_eval_imports_the_kit_only_where_its_dataset_class_scores(dataset, extra, kit, tmp_path):
    pred = _demo_predictions(tmp_path, dataset)
    result, out = _probe(['eval', '--data', dataset, '--pred', pred, *extra], env={'LMUData': str(tmp_path)})
    assert result['code'] == 0 and result['vlmeval'] is kit, out[-3000:]
    assert (tmp_path / f'mymodel_{dataset}_score.json').is_file(), out[-2000:]
    assert (tmp_path / f'mymodel_{dataset}_manifest.json').is_file(), out[-2000:]


def test_eval_records_the_model_from_the_file_name_or_model(tmp_path):
    """`--pred evalpred/mymodel_GRAB_DEMO.xlsx` is model `mymodel` (not the folder); --model NAME overrides."""
    folder = tmp_path / 'evalpred'
    folder.mkdir()
    pred = _demo_predictions(folder, 'GRAB_DEMO')
    assert _probe(['eval', '--data', 'GRAB_DEMO', '--pred', pred], env={'LMUData': str(tmp_path)})[0]['code'] == 0
    manifest = json.loads((folder / 'mymodel_GRAB_DEMO_manifest.json').read_text())
    assert manifest['model']['name'] == 'mymodel'
    assert _probe(['eval', '--data', 'GRAB_DEMO', '--pred', pred, '--model', 'My-VLM-7B'],
                  env={'LMUData': str(tmp_path)})[0]['code'] == 0
    manifest = json.loads((folder / 'mymodel_GRAB_DEMO_manifest.json').read_text())
    assert manifest['model']['name'] == 'My-VLM-7B'
    _, help_text = _probe(['eval', '--help'])
    assert '<model>_<dataset>' in help_text and '--model' in help_text


def test_prepare_runs_without_the_kit(tmp_path):
    """`prepare` builds TSVs from the official release: no kit, no torch (which alone would be ~0.7 GB of the
    memory a preparation holds). Its errors are one line."""
    for name, message in (('GRAB_DEMO', 'GRAB_DEMO ships with the package'),
                          ('ReMI_DEMO', 'ReMI_DEMO ships with the package'),
                          ('R-Bench-Full_DEMO', 'R-Bench-Full_DEMO ships with the package'),
                          ('RoCOCO-T2I-mix', 'give the folder holding the RoCOCO annotation JSONs')):
        result, out = _probe(['prepare', name], env={'LMUData': str(tmp_path), 'ROCOCO_ANNOTATIONS': ''})
        assert result == {'code': 2, 'torch': False, 'vlmeval': False}, (name, out[-2000:])
        assert message in out and 'Traceback' not in out, (name, out[-2000:])


def test_commands_that_import_the_kit_do_not_show_its_env_notice(tmp_path):
    """`eval` of R-Bench with an LLM judge to ask imports the kit (the kit builds the judge); the kit's "Did not
    detect the .env file" ERROR line, which concerns its optional key file, is not shown on our commands."""
    from helpers.kit_run import FAKE_KEY
    from helpers.loopback_server import LoopbackServer
    dataset = 'R-Bench-Full_DEMO'
    pred = _demo_predictions(tmp_path, dataset)
    with LoopbackServer() as server:
        server.default = '1'
        result, out = _probe(['eval', '--data', dataset, '--pred', pred, '--judge', 'loopback-judge',
                              '--judge-base-url', server.base_url],
                             env={'LMUData': str(tmp_path), 'OPENAI_API_KEY': FAKE_KEY})
    assert result['code'] == 0 and result['vlmeval'] is True, out[-3000:]
    assert 'Did not detect the .env file' not in out
    assert (tmp_path / f'mymodel_{dataset}_score.json').is_file(), out[-2000:]


def test_report_and_tool_commands_run_without_the_kit(tmp_path):
    """Not only their --help: summary, leaderboard, report, diff-manifests, corrupt-image, rococo gallery and
    rococo score do their work without importing the kit or torch."""
    import numpy as np

    from vlmeval_ext.prepare.demos import gallery_files
    env = {'LMUData': str(tmp_path)}
    model_dir = tmp_path / 'work' / 'mymodel'
    model_dir.mkdir(parents=True)
    pred = _demo_predictions(model_dir, 'GRAB_DEMO')
    assert _probe(['eval', '--data', 'GRAB_DEMO', '--pred', pred], env=env)[0]['code'] == 0
    remi = _demo_predictions(model_dir, 'ReMI_DEMO')           # the report reads ReMI's input mode too
    assert _probe(['eval', '--data', 'ReMI_DEMO', '--pred', remi], env=env)[0]['code'] == 0
    manifest = str(model_dir / 'mymodel_GRAB_DEMO_manifest.json')
    ann = next(p for p in gallery_files() if p.name == 'same_concept.json')
    entries = json.loads(ann.read_text())
    rng = np.random.default_rng(0)
    np.save(tmp_path / 'img.npy', rng.standard_normal((len(entries), 8)).astype(np.float32))
    np.save(tmp_path / 'txt.npy', rng.standard_normal((sum(len(e['caption']) for e in entries), 8)).astype(np.float32))
    for argv in (['summary', str(tmp_path / 'work')],
                 ['report', str(tmp_path / 'work')],
                 ['leaderboard', '--data', 'GRAB_DEMO', '--work-dir', str(tmp_path / 'work'), '--out',
                  str(tmp_path / 'lb')],
                 ['diff-manifests', manifest, manifest],
                 ['corrupt-image', str(REPO_ROOT / 'vlmeval_ext' / 'demo' / 'chelsea.jpg'), '--out-dir',
                  str(tmp_path / 'corrupt')],
                 ['rococo', 'gallery', '--ann', str(ann), '--out', str(tmp_path / 'gallery')],
                 ['rococo', 'score', '--direction', 'i2t', '--ann', str(ann), '--image-emb',
                  str(tmp_path / 'img.npy'), '--text-emb', str(tmp_path / 'txt.npy')]):
        _assert_kit_free(argv, env=env)


def test_help_lists_every_rococo_subcommand():
    import re
    _, top = _probe(['--help'])
    _, rococo = _probe(['rococo', '--help'])
    subcommands = re.search(r'\{([a-z,\-]+)\}', rococo).group(1).split(',')
    line = next(x for x in top.splitlines() if x.strip().startswith('rococo '))
    assert len(subcommands) >= 5
    for sub in subcommands:
        assert sub in line, (sub, line)
