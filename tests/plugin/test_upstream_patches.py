"""The fixes offered to VLMEvalKit (upstream/*.patch) apply to the installed kit and do what their README says.

Each patch is applied with `patch -p1` to a copy of the installed kit (an upstream checkout has run.py beside its
vlmeval package; ms-vlmeval keeps it as vlmeval/run.py, copied to where the patch expects it), then the patched
code is run in a subprocess against the copy.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.kit_run import FAKE_KEY, REPO_ROOT

PATCHES = sorted((REPO_ROOT / 'upstream').glob('*.patch'))


@pytest.fixture(scope='module')
def patched_kit(tmp_path_factory):
    if shutil.which('patch') is None:
        pytest.skip('the `patch` program is not installed')
    package = Path(importlib.util.find_spec('vlmeval').origin).parent
    root = tmp_path_factory.mktemp('kit')
    shutil.copytree(package, root / 'vlmeval', ignore=shutil.ignore_patterns('__pycache__'))
    run_py = package.parent / 'run.py' if (package.parent / 'run.py').is_file() else package / 'run.py'
    shutil.copyfile(run_py, root / 'run.py')
    for patch in PATCHES:
        proc = subprocess.run(['patch', '-p1', '--forward', '-i', str(patch)], cwd=root, capture_output=True,
                              text=True)
        assert proc.returncode == 0, (patch.name, proc.stdout, proc.stderr)
    return root


def _run(root: Path, code: str) -> str:
    proc = subprocess.run([sys.executable, '-c', code], cwd=root, capture_output=True, text=True, timeout=600,
                          env={**os.environ, 'PYTHONPATH': str(root)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def test_there_are_patches_and_each_has_its_reason():
    readme = (REPO_ROOT / 'upstream' / 'README.md').read_text()
    assert len(PATCHES) == 6
    for patch in PATCHES:
        assert f'## {patch.name}' in readme
        assert patch.read_text().startswith('--- a/')


def test_a_failed_dump_leaves_the_previous_checkpoint_intact(patched_kit, tmp_path):
    """A write that dies half way (here: an object pickle cannot store) must not tear the file it replaces."""
    code = f'''
import json, os, pickle
from vlmeval.smp.file import dump, load
target = {str(tmp_path / 'm_D_checkpoint.pkl')!r}
dump({{'0': 'A', '1': 'B'}}, target)
try:
    dump({{'0': 'A', '1': 'B', '2': (lambda: 0)}}, target)
except Exception as err:
    failed = type(err).__name__
print(json.dumps({{'kept': load(target), 'failed': failed, 'left': sorted(os.listdir({str(tmp_path)!r}))}}))
'''
    out = json.loads(_run(patched_kit, code))
    assert out['kept'] == {'0': 'A', '1': 'B'} and out['left'] == ['m_D_checkpoint.pkl']


def test_keys_are_masked_in_the_argv_the_kit_stores(patched_kit):
    import ast
    source = (patched_kit / 'run.py').read_text()
    tree = ast.parse(source)
    wanted = {'SECRET_OPTIONS', 'redact_argv', 'redact_kwargs'}
    nodes = [n for n in tree.body if getattr(n, 'name', None) in wanted
             or (isinstance(n, ast.Assign) and any(getattr(t, 'id', None) in wanted for t in n.targets))]
    namespace: dict = {}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), 'run.py', 'exec'), namespace)
    argv = ['run.py', '--judge-key', FAKE_KEY, f'--key={FAKE_KEY}', '--data', 'X']
    assert namespace['redact_argv'](argv) == ['run.py', '--judge-key', '***', '--key=***', '--data', 'X']
    assert namespace['redact_kwargs']({'key': FAKE_KEY, 'model': 'm'}) == {'key': '***', 'model': 'm'}
    assert source.count('argv=redact_argv(sys.argv)') == 2 and 'argv=sys.argv' not in source
    assert 'API Key: {self.key}' not in (patched_kit / 'vlmeval' / 'api' / 'gpt.py').read_text()


def test_replies_that_utf8_cannot_store_are_repaired_before_the_prediction_table(patched_kit):
    import ast
    source = (patched_kit / 'vlmeval' / 'inference.py').read_text()
    tree = ast.parse(source)
    nodes = [n for n in tree.body if getattr(n, 'name', None) == 'storable_text']
    namespace: dict = {}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), 'inference.py', 'exec'), namespace)
    repair = namespace['storable_text']
    assert repair('\ud83d 3') == '\ufffd 3' and repair('a \ud83d\ude00') == 'a \U0001f600'
    assert repair('plain é 😀') == 'plain é 😀'
    assert source.count('storable_text(str(data_all[x]))') == 2 and 'prediction = [str(data_all[x])' not in source


def served_with_a_slash(kit_root: Path, tmp_path: Path):
    """The kit at `kit_root` alone (no plugin): `--model Qwen/Tiny-VL --base-url URL` on a small custom MCQ dataset
    in the kit's TSV format. Returns the model names the server was asked for, where the predictions landed
    (relative to the work dir) and the finished process."""
    import base64
    import io

    import pandas as pd
    from PIL import Image

    from helpers.kit_run import kit_environment
    from helpers.loopback_server import LoopbackServer

    buffer = io.BytesIO()
    Image.new('RGB', (32, 32), (200, 30, 30)).save(buffer, format='PNG')
    image = base64.b64encode(buffer.getvalue()).decode()
    env = kit_environment(tmp_path)
    pd.DataFrame({'index': [0, 1], 'image': [image, image], 'question': ['What colour?', 'Which shape?'],
                  'A': ['red', 'square'], 'B': ['blue', 'circle'], 'answer': ['A', 'A']}).to_csv(
        Path(env['LMUData']) / 'TinyMCQ.tsv', sep='\t', index=False)
    env.update({'LMDEPLOY_API_KEY': 'EMPTY', 'PRED_FORMAT': 'tsv'})
    with LoopbackServer() as server:
        server.default = 'A'
        proc = subprocess.run([sys.executable, 'run.py', '--data', 'TinyMCQ', '--model', 'Qwen/Tiny-VL',
                               '--base-url', server.base_url, '--mode', 'infer', '--work-dir', str(tmp_path / 'w')],
                              cwd=kit_root, env={**env, 'PYTHONPATH': str(kit_root)}, capture_output=True,
                              text=True, timeout=600)
        asked = sorted({r.model for r in server.log})
    found = [p.relative_to(tmp_path / 'w') for p in (tmp_path / 'w').rglob('*TinyMCQ.tsv')]
    return asked, found, proc


def test_a_served_model_name_with_a_slash_runs_in_a_safe_folder_and_is_sent_as_given(patched_kit, tmp_path):
    """The patched kit: the server is asked for 'Qwen/Tiny-VL', the predictions land in `Qwen--Tiny-VL/`."""
    asked, found, proc = served_with_a_slash(patched_kit, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert asked == ['Qwen/Tiny-VL']
    assert found and all(p.parts[0] == 'Qwen--Tiny-VL' and p.name == 'Qwen--Tiny-VL_TinyMCQ.tsv' for p in found)


def test_the_installed_kit_still_needs_the_served_name_workaround(tmp_path):
    """The same run on an unpatched copy of the installed kit: a name with "/" is not both sent as given and kept
    out of the folder names. Once a kit release does both, this fails and names the workaround to remove."""
    package = Path(importlib.util.find_spec('vlmeval').origin).parent
    root = tmp_path / 'kit'
    shutil.copytree(package, root / 'vlmeval', ignore=shutil.ignore_patterns('__pycache__'))
    run_py = package.parent / 'run.py' if (package.parent / 'run.py').is_file() else package / 'run.py'
    shutil.copyfile(run_py, root / 'run.py')
    asked, found, proc = served_with_a_slash(root, tmp_path)
    fixed = (proc.returncode == 0 and asked == ['Qwen/Tiny-VL'] and found
             and all(p.parts[0] == 'Qwen--Tiny-VL' for p in found))
    assert not fixed, ('the installed kit no longer has this problem (a served name with "/"): it took '
                       'upstream/0004-served-model-names-with-slash.patch or an equivalent fix; remove '
                       'kit_workarounds/served_names.py')


def test_a_resumed_run_reads_replies_that_look_missing_as_the_text_written(patched_kit, tmp_path):
    code = f'''
import json
import pandas as pd
from vlmeval.inference import load_predictions_as_text
path = {str(tmp_path / 'M_D.tsv')!r}
pd.DataFrame({{'index': [0, 1, 2, 3, 4], 'prediction': ['None', 'NA', '', 'null', '3']}}).to_csv(path, sep='\\t', index=False)
data = load_predictions_as_text(path)
print(json.dumps({{'index': [int(i) for i in data['index']], 'prediction': list(data['prediction'])}}))
'''
    out = json.loads(_run(patched_kit, code))
    assert out == {'index': [0, 1, 2, 3, 4], 'prediction': ['None', 'NA', '', 'null', '3']}
    source = (patched_kit / 'vlmeval' / 'inference.py').read_text()
    assert 'data = load_predictions_as_text(result_file)' in source and 'data = load(result_file)' not in source


def test_the_progress_bars_name_what_they_count(patched_kit):
    """The patched `track_progress_rich` labels its bar with the caller's `desc`; the API inference loop passes
    one; and each judge loop of our datasets passes one (today's kit drops it)."""
    import ast
    code = '''
import contextlib, io
from vlmeval.utils.mp_util import track_progress_rich
err = io.StringIO()
with contextlib.redirect_stderr(err):
    track_progress_rich(str, [1, 2, 3], nproc=1, desc='Judge J on M_GRAB (answers)')
print(repr(err.getvalue().strip().splitlines()[-1].split('\\r')[-1]))
'''
    bar = _run(patched_kit, code)
    assert 'Judge J on M_GRAB (answers)' in bar and '3/3' in bar
    assert "desc=f'Infer {model_name}/{dataset_name} (API calls)'" in (
        patched_kit / 'vlmeval' / 'inference.py').read_text()
    for name in ('grab.py', 'rbench_full.py'):
        tree = ast.parse((REPO_ROOT / 'vlmeval_ext' / 'dataset' / name).read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, 'id', None) == 'track_progress_rich']
        assert calls and all(any(k.arg == 'desc' for k in c.keywords) for c in calls), name


# Each workaround the plugin carries for the kit, and the problem it answers, checked on the installed kit (not a
# patched copy): when a kit release fixes one, its case here fails and names the workaround to remove.
STILL_NEEDED = {
    '0001-keep-api-keys-out-of-status-and-logs': ('a judge built by the kit logs its API key (at INFO)', '''
import logging
seen = []
class Seen(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
from vlmeval.api.gpt import OpenAIWrapper
for logger in [logging.getLogger(), *map(logging.getLogger, list(logging.Logger.manager.loggerDict))]:
    logger.addHandler(Seen())
    logger.setLevel(logging.INFO)
OpenAIWrapper(model='gpt-4o-mini', key='sk-STILLNEEDED0001', api_base='http://127.0.0.1:9/v1/chat/completions')
print('PROBLEM' if any('sk-STILLNEEDED0001' in m for m in seen) else 'FIXED')
''', 'kit_workarounds/console.py:install_log_redaction and masked_console'),
    '0002-atomic-dump': ('a dump that fails half way leaves the file it replaces cut', '''
import os, pickle
from vlmeval.smp.file import dump
target = os.path.join(TMP, 'm_D_checkpoint.pkl')
dump({'0': 'A'}, target)
try:
    dump({'0': 'A', '1': (lambda: 0)}, target)
except Exception:
    pass
try:
    with open(target, 'rb') as f:
        pickle.load(f)
    print('FIXED')
except Exception:
    print('PROBLEM')
''', 'kit_workarounds/checkpoints.py:set_aside_unloadable and kit_workarounds/kit_writes.py'),
    '0003-storable-predictions': ('a reply with a lone surrogate cannot be written to the predictions table', '''
import os
import pandas as pd
from vlmeval.smp.file import dump
try:
    dump(pd.DataFrame({'index': [0], 'prediction': ['\\ud83d 3']}), os.path.join(TMP, 'M_D.tsv'))
    print('FIXED')
except Exception:
    print('PROBLEM')
''', 'kit_workarounds/checkpoints.py:repair_unstorable_replies'),
    '0005-predictions-read-back-as-text': ("the kit's load reads a reply 'None' back as a missing value", '''
import os
import pandas as pd
from vlmeval.smp.file import load
path = os.path.join(TMP, 'M_D.tsv')
pd.DataFrame({'index': [0], 'prediction': ['None']}).to_csv(path, sep='\\t', index=False)
print('FIXED' if load(path)['prediction'][0] == 'None' else 'PROBLEM')
''', 'kit_workarounds/verbatim.py'),
    '0006-progress-bar-labels': ("track_progress_rich's bar drops the caller's label", '''
import contextlib, io
from vlmeval.utils.mp_util import track_progress_rich
err = io.StringIO()
with contextlib.redirect_stderr(err):
    track_progress_rich(str, [1, 2], nproc=1, desc='LABEL-0006')
print('FIXED' if 'LABEL-0006' in err.getvalue() else 'PROBLEM')
''', "the line before each bar (datasets' judge lines, the launcher's API-model line)"),
}


def test_each_workaround_module_is_listed_with_the_patch_that_removes_it():
    package = REPO_ROOT / 'vlmeval_ext' / 'kit_workarounds'
    listing = (package / '__init__.py').read_text()
    modules = sorted(p.name for p in package.glob('*.py') if p.name != '__init__.py')
    assert modules and all(f'- {m}:' in listing for m in modules), modules
    named = set(re.findall(r'\b(\d{4}-[a-z0-9-]+)\b', listing))
    assert named == {p.stem for p in PATCHES}, named ^ {p.stem for p in PATCHES}
    for patch, (_, _, workaround) in STILL_NEEDED.items():
        for path in re.findall(r'kit_workarounds/[a-z_]+\.py', workaround):
            assert (REPO_ROOT / 'vlmeval_ext' / path).is_file(), (patch, path)


@pytest.mark.parametrize('patch', sorted(STILL_NEEDED))
def test_the_installed_kit_still_needs_each_workaround(patch, tmp_path):
    problem, code, workaround = STILL_NEEDED[patch]
    assert any(p.name.startswith(patch) for p in PATCHES)
    proc = subprocess.run([sys.executable, '-c', f'TMP = {str(tmp_path)!r}\n' + code], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = proc.stdout.strip().splitlines()[-1]
    assert verdict == 'PROBLEM', (f'the installed kit no longer has this problem ({problem}): it took '
                                  f'upstream/{patch}.patch or an equivalent fix; remove {workaround}')
