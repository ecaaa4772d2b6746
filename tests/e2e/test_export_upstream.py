"""`vlmeval-ext export-upstream`: one patch per benchmark that adds our kit-dialect files, as they are, to a VLMEvalKit
checkout, and that checkout's own run.py scoring exactly as the plugin does.

The installed kit is copied to a temporary git repository laid out as a checkout (the upstream leg: the editable
checkout; the ms-vlmeval leg: the wheel's vlmeval package, whose vlmeval/run.py is the repository's run.py), so the
real installation is never touched. Each patch must apply alone, and after any other; with only that patch
applied, a copy's run.py runs its demo split (placed under the real split name) with the loopback server as model
and judge, in a process where the copy's `vlmeval` is imported and vlmeval_ext is not; the plugin then evaluates
the very same prediction files with the same deterministic judge, and every score the kit dialect writes must be
equal.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers.kit_checkout import _git, copy_checkout, installed_kit
from helpers.kit_run import REPO_ROOT, kit_environment, run_kit
from helpers.loopback_server import LoopbackServer
from vlmeval_ext.cli.export_upstream import is_proposal, kit_files
from vlmeval_ext.registry import BENCHMARKS

SENT = [r for r in BENCHMARKS if not is_proposal(r)]         # the pull requests; RoCOCO retrieval is a proposal

# demo split -> (the real split name it runs under in the checkout, the class the patch adds)
DEMOS = {'GRAB_DEMO': 'GRAB', 'ReMI_DEMO': 'ReMI', 'R-Bench-Full_DEMO': 'R-Bench-Full',
         'RoCOCO-MCQ-same_concept_DEMO': 'RoCOCO-MCQ-same_concept'}
PATCH_LINES_MAX = 1200
PREFLIGHT = 'Reply with the single word: ready'
GRAB_JUDGE = 'Return only the extracted numeric answer'
RBENCH_JUDGE = 'Please only provide the result in the following format: Score:'


def _demo_answers() -> list[tuple[str, str]]:
    pairs = []
    for path in sorted((REPO_ROOT / 'vlmeval_ext' / 'demo').glob('*.tsv')):
        demo = pd.read_csv(path, sep='\t', dtype=str, keep_default_na=False, usecols=['question', 'answer'])
        for question, answer in zip(demo['question'], demo['answer']):
            piece = max(re.split(r'<image\d>', question), key=len).strip()[:60]
            pairs.append((piece, answer))
    return pairs


DEMO_ANSWERS = _demo_answers()


def deterministic_reply(request: dict) -> str:
    """The same reply to the same request in every process (a hash of the prompt picks it): model replies right,
    right in prose or JSON, or wrong; judge replies verdicts, a number read off the response, or no verdict."""
    texts = []
    for message in request.get('messages', []):
        content = message.get('content', '')
        for part in content if isinstance(content, list) else [{'type': 'text', 'text': content}]:
            texts.append(part.get('text', '') if part.get('type') == 'text' else '')
    prompt = '\n'.join(texts)
    if PREFLIGHT in prompt or 'Connection test' in prompt:
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


def export(kit: Path, out: Path, env: dict, *extra) -> subprocess.CompletedProcess:
    return run_kit(['export-upstream', '--kit', kit, '--patch-dir', out, *extra], env=env,
                   entry=('-m', 'vlmeval_ext'), timeout=300)


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('export')
    kit = copy_checkout(*installed_kit(), tmp / 'VLMEvalKit')
    env = kit_environment(tmp)
    proc = export(kit, tmp / 'patches', env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {'tmp': tmp, 'kit': kit, 'patches': tmp / 'patches', 'stdout': proc.stdout, 'env': env}


def image_dataset_names(init: str) -> list[str]:
    import ast
    node = next(n for n in ast.parse(init).body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], 'id', None) == 'IMAGE_DATASET')
    return [e.id for e in node.value.elts]


def test_each_benchmark_is_one_patch_that_applies_alone(exported):
    kit, patches = exported['kit'], exported['patches']
    sizes = {}
    for record in SENT:
        patch = patches / f'{record.key}.patch'
        text = patch.read_text()
        sizes[record.key] = text.count('\n')
        assert sizes[record.key] <= PATCH_LINES_MAX, (record.key, sizes[record.key])
        assert 'vlmeval_ext' not in text, f'{record.key}: the patch mentions the plugin'
        added = set(re.findall(r'^\+\+\+ b/(\S+)', text, re.M))
        assert set(kit_files(record)) <= added <= {*kit_files(record), 'vlmeval/dataset/__init__.py',
                                                   'vlmeval/vlm/__init__.py', 'vlmeval/config.py'}
        _git(kit, 'apply', '--check', str(patch))                         # alone, on the checkout's HEAD
        md = (patches / f'{record.key}.md').read_text()
        assert md.startswith(f'# Add {record.title}') and 'DATASET_URL' in md
        # the maintainers get the kit's way (the build script), not the plugin's commands
        assert 'vlmeval-ext prepare' not in md and '--url-base' not in md and 'scripts/build_' in md
    assert f"{sizes['GRAB']} lines" in exported['stdout']
    assert 'To fill in DATASET_MD5: `vlmeval-ext prepare NAME`' in exported['stdout']
    assert 'To fill in DATASET_URL: export again with --url-base' in exported['stdout']
    print(f'\n[figures] export-upstream patch sizes (lines): {sizes}')
    # RoCOCO retrieval: a design proposal for the maintainers, its patch an appendix, no pull request
    assert not (patches / 'RoCOCO-retrieval.patch').exists() and not (patches / 'RoCOCO-retrieval.md').exists()
    proposal = (patches / 'RoCOCO-retrieval-proposal.md').read_text()
    assert proposal.startswith('# Proposal: embedding-model benchmarks in VLMEvalKit')
    assert 'not a dataset pull request' in proposal and '## Appendix' in proposal
    assert '+++ b/vlmeval/dataset/rococo_retrieval.py' in proposal and "'RoCOCO-CLIP-B32'" in proposal
    assert 'RoCOCO-retrieval-proposal.md (a design proposal' in exported['stdout']
    # the one line about a benchmark with no pull-request facts is for a patch only, never for the proposal
    assert 'no entry in dataset_specs/pull_requests.yaml' not in exported['stdout'], exported['stdout']


def test_the_files_sent_are_the_files_the_plugin_runs(exported, tmp_path):
    """Without --url-base and without prepared TSVs, every added file is ours byte for byte."""
    kit = tmp_path / 'applied'
    shutil.copytree(exported['kit'], kit)
    before = image_dataset_names((kit / 'vlmeval' / 'dataset' / '__init__.py').read_text())
    for record in SENT:
        _git(kit, 'apply', str(exported['patches'] / f'{record.key}.patch'))
        for kit_path, ours in kit_files(record).items():
            assert (kit / kit_path).read_bytes() == ours.read_bytes(), kit_path
        # registered as the kit registers a dataset: a line of its own inside the list
        init = (kit / 'vlmeval' / 'dataset' / '__init__.py').read_text()
        cls = record.kit_class.partition(':')[2]
        assert sorted(image_dataset_names(init)) == sorted([*before, cls]) and f'    {cls},\n' in init
        _git(kit, 'reset', '-q', '--hard')
        _git(kit, 'clean', '-qfdx')
    _git(kit, 'apply', str(exported['patches'] / 'all.patch'))           # every pull request at once
    names = image_dataset_names((kit / 'vlmeval' / 'dataset' / '__init__.py').read_text())
    assert sorted(names) == sorted([*before, *(r.kit_class.partition(':')[2] for r in SENT)])


def test_the_patches_apply_one_after_another_in_any_order(exported, tmp_path):
    """Two pull requests merged one after the other: each pair in both orders, with `git apply --3way` (the
    index follows, as a merge's would), then all of them in reverse order; every class is registered once."""
    import itertools
    kit = tmp_path / 'merged'
    shutil.copytree(exported['kit'], kit)
    _git(kit, 'reset', '-q', '--hard')                     # the copy's index, refreshed for its new files
    before = image_dataset_names((kit / 'vlmeval' / 'dataset' / '__init__.py').read_text())
    orders = [*itertools.permutations(SENT, 2), tuple(reversed(SENT))]
    for order in orders:
        for record in order:
            _git(kit, 'apply', '--3way', str(exported['patches'] / f'{record.key}.patch'))
        init = (kit / 'vlmeval' / 'dataset' / '__init__.py').read_text()
        assert '<<<<<<<' not in init, [r.key for r in order]
        added = [r.kit_class.partition(':')[2] for r in order]
        assert sorted(image_dataset_names(init)) == sorted([*before, *added]), [r.key for r in order]
        for record in order:
            module = record.kit_class.partition(':')[0].rsplit('.', 1)[1]
            assert init.count(f'from .{module} import ') == 1
        _git(kit, 'reset', '-q', '--hard')
        _git(kit, 'clean', '-qfdx')
    print(f'\n[figures] export-upstream: {len(orders)} orders of the {len(SENT)} pull requests applied with --3way')


def test_export_again_gives_the_same_patches_and_refuses_bad_places(exported, tmp_path):
    again = tmp_path / 'again'
    proc = export(exported['kit'], again, exported['env'])
    assert proc.returncode == 0, proc.stderr
    for record in SENT:
        assert (again / f'{record.key}.patch').read_text() == (exported['patches'] / f'{record.key}.patch').read_text()
    assert _git(exported['kit'], 'status', '--porcelain') == ''             # the checkout itself is untouched
    proc = export(exported['kit'], exported['kit'] / 'patches', exported['env'])
    assert proc.returncode == 2 and 'is inside the checkout' in proc.stderr
    plain = tmp_path / 'plain'
    shutil.copytree(exported['kit'], plain, ignore=shutil.ignore_patterns('.git'))
    proc = export(plain, tmp_path / 'out', exported['env'])
    assert proc.returncode == 2 and 'is not a git checkout' in proc.stderr
    proc = export(tmp_path, tmp_path / 'out', exported['env'])
    assert proc.returncode == 2 and 'is not a VLMEvalKit checkout' in proc.stderr


def test_a_link_planted_in_the_patch_dir_is_refused_not_written_through(exported, tmp_path):
    out = tmp_path / 'out'
    out.mkdir()
    config = exported['kit'] / 'vlmeval' / 'config.py'
    before = config.read_bytes()
    (out / 'GRAB.patch').symlink_to(config)
    proc = export(exported['kit'], out, exported['env'], '--only', 'GRAB')
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert 'GRAB.patch is a symbolic link' in proc.stderr and 'never written through a link' in proc.stderr
    assert config.read_bytes() == before and _git(exported['kit'], 'status', '--porcelain') == ''


def test_a_kit_commit_without_the_image_dataset_list_is_one_line(exported, tmp_path):
    kit = tmp_path / 'other-kit'
    shutil.copytree(exported['kit'], kit)
    init = kit / 'vlmeval' / 'dataset' / '__init__.py'
    init.write_text(init.read_text().replace('IMAGE_DATASET = [', 'IMAGE_DATASET_LIST = ['))
    _git(kit, 'commit', '-qam', 'the list renamed')
    proc = export(kit, tmp_path / 'out', exported['env'], '--only', 'GRAB')
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr and len(lines) == 1, proc.stderr
    assert 'has no top-level `IMAGE_DATASET = [...]` list' in lines[0]


def test_url_base_and_a_prepared_tsv_fill_the_two_values(exported, tmp_path):
    env = dict(exported['env'])
    lmu = Path(env['LMUData'])
    shutil.copyfile(REPO_ROOT / 'vlmeval_ext' / 'demo' / 'GRAB_DEMO.tsv', lmu / 'GRAB.tsv')
    from vlmeval_ext.io import file_md5
    (lmu / 'GRAB.tsv.md5').write_text(file_md5(lmu / 'GRAB.tsv') + '\n')
    proc = export(exported['kit'], tmp_path / 'filled', env, '--url-base', 'https://example.org/tsv', '--only',
                  'GRAB')
    assert proc.returncode == 0, proc.stderr
    patch = (tmp_path / 'filled' / 'GRAB.patch').read_text()
    assert "+        'GRAB': 'https://example.org/tsv/GRAB.tsv'," in patch
    assert f"+        'GRAB': '{file_md5(lmu / 'GRAB.tsv')}'," in patch
    assert 'DATASET_URL: left empty' not in (tmp_path / 'filled' / 'GRAB.md').read_text()


# The checkout's own run.py as `python run.py ...` runs it; then which vlmeval ran and whether any vlmeval_ext
# module was imported in that process.
DRIVER = '''import runpy, sys
kit = sys.argv[1]
sys.argv = [kit + '/run.py'] + sys.argv[2:]
try:
    runpy.run_path(kit + '/run.py', run_name='__main__')
except SystemExit as stop:
    if stop.code not in (None, 0):
        raise
import vlmeval
print('EXPORT-CHECK vlmeval=' + vlmeval.__file__)
print('EXPORT-CHECK plugin=' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'vlmeval_ext')))
'''


def patched_checkout(exported, split: str, lmu: Path, tmp_path: Path, model: dict) -> tuple[Path, Path]:
    """A copy of the checkout with only this split's patch applied, the demo TSV under $LMUData as the split, and a
    --config naming the model and the split: (the copy, the config file)."""
    from vlmeval_ext.registry import benchmark_of
    demo = next(d for d, s in DEMOS.items() if s == split)
    shutil.copyfile(REPO_ROOT / 'vlmeval_ext' / 'demo' / f'{demo}.tsv', lmu / f'{split}.tsv')
    kit = tmp_path / f'applied-{split}'
    shutil.copytree(exported['kit'], kit)
    _git(kit, 'apply', str(exported['patches'] / f'{benchmark_of(split).key}.patch'))   # this one alone
    config = tmp_path / f'config-{split}.json'
    config.write_text(json.dumps({'model': model,
                                  'data': {split: {'class': record_class(split), 'dataset': split}}}))
    return kit, config


def test_demos_through_the_checkouts_run_py_score_as_the_plugin(exported, tmp_path):
    """Each pull request alone: a copy of the checkout with only that patch, its demo split through the copy's own
    run.py (the four copies run at once), then the plugin on the very same predictions: every score equal."""
    (tmp_path / 'driver.py').write_text(DRIVER)
    with LoopbackServer() as server:
        server.default = deterministic_reply
        env = kit_environment(tmp_path / 'kit-run', server)
        lmu = Path(env['LMUData'])
        runs = {}
        for split in DEMOS.values():
            kit, config = patched_checkout(exported, split, lmu, tmp_path, {'LoopbackGPT': {
                'class': 'GPT4V', 'model': 'loopback-model', 'api_base': server.chat_url, 'img_size': -1,
                'retry': 1, 'temperature': 0, 'timeout': 20}})
            work = tmp_path / 'kit-run' / f'out-{split}'
            log = open(tmp_path / f'run-{split}.log', 'w+')
            proc = subprocess.Popen([sys.executable, str(tmp_path / 'driver.py'), str(kit), '--config',
                                     str(config), '--work-dir', str(work), '--judge',
                                     'loopback-judge', '--api-nproc', '4'],
                                    env={**env, 'PYTHONPATH': str(kit), 'PRED_FORMAT': 'tsv'}, cwd=tmp_path,
                                    stdout=log, stderr=subprocess.STDOUT, text=True)
            runs[split] = (proc, log, kit, work)
        for split, (proc, log, kit, work) in runs.items():
            code = proc.wait(timeout=900)
            log.seek(0)
            out = log.read()
            log.close()
            assert code == 0, (split, out[-4000:])
            checks = dict(line.split(' ', 1)[1].split('=', 1) for line in out.splitlines()
                          if line.startswith('EXPORT-CHECK '))
            assert checks['vlmeval'].startswith(str(kit)) and checks['plugin'] == '', checks
        # The plugin on the very same prediction files, against the same judge.
        assert_plugin_scores_as_the_kit('LoopbackGPT', {split: work for split, (_, _, _, work) in runs.items()},
                                        lmu, server, tmp_path)


def assert_plugin_scores_as_the_kit(model: str, works: dict, lmu: Path, server, tmp_path: Path) -> None:
    """`vlmeval-ext eval` on each prediction file a checkout's run.py wrote, against the same judge: every entry of
    the checkout's score file is in the plugin's, equal (the judge block without its call counts)."""
    plugin_env = kit_environment(tmp_path / f'plugin-run-{model}', server)
    for split in works:
        shutil.copyfile(lmu / f'{split}.tsv', Path(plugin_env['LMUData']) / f'{split}.tsv')
    for split, work in works.items():
        pred = next(p for p in work.rglob(f'{model}_{split}.tsv') if not p.is_symlink())
        folder = tmp_path / f'plugin-run-{model}' / split
        folder.mkdir()
        mine = shutil.copy2(pred, folder / pred.name)
        proc = run_kit(['eval', '--data', split, '--pred', mine, '--judge', 'loopback-judge',
                        '--judge-base-url', server.chat_url, '--api-nproc', '4'], env=plugin_env,
                       entry=('-m', 'vlmeval_ext'))
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        kit_score = json.loads(next(p for p in work.rglob(f'{model}_{split}_score.json')
                                    if not p.is_symlink()).read_text())
        plugin_score = json.loads((folder / f'{model}_{split}_score.json').read_text())
        assert kit_score, (model, split)
        for key, value in kit_score.items():
            if key == 'judge' and isinstance(value, dict):       # the endpoint is another run's, same host
                value = {k: v for k, v in value.items() if k not in ('calls_made', 'calls_cached')}
                plugin = {k: v for k, v in plugin_score[key].items() if k in value}
                assert plugin == value, (model, split, key)
                continue
            assert plugin_score[key] == value, (model, split, key)


def test_a_tiny_qwen2_vl_through_each_patched_checkouts_run_py_scores_as_the_plugin(exported, tmp_path):
    """Each pull request alone, with a real model class of the kit's zoo: the kit's own `Qwen2VLChat` on a tiny
    random-weight Qwen2-VL checkpoint (its CUDA plumbing moved to the CPU by tests/helpers/cpu_kit_run.py, nothing
    of its prompt code), the demo split through the patched copy's own run.py, then the plugin on the very same
    predictions: every score equal. The model read each row's images (the processor's record)."""
    from helpers.tiny_vlms import make_tiny_qwen2_vl
    checkpoint, _ = make_tiny_qwen2_vl(tmp_path / 'tiny-qwen2-vl')
    driver = REPO_ROOT / 'tests' / 'helpers' / 'cpu_kit_run.py'
    with LoopbackServer() as server:
        server.default = deterministic_reply
        env = kit_environment(tmp_path / 'kit-run', server)
        lmu = Path(env['LMUData'])
        works = {}
        for split in DEMOS.values():
            kit, config = patched_checkout(exported, split, lmu, tmp_path, {'tiny-qwen2-vl': {
                'class': 'Qwen2VLChat', 'model_path': str(checkpoint), 'max_new_tokens': 8}})
            works[split] = work = tmp_path / 'kit-run' / f'out-{split}'
            record = tmp_path / f'received-{split}.jsonl'
            proc = subprocess.run([sys.executable, str(driver), str(record), '--config',
                                   str(config), '--work-dir', str(work), '--judge',
                                   'loopback-judge', '--api-nproc', '4'],
                                  env={**env, 'PYTHONPATH': str(kit), 'PRED_FORMAT': 'tsv',
                                       'KIT_RUN_PY': str(kit / 'run.py')},
                                  cwd=tmp_path, capture_output=True, text=True, timeout=900)
            out = proc.stdout + proc.stderr
            assert proc.returncode == 0, (split, out[-4000:])
            checks = dict(line.split(' ', 1)[1].split('=', 1) for line in proc.stdout.splitlines()
                          if line.startswith('EXPORT-CHECK '))
            assert checks['vlmeval'].startswith(str(kit)) and checks['plugin'] == '', checks
            received = [json.loads(line) for line in record.read_text().splitlines()]
            rows = pd.read_csv(lmu / f'{split}.tsv', sep='\t', dtype=str, keep_default_na=False)
            assert len(received) == len(rows) and all(r['n_images'] >= 1 for r in received), split
        assert_plugin_scores_as_the_kit('tiny-qwen2-vl', works, lmu, server, tmp_path)


def record_class(split: str) -> str:
    from vlmeval_ext.registry import benchmark_of
    return benchmark_of(split).kit_class.partition(':')[2]


def test_the_rococo_mcq_build_script_in_its_patched_checkout_writes_the_bytes_prepare_writes(exported, tmp_path,
                                                                                            fixtures_dir):
    """The RoCOCO-MCQ pull request alone on a copy of the checkout, its scripts/build_rococo_mcq_tsv.py run there as a
    maintainer would (`python scripts/...` with the checkout's vlmeval, whose rococo_mcq utils hold the prompt), on
    real annotation entries (an 11-caption entry among them) and a generated COCO root: the same TSV, byte for byte,
    as the plugin's `prepare`, and the md5 it prints is that file's."""
    from helpers.rococo_sources import write_sources
    from vlmeval_ext.prepare import rococo as P
    ann_dir, coco = write_sources(fixtures_dir, tmp_path)
    kit = tmp_path / 'applied'
    shutil.copytree(exported['kit'], kit)
    _git(kit, 'apply', str(exported['patches'] / 'RoCOCO-MCQ.patch'))
    env = {**exported['env'], 'PYTHONPATH': str(kit)}
    proc = subprocess.run([sys.executable, 'scripts/build_rococo_mcq_tsv.py', '--annotation',
                           str(ann_dir / 'same_concept.json'), '--coco-root', str(coco), '--out',
                           str(tmp_path / 'script.tsv')], cwd=kit, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = P.frame_for('RoCOCO-MCQ-same_concept', ann_dir, coco, lazy_images=True)
    P.write_tsv_streaming(frame, tmp_path / 'prepare.tsv')
    script_bytes = (tmp_path / 'script.tsv').read_bytes()
    assert script_bytes == (tmp_path / 'prepare.tsv').read_bytes() and script_bytes.count(b'\n') == 6
    assert proc.stdout.strip().splitlines()[-1] == f'md5 {hashlib.md5(script_bytes).hexdigest()}'
