"""The kit's own local model classes, end to end on tiny random-weight checkpoints: `Qwen2VLChat` (Qwen2-VL) and
`PaliGemma` (INTERLEAVE = False), each named in a `--config`, through our run.py on the four demo splits and one
`-RC` dataset.

The kit's code assembles each prompt, processes the images and generates; our evaluation scores what comes out
(random text: scored, wrong, never a crash). What the model received is read where the kit hands it over, the
processor's input (tests/helpers/cpu_kit_run.py records each call), and compared with our datasets' own messages:
the same texts in the same order, one image place per image for Qwen2-VL, and the number of images.

Only the classes' CUDA plumbing is changed for this CPU machine, in tests/helpers/cpu_kit_run.py (each patched call
is listed in its docstring): the GPU-memory assert, `attn_implementation='flash_attention_2'`, `.cuda()`,
`inputs.to('cuda')`, `device_map='cuda'`. Nothing of the prompt, message or processing code.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from helpers.kit_run import REPO_ROOT, kit_environment, write_config
from helpers.kit_tables import mcq_tsv
from helpers.tiny_vlms import make_tiny_paligemma, make_tiny_qwen2_vl

DRIVER = REPO_ROOT / 'tests' / 'helpers' / 'cpu_kit_run.py'
DEMOS = {'GRAB_DEMO': 'GRAB', 'R-Bench-Full_DEMO': 'RBenchFull', 'RoCOCO-MCQ-same_concept_DEMO': 'RoCOCOMCQ'}
RC = 'AI2D_MINI-RC'


def _run(record: Path, args: list, env: dict, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DRIVER), str(record), *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def _received(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text(encoding='utf-8').splitlines()]


def _messages(lmu: Path, names: list[str]) -> dict[str, list[list[dict]]]:
    """Our datasets' own message for every row, as the kit builds the dataset (after register())."""
    os.environ['LMUData'] = str(lmu)
    import vlmeval_ext
    vlmeval_ext.register()
    from vlmeval.dataset import build_dataset
    out = {}
    for name in names:
        dataset = build_dataset(name)
        out[name] = [dataset.build_prompt(dataset.data.iloc[i]) for i in range(len(dataset.data))]
    return out


def _qwen_text(message: list[dict]) -> str:
    """Qwen2-VL's chat template (the checkpoint's) applied to one message: an image place per image, in order."""
    body = ''.join('<|vision_start|><|image_pad|><|vision_end|>' if m['type'] == 'image' else m['value']
                   for m in message)
    return f'<|im_start|>user\n{body}<|im_end|>\n<|im_start|>assistant\n'


def _one_image_text(message: list[dict]) -> str:
    """What the kit's BaseModel.message_to_promptimg gives a model with INTERLEAVE = False: the texts joined."""
    return '\n'.join(m['value'] for m in message if m['type'] == 'text')


def _score(out: Path, model: str, name: str) -> dict:
    found = sorted((out / model).rglob(f'{model}_{name}_score.json'), key=lambda p: p.stat().st_mtime_ns)
    assert found, f'no score file for {model} x {name}'
    return json.loads(found[-1].read_text())


@pytest.fixture(scope='module')
def work(tmp_path_factory, loopback_module):
    """LMUData with the -RC base dataset built by `vlmeval-ext corrupt`, and the environment of both runs."""
    root = tmp_path_factory.mktemp('kit_models')
    env = kit_environment(root, loopback_module)
    env.update(PRED_FORMAT='tsv', PYTHONWARNINGS='ignore')
    lmu = root / 'LMUData'
    mcq_tsv().to_csv(lmu / 'AI2D_MINI.tsv', sep='\t', index=False)
    proc = subprocess.run([sys.executable, '-m', 'vlmeval_ext', 'corrupt', '--data', 'AI2D_MINI', '--distortions',
                           '26', '--strengths', '3'], env=env, cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, env, lmu


@pytest.fixture(scope='module')
def loopback_module():
    """The judge for R-Bench (and GRAB's llm_extracted): a loopback server answering '1' to every prompt."""
    from helpers.loopback_server import LoopbackServer
    with LoopbackServer() as server:
        server.default = '1'
        yield server


def _config(model: str, entry: dict, names: list[str]) -> dict:
    classes = {**DEMOS, 'ReMI_DEMO': 'ReMI', 'ReMI_DEMO_composite': 'ReMI', RC: 'CorruptedDataset',
               'RoCOCO-I2T-clean': 'RoCOCORetrieval'}
    return {'model': {model: entry}, 'data': {n: {'class': classes[n], 'dataset': n} for n in names}}


@pytest.fixture(scope='module')
def qwen2_vl_run(work):
    root, env, lmu = work
    start = time.time()
    path, params = make_tiny_qwen2_vl(root / 'tiny-qwen2-vl')
    built = time.time() - start
    names = [*DEMOS, 'ReMI_DEMO', RC]
    cfg = _config('tiny-qwen2-vl', {'class': 'Qwen2VLChat', 'model_path': str(path), 'max_new_tokens': 8}, names)
    record = root / 'qwen2_vl_inputs.jsonl'
    (root / 'q').mkdir()
    start = time.time()
    proc = _run(record, ['--config', write_config(root / 'q', cfg), '--work-dir', root / 'out',
                         '--judge', 'loopback-judge', '--api-nproc', '2'], env, root)
    ran = time.time() - start
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    print(f'\n[tiny models] Qwen2-VL: {params} parameters, '
          f'{sum(f.stat().st_size for f in path.iterdir()) / 1e3:.0f} KB, built in {built:.1f} s; run.py {ran:.0f} s')
    return root, lmu, names, _received(record)


def test_qwen2_vl_receives_our_prompts_and_images_in_order(qwen2_vl_run):
    root, lmu, names, received = qwen2_vl_run
    expected = _messages(lmu, names)
    rows = [m for name in names for m in expected[name]]
    assert len(received) == len(rows)                           # one processor call per row, nothing re-asked
    assert {r['processor'] for r in received} == {'Qwen2VLProcessor'}
    for r in received:
        assert r['n_images'] == r['text'].count('<|image_pad|>') >= 1
    # the same texts, the same image places: the kit's Qwen2VLChat assembled exactly our message (Qwen2VLChat claims
    # MCQ / VQA datasets for its own prompt; the datasets' force_use_dataset_prompt keeps ours, the -RC rows' too:
    # the base dataset's prompt on the reference and on every distorted row)
    assert Counter(r['text'] for r in received) == Counter(_qwen_text(m) for m in rows)
    # ReMI: 2-6 images per question, in the order of the message (the demo's images differ in width per slot)
    remi = {_qwen_text(m): m for m in expected['ReMI_DEMO']}
    multi = [r for r in received if r['text'] in remi]
    assert len(multi) == len(expected['ReMI_DEMO']) and max(r['n_images'] for r in multi) >= 3
    from PIL import Image
    for r in multi:
        sizes = [Image.open(m['value']).size for m in remi[r['text']] if m['type'] == 'image']
        assert len(r['image_sizes']) == len(sizes)
        order = sorted(range(len(sizes)), key=lambda k: sizes[k][0])
        got = sorted(range(len(sizes)), key=lambda k: r['image_sizes'][k][0])
        assert got == order
    # R-Bench MCQ keeps its options, GRAB its README prompt
    assert any('A.' in r['text'] and 'B.' in r['text'] for r in received if r['text'] in
               {_qwen_text(m) for m in expected['R-Bench-Full_DEMO']})


def test_qwen2_vl_outputs_are_scored_never_a_crash(qwen2_vl_run):
    root, _, names, _ = qwen2_vl_run
    out = root / 'out'
    grab = _score(out, 'tiny-qwen2-vl', 'GRAB_DEMO')
    assert grab['counts']['items'] == 41 and grab['counts']['inference_failures'] == 0
    remi = _score(out, 'tiny-qwen2-vl', 'ReMI_DEMO')
    assert remi['input_mode'] == 'interleaved' and remi['counts']['inference_failures'] == 0
    rbench = _score(out, 'tiny-qwen2-vl', 'R-Bench-Full_DEMO')
    assert rbench['judge']['model'] == 'loopback-judge'
    rococo = _score(out, 'tiny-qwen2-vl', 'RoCOCO-MCQ-same_concept_DEMO')
    assert rococo['counts']['inference_failures'] == 0
    rc = _score(out, 'tiny-qwen2-vl', RC)
    assert rc['failures']['ref']['inference_failed'] == 0


@pytest.fixture(scope='module')
def paligemma(work):
    root, _, _ = work
    start = time.time()
    path, params = make_tiny_paligemma(root / 'tiny-paligemma')
    print(f'\n[tiny models] PaliGemma: {params} parameters, '
          f'{sum(f.stat().st_size for f in path.iterdir()) / 1e3:.0f} KB, built in {time.time() - start:.1f} s')
    return path


def test_paligemma_is_refused_remi_and_retrieval_before_it_is_built(work, paligemma):
    """INTERLEAVE = False: ReMI_DEMO stops before any model is built, naming the composite mode; a generative
    model on a RoCOCO retrieval split too (it would be asked about every gallery row for nothing)."""
    root, env, lmu = work
    (root / 'refused').mkdir()
    # a prepared split is all the launcher checks before the models (its rows are never read here)
    (lmu / 'RoCOCO-I2T-clean.tsv').write_text('index\tkind\timage\tquestion\n')
    cfg = _config('tiny-paligemma', {'class': 'PaliGemma', 'model_path': str(paligemma)},
                  ['ReMI_DEMO', 'RoCOCO-I2T-clean'])
    record = root / 'refused_inputs.jsonl'
    proc = _run(record, ['--config', write_config(root / 'refused', cfg), '--work-dir', root / 'out-refused'],
                env, root, timeout=120)
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    line = [x for x in proc.stderr.splitlines() if 'INTERLEAVE = False' in x]
    assert len(line) == 1 and 'tiny-paligemma (PaliGemma' in line[0] and 'ReMI_DEMO_composite' in line[0]
    assert 'only the first' in line[0]
    line = [x for x in proc.stderr.splitlines() if 'not an embedding model' in x]
    assert len(line) == 1 and 'tiny-paligemma (PaliGemma) is not an embedding model: RoCOCO-I2T-clean' in line[0]
    assert 'RoCOCO-CLIP-B32' in line[0]
    assert not record.exists()                        # no processor was ever called
    (lmu / 'RoCOCO-I2T-clean.tsv').unlink()


def test_paligemma_gets_one_image_and_our_texts(work, paligemma):
    root, env, lmu = work
    names = ['GRAB_DEMO', 'ReMI_DEMO_composite', 'RoCOCO-MCQ-same_concept_DEMO', RC]
    (root / 'p').mkdir()
    cfg = _config('tiny-paligemma', {'class': 'PaliGemma', 'model_path': str(paligemma)}, names)
    record = root / 'paligemma_inputs.jsonl'
    start = time.time()
    proc = _run(record, ['--config', write_config(root / 'p', cfg), '--work-dir', root / 'out'], env, root)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    print(f'\n[tiny models] PaliGemma: run.py {time.time() - start:.0f} s')
    received = _received(record)
    expected = _messages(lmu, names)
    rows = [m for name in names for m in expected[name]]
    assert len(received) == len(rows)
    assert {r['processor'] for r in received} == {'PaliGemmaProcessor'}
    assert all(r['n_images'] == 1 for r in received)            # the composite mode's one tiled image too
    # PaliGemma builds no prompt of its own: every row, the -RC rows too, is our message's text
    assert Counter(r['text'] for r in received) == Counter(_one_image_text(m) for m in rows)
    out = root / 'out'
    assert _score(out, 'tiny-paligemma', 'ReMI_DEMO_composite')['input_mode'] == 'composite'
    assert _score(out, 'tiny-paligemma', 'GRAB_DEMO')['counts']['items'] == 41


@pytest.mark.parametrize('model', ['360VL-70B', 'paligemma2-3b-mix-224'])
def test_a_zoo_model_that_takes_one_image_is_refused_remi_in_seconds(model, tmp_path):
    """`run.py --data ReMI_DEMO --model <INTERLEAVE = False zoo model>`: one line with the composite command, exit 2,
    before any model is built (no weights here: building one would fail at the download instead)."""
    env = kit_environment(tmp_path)
    proc = subprocess.run([sys.executable, str(REPO_ROOT / 'run.py'), '--data', 'GRAB_DEMO', 'ReMI_DEMO', '--model',
                           model, '--work-dir', str(tmp_path / 'out')], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    lines = [x for x in proc.stderr.splitlines() if 'INTERLEAVE = False' in x]
    assert len(lines) == 1 and lines[0].startswith('[vlmeval-ext] ERROR:') and f'{model} (' in lines[0]
    assert lines[0].endswith(f'python run.py --data GRAB_DEMO ReMI_DEMO_composite --model {model} --work-dir '
                             f'{tmp_path / "out"}')
    assert not (tmp_path / 'out' / model).exists()
