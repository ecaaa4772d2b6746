"""`vlmeval-ext export-upstream`: our benchmarks as kit-native code in a VLMEvalKit checkout, run by its own run.py.

The installed kit is copied to a temporary git repository laid out as a checkout (the upstream leg: the editable
checkout itself; the ms-vlmeval leg: the wheel's vlmeval package, with its vlmeval/run.py, the repository's run.py,
beside it), so the real installation is never touched; the export writes into that copy. Then the copy's own run.py
runs every demo split (GRAB_DEMO, ReMI_DEMO, R-Bench-Full_DEMO, RoCOCO-MCQ-same_concept_DEMO) with the loopback
server as model and judge, in a process where the copy's `vlmeval` is imported and vlmeval_ext is not. The plugin
then evaluates the very same prediction files against the same deterministic judge, and every `_score.json` must be
equal. RoCOCO retrieval ships no demo split and needs an embedding model: its exported class evaluates the same
embedding predictions as the plugin, the exported embedding model (a tiny random CLIP) embeds as the plugin's, and
the checkout's scripts/prepare_tsv.py builds the plugin's TSV.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vlmeval_ext.testing.kit_run import REPO_ROOT, kit_environment, run_kit
from vlmeval_ext.testing.loopback_server import LoopbackServer

DEMOS = ('GRAB_DEMO', 'ReMI_DEMO', 'R-Bench-Full_DEMO', 'RoCOCO-MCQ-same_concept_DEMO')
EXPORTED = ('vlmeval/dataset/bench_core', 'vlmeval/dataset/rbench', 'vlmeval/dataset/grab',
            'vlmeval/dataset/remi', 'vlmeval/dataset/rococo')
PREFLIGHT = 'Reply with the single word: ready'
GRAB_JUDGE = 'Return only the extracted numeric answer'
RBENCH_JUDGE = 'Please only provide the result in the following format: Score:'
NO_KIT_SKIP = 'no VLMEvalKit code found (neither a checkout\'s run.py nor ms-vlmeval\'s vlmeval/run.py)'


def _demo_answers() -> list[tuple[str, str]]:
    """(a piece of each demo question, its answer), from the demo splits shipped in the package."""
    pairs = []
    for path in sorted((REPO_ROOT / 'vlmeval_ext').glob('*/demo/*.tsv')):
        demo = pd.read_csv(path, sep='\t', dtype=str, keep_default_na=False, usecols=['question', 'answer'])
        for question, answer in zip(demo['question'], demo['answer']):
            piece = max(re.split(r'<image\d>', question), key=len).strip()[:60]
            pairs.append((piece, answer))
    return pairs


DEMO_ANSWERS = _demo_answers()


def deterministic_reply(request: dict) -> str:
    """The same reply to the same request, in every process (a hash of the prompt picks it): model replies are
    right, right in prose or JSON, or wrong; judge replies are verdicts in the judge's format, or numbers read off
    the response. Every score of the demo runs is then a mix of right, wrong and unparsed."""
    texts, images = [], 0
    for message in request.get('messages', []):
        content = message.get('content', '')
        for part in content if isinstance(content, list) else [{'type': 'text', 'text': content}]:
            images += part.get('type') == 'image_url'
            texts.append(part.get('text', '') if part.get('type') == 'text' else '')
    prompt = '\n'.join(texts)
    if PREFLIGHT in prompt:
        return 'ready'
    h = int(hashlib.sha1(prompt.encode()).hexdigest(), 16)
    if GRAB_JUDGE in prompt:
        numbers = re.findall(r'-?\d+(?:\.\d+)?', prompt.rpartition('answering the question is:')[2])
        return numbers[h % len(numbers)] if numbers and h % 4 else 'None'
    if RBENCH_JUDGE in prompt:
        top = 1 if 'The result is 1 if the answer is correct' in prompt else 2
        return f'Score: {h % (top + 1)}' if h % 7 else 'I cannot decide.'
    answers = [a for piece, a in DEMO_ANSWERS if piece and piece in prompt]
    answer = answers[h % len(answers)] if answers else 'A'
    return [answer, f'The answer is {answer}.', json.dumps({'explanation': 'read it off', 'answer': answer}),
            'B', '2'][h % 5]


def installed_kit() -> tuple[str, Path] | None:
    """Where the installed kit's code is, without importing it: ('checkout', its root) for an editable checkout,
    ('wheel', its vlmeval package) for ms-vlmeval, which packs the repository's run.py as vlmeval/run.py."""
    spec = importlib.util.find_spec('vlmeval')
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).resolve().parent
    if (package.parent / 'run.py').is_file() and (package / 'dataset' / '__init__.py').is_file():
        return 'checkout', package.parent
    if (package / 'run.py').is_file() and (package / 'dataset' / '__init__.py').is_file():
        return 'wheel', package
    return None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(['git', '-C', str(repo), '-c', 'user.name=test', '-c', 'user.email=test@example.com',
                           *args], check=True, capture_output=True, text=True).stdout


def copy_checkout(kind: str, source: Path, dest: Path) -> Path:
    """The installed kit's code as a fresh git repository with one commit, laid out as a checkout: run.py beside
    the vlmeval package (with a checkout, also its top-level files; from the wheel, its vlmeval/run.py)."""
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns('__pycache__', '*.pyc', '*.egg-info')
    if kind == 'checkout':
        for item in source.iterdir():
            if item.is_file() and item.suffix in ('.py', '.cfg', '.txt', '.toml', '.md', ''):
                shutil.copy2(item, dest / item.name)
        shutil.copytree(source / 'vlmeval', dest / 'vlmeval', ignore=ignore)
    else:
        shutil.copytree(source, dest / 'vlmeval', ignore=ignore)
        shutil.copy2(source / 'run.py', dest / 'run.py')
    _git(dest, 'init', '-q')
    _git(dest, 'add', '-A')
    _git(dest, 'commit', '-q', '-m', 'kit as installed')
    return dest


def export(kit: Path, patch: Path, env: dict) -> subprocess.CompletedProcess:
    return run_kit(['export-upstream', '--kit', kit, '--patch', patch], env=env, entry=('-m', 'vlmeval_ext'),
                   timeout=120)


# Runs the checkout's run.py as `python run.py ...` does, evaluates further prediction files with the classes of the
# checkout's dataset list, runs the checkout's scripts/prepare_tsv.py, then reports which vlmeval ran and whether
# any vlmeval_ext module was imported in that process.
DRIVER = '''import json, runpy, sys
kit, todo = sys.argv[1], json.loads(sys.argv[2])


def run_script(path, argv):
    sys.argv = [path] + argv
    try:
        runpy.run_path(path, run_name='__main__')
    except SystemExit as stop:
        if stop.code not in (None, 0):
            raise


run_script(kit + '/run.py', sys.argv[3:])
import vlmeval
import vlmeval.dataset
for name, pred in todo['evaluate']:
    cls = next(c for c in vlmeval.dataset.DATASET_CLASSES if name in c.supported_datasets())
    cls.for_evaluation(name).evaluate(pred)
for argv in todo['prepare']:
    run_script(kit + '/scripts/prepare_tsv.py', argv)
from vlmeval.config import supported_VLM
from vlmeval.vlm import RoCOCOEmbeddingModel
assert supported_VLM['RoCOCO-CLIP-B32'].func is RoCOCOEmbeddingModel
model = RoCOCOEmbeddingModel(model_path=todo['embed']['model_path'], backend='hf-clip', device='cpu')
print('EXPORT-EMB ' + json.dumps([model.generate([{'type': t, 'value': v}]) for t, v in todo['embed']['rows']]))
print('EXPORT-CHECK vlmeval=' + vlmeval.__file__)
print('EXPORT-CHECK plugin=' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'vlmeval_ext')))
'''

# Evaluates prediction files with the plugin (vlmeval-ext eval), one process for all of them.
PLUGIN_EVAL = '''import json, sys
from vlmeval_ext.cli import cmd_eval
base = sys.argv[1]
todo = json.loads(sys.argv[2])
for item in todo['evaluate']:
    cmd_eval(['--data', item[0], '--pred', item[1], '--judge', 'loopback-judge', '--judge-base-url', base,
              '--api-nproc', '4'])
from vlmeval_ext.rococo.models import RoCOCOEmbeddingModel
model = RoCOCOEmbeddingModel(model_path=todo['embed']['model_path'], backend='hf-clip', device='cpu')
print('EXPORT-EMB ' + json.dumps([model.generate([{'type': t, 'value': v}]) for t, v in todo['embed']['rows']]))
'''
RETRIEVAL = 'RoCOCO-I2T-same_concept'
RETRIEVAL_ROWS = (0, 1, 2, 3, 83)


def retrieval_predictions(fixtures_dir: Path, tmp: Path) -> Path:
    """A RoCOCO-I2T predictions file as an embedding model leaves it: the split built from real annotation
    entries (generated COCO images), one random unit vector per row."""
    from PIL import Image

    from vlmeval_ext.rococo import data as D
    ann_dir, coco = tmp / 'annotations', tmp / 'coco'
    ann_dir.mkdir(parents=True)
    for key in ('clean', 'same_concept'):
        entries = json.loads((fixtures_dir / 'rococo' / D.ANNOTATION_FILES[key]).read_text())
        (ann_dir / D.ANNOTATION_FILES[key]).write_text(json.dumps([entries[i] for i in RETRIEVAL_ROWS]))
    for k, entry in enumerate(json.loads((ann_dir / D.ANNOTATION_FILES['clean']).read_text())):
        (coco / entry['image']).parent.mkdir(parents=True, exist_ok=True)
        Image.new('RGB', (48 + 4 * k, 64), (40 * k, 80, 120)).save(coco / entry['image'])
    frame = D.frame_for(RETRIEVAL, ann_dir, coco, None)
    vectors = np.random.default_rng(0).standard_normal((len(frame), 8)).astype(np.float32)
    preds = frame.drop(columns=['image'])
    preds['prediction'] = [D.encode_vector(v / np.linalg.norm(v)) for v in vectors]
    path = tmp / f'embedder_{RETRIEVAL}.tsv'
    preds.to_csv(path, sep='\t', index=False)
    return path


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    found = installed_kit()
    if found is None:
        pytest.skip(NO_KIT_SKIP)
    tmp = tmp_path_factory.mktemp('export')
    kit = copy_checkout(*found, tmp / 'VLMEvalKit')
    env = kit_environment(tmp)
    proc = export(kit, tmp / 'upstream.patch', env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {'tmp': tmp, 'kit': kit, 'patch': tmp / 'upstream.patch', 'stdout': proc.stdout, 'env': env,
            'source': found[1]}


def _exported_files(kit: Path) -> list[Path]:
    files = [p for d in EXPORTED for p in sorted((kit / d).rglob('*.py'))]
    return files + [kit / 'vlmeval' / 'vlm' / 'rococo_embedding.py', kit / 'scripts' / 'prepare_tsv.py']


def test_no_exported_file_imports_the_plugin(exported):
    files = _exported_files(exported['kit'])
    assert len(files) > 20
    for path in files:
        text = path.read_text()
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or '']
            else:
                continue
            assert not any(n.split('.')[0] == 'vlmeval_ext' for n in names), f'{path}:{node.lineno} imports {names}'
        assert 'vlmeval_ext' not in text and 'vlmeval-ext' not in text, path


def test_dataset_list_and_patch(exported):
    kit, patch = exported['kit'], exported['patch'].read_text()
    init = (kit / 'vlmeval/dataset/__init__.py').read_text()
    assert 'from .grab.dataset import GRAB\n' in init
    assert 'from .rococo.dataset import RoCOCOMCQ, RoCOCORetrieval\n' in init
    assert 'IMAGE_DATASET += [RBenchFull, GRAB, ReMI, RoCOCOMCQ, RoCOCORetrieval]\n' in init
    assert 'from .rococo_embedding import RoCOCOEmbeddingModel\n' in (kit / 'vlmeval/vlm/__init__.py').read_text()
    assert 'supported_VLM.update(rococo_embedding_series)\n' in (kit / 'vlmeval/config.py').read_text()
    if (exported['source'] / 'setup.cfg').is_file():    # a checkout: flake8 keeps our 120-column lines there
        assert '    vlmeval/dataset/grab/*.py: E501\n' in (kit / 'setup.cfg').read_text()
        assert 'diff --git a/setup.cfg b/setup.cfg' in patch
    for path in ('vlmeval/dataset/__init__.py', 'vlmeval/dataset/grab/dataset.py', 'scripts/prepare_tsv.py',
                 'vlmeval/dataset/bench_core/specs/rbench.yaml', 'vlmeval/dataset/remi/demo/ReMI_DEMO.tsv'):
        assert f'diff --git a/{path} b/{path}' in patch
    # The patch is what a maintainer applies: on a fresh clone of the kit it gives the exported tree.
    clone = exported['tmp'] / 'clone'
    subprocess.run(['git', 'clone', '-q', str(kit), str(clone)], check=True)
    _git(clone, 'apply', str(exported['patch']))
    for path in _exported_files(kit) + [kit / p for p in ('vlmeval/dataset/__init__.py', 'vlmeval/vlm/__init__.py',
                                                          'vlmeval/config.py')]:
        rel = path.relative_to(kit)
        assert (clone / rel).read_bytes() == path.read_bytes(), rel


def test_export_again_is_idempotent_and_refuses_foreign_changes(exported, tmp_path):
    kit, env = exported['kit'], exported['env']
    again = export(kit, tmp_path / 'again.patch', env)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / 'again.patch').read_bytes() == exported['patch'].read_bytes()
    # A change the export did not make is never overwritten.
    score = kit / 'vlmeval/dataset/grab/score.py'
    original = score.read_bytes()
    score.write_bytes(original + b'# a local fix\n')
    try:
        refused = export(kit, tmp_path / 'refused.patch', env)
    finally:
        score.write_bytes(original)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f'[vlmeval-ext] ERROR: {kit}: uncommitted changes in files the export writes: '
        'vlmeval/dataset/grab/score.py; commit or stash them first']
    assert score.read_bytes() == original
    not_kit = export(tmp_path, tmp_path / 'x.patch', env)
    assert not_kit.returncode == 2 and 'is not a VLMEvalKit checkout' in not_kit.stderr
    assert len(not_kit.stderr.strip().splitlines()) == 1


@pytest.fixture(scope='module')
def both_runs(exported, fixtures_dir):
    tmp, kit = exported['tmp'], exported['kit']
    retrieval = retrieval_predictions(fixtures_dir, tmp / 'retrieval')
    (tmp / 'kit-retrieval').mkdir()
    kit_retrieval = shutil.copy2(retrieval, tmp / 'kit-retrieval' / retrieval.name)
    # A tiny random CLIP saved like a hub checkpoint: the exported and the plugin's embedding model embed the same
    # caption and image.
    from test_rococo_embed import make_tiny_clip
    coco_image = next((tmp / 'retrieval' / 'coco').rglob('*.jpg'))
    embed = {'model_path': str(make_tiny_clip(tmp / 'tiny-clip')),
             'rows': [['text', 'a man riding a horse on a beach'], ['image', str(coco_image)]]}
    (tmp / 'driver.py').write_text(DRIVER)
    (tmp / 'plugin_eval.py').write_text(PLUGIN_EVAL)
    with LoopbackServer() as server:
        server.default = deterministic_reply
        env = kit_environment(tmp / 'kit-run', server)
        env.update(PYTHONPATH=str(kit), VLMEVAL_JUDGE_CACHE=str(tmp / 'kit-run' / 'judge-cache'))
        work = tmp / 'kit-run' / 'out'
        todo = {'evaluate': [[RETRIEVAL, str(kit_retrieval)]], 'embed': embed,
                'prepare': [[RETRIEVAL, '--from', str(tmp / 'retrieval' / 'annotations'),
                             '--coco-root', str(tmp / 'retrieval' / 'coco')]]}
        run = subprocess.run([sys.executable, str(tmp / 'driver.py'), str(kit), json.dumps(todo), '--data', *DEMOS,
                              '--model', 'loopback', '--base-url', server.base_url, '--judge', 'loopback-judge',
                              '--judge-base-url', server.base_url, '--work-dir', str(work), '--api-nproc', '4',
                              '--retry', '1'], env=env, cwd=tmp / 'kit-run', capture_output=True, text=True,
                             timeout=900)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
        kit_files = {}
        for data in DEMOS:
            preds = [p for p in work.rglob(f'*_{data}.*') if not p.is_symlink()
                     and p.suffix in ('.xlsx', '.tsv', '.csv', '.json') and p.parent.name != 'plugin']
            scores = [p for p in work.rglob(f'*_{data}_score.json') if not p.is_symlink()]
            assert len(preds) == 1 and len(scores) == 1, (data, sorted(map(str, work.rglob('*'))))
            kit_files[data] = (preds[0], scores[0])
        kit_files[RETRIEVAL] = (retrieval, Path(kit_retrieval).with_name(f'{retrieval.stem}_score.json'))
        # The plugin, on copies of the same prediction files, against the same replies.
        plugin_dir = tmp / 'plugin'
        plugin_dir.mkdir()
        todo = []
        for data, (pred, _) in kit_files.items():
            shutil.copy2(pred, plugin_dir / pred.name)
            todo.append((data, str(plugin_dir / pred.name)))
        plugin_env = kit_environment(tmp / 'plugin-run', server)
        plugin_env['PYTHONPATH'] = str(REPO_ROOT)
        plugin = subprocess.run([sys.executable, str(tmp / 'plugin_eval.py'), server.base_url,
                                 json.dumps({'evaluate': todo, 'embed': embed})],
                                env=plugin_env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
        assert plugin.returncode == 0, plugin.stdout[-3000:] + plugin.stderr[-5000:]
    return {'run': run, 'kit': kit_files, 'plugin_dir': plugin_dir, 'plugin': plugin,
            'prepared': tmp / 'kit-run' / 'LMUData' / f'{RETRIEVAL}.tsv', 'tmp': tmp}


def test_demos_through_the_checkouts_run_py_score_as_the_plugin(exported, both_runs):
    """One test for the whole run (pytest-xdist would otherwise start the run once per worker)."""
    lines = [line for line in both_runs['run'].stdout.splitlines() if line.startswith('EXPORT-CHECK')]
    assert lines == [f'EXPORT-CHECK vlmeval={exported["kit"] / "vlmeval" / "__init__.py"}', 'EXPORT-CHECK plugin=']
    assert set(both_runs['kit']) == set(DEMOS) | {RETRIEVAL}
    # The exported embedding model (registered in the checkout's supported_VLM) embeds as the plugin's does.
    kit_vectors = [line for line in both_runs['run'].stdout.splitlines() if line.startswith('EXPORT-EMB ')]
    plugin_vectors = [line for line in both_runs['plugin'].stdout.splitlines() if line.startswith('EXPORT-EMB ')]
    assert len(kit_vectors) == 1 and kit_vectors == plugin_vectors
    assert all(v.startswith('emb:f32:') for v in json.loads(kit_vectors[0][len('EXPORT-EMB '):]))
    for data, (pred, kit_score_file) in both_runs['kit'].items():
        kit_scores = json.loads(kit_score_file.read_text())
        plugin_scores = json.loads((both_runs['plugin_dir'] / f'{pred.stem}_score.json').read_text())
        assert kit_scores == plugin_scores, data
        assert kit_scores.get('counts', {}).get('items', kit_scores.get('n_texts')) > 0, data
    # scripts/prepare_tsv.py in the checkout builds the same TSV as the plugin, and prints the md5 to host it with.
    from vlmeval_ext.core.io import file_md5
    from vlmeval_ext.rococo import data as D
    retrieval = both_runs['tmp'] / 'retrieval'
    ours = D.write_tsv(D.frame_for(RETRIEVAL, retrieval / 'annotations', retrieval / 'coco', None),
                       str(both_runs['tmp'] / f'{RETRIEVAL}.tsv'))
    assert both_runs['prepared'].read_bytes() == Path(ours).read_bytes()
    assert f'md5 {file_md5(ours)}' in both_runs['run'].stdout


# ------------------------------------------------------------------------------ without a kit: the pure parts
KIT_INIT = '''from vlmeval.smp import load
from .aaa import AAA
from .mmm import (M1,
                  M2)

from .video_dataset_config import supported_video_datasets  # isort: skip

IMAGE_DATASET = [
    AAA, M1, M2,
]

VIDEO_DATASET = [
    VVV,
]
'''


def test_dataset_list_edit_is_undone_exactly_and_refuses_an_unknown_layout():
    from vlmeval_ext.errors import ExtError
    from vlmeval_ext.upstream_export import edit_init, strip_block
    edited = edit_init(KIT_INIT)
    assert edited.index('from .grab.dataset import GRAB') > edited.index('M2)')           # after the last import
    assert edited.index('from .grab.dataset import GRAB') < edited.index('isort: skip')
    assert edited.index('IMAGE_DATASET += [RBenchFull') < edited.index('VIDEO_DATASET = [')
    assert strip_block(edited) == KIT_INIT
    assert edit_init(edited) == edited                                                     # idempotent
    with pytest.raises(ExtError, match=r'vlmeval/dataset/__init__.py: not the kit\'s dataset list'):
        edit_init('IMAGE_DATASET = []\n')


def test_module_mapping_and_plugin_only_code():
    from vlmeval_ext.upstream_export import drop_plugin_only, kit_module, rewrite_source
    assert kit_module('vlmeval_ext.grab.score') == 'vlmeval.dataset.grab.score'
    assert kit_module('vlmeval_ext.core.io') == 'vlmeval.dataset.bench_core.io'
    assert kit_module('vlmeval_ext.errors') == 'vlmeval.dataset.bench_core.errors'
    assert kit_module('vlmeval_ext.rococo.models') == 'vlmeval.vlm.rococo_embedding'
    assert rewrite_source('from vlmeval_ext.core.io import DataError  # see `vlmeval-ext prepare GRAB`\n') == \
        'from vlmeval.dataset.bench_core.io import DataError  # see `python scripts/prepare_tsv.py GRAB`\n'
    source = '''from .prompt import naive, real


class D:
    def evaluate(self):
        spec = load()
        self.manifest_extra = {'spec': spec}
        return real()

    @classmethod
    def naive_prediction(cls):
        return naive()

    def other(self):
        return 1
'''
    assert drop_plugin_only(source) == '''from .prompt import real


class D:
    def evaluate(self):
        return real()

    def other(self):
        return 1
'''


def test_refuses_a_folder_that_is_no_git_checkout(tmp_path):
    for path in ('run.py', 'vlmeval/dataset/__init__.py', 'vlmeval/dataset/image_base.py', 'vlmeval/smp/__init__.py'):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text('')
    proc = export(tmp_path, tmp_path / 'x.patch', kit_environment(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f'[vlmeval-ext] ERROR: {tmp_path} is not a git checkout (the export ends with a `git diff`): clone '
        'VLMEvalKit, or run `git init && git add -A && git commit -m base` in it first']
    assert not (tmp_path / 'vlmeval' / 'dataset' / 'grab').exists()
