"""Bad input at each boundary, each case pinned: prompt filling, scoring reads, judge options and
keys, preparation and loading, the corruption engine's EXIF handling, the work-dir lock, the launcher's inputs,
manifests and records. Each test names the defect it pins; docs/RELIABILITY.md has a row for each."""
from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from helpers.kit_run import kit_environment, one_error_line, run_cli, run_kit

FAKE = 'sk-vlmevalext-FAKE-0123456789abcdef'


def _png(size=(32, 24), colour=(200, 10, 10)) -> bytes:
    buffer = io.BytesIO()
    Image.new('RGB', size, colour).save(buffer, format='PNG')
    return buffer.getvalue()


# ---- 2. R-Bench judge prompts are filled in one pass ----------------------------------------------------------
@pytest.mark.parametrize('kind, output', [('VQA', '{correct_ans}'), ('CAP', '{correct}')])
def test_a_reply_that_is_a_placeholder_stays_that_text_in_the_judge_prompt(kind, output):
    from vlmeval_ext.dataset.utils import rbench_full as B
    item = {'type': kind, 'question': 'What is shown?', 'answer': 'a red bus' if kind == 'VQA' else
            "['a red bus on a street']", 'choice': '', 'pred_dis': output, 'pred_ref': 'a bus'}
    plan = B.plan_score({**item, 'pair_id': 0, 'name': 'x', 'distortion': 1, 'strength': 1}, 'dis', 'official')
    prompt = plan.prompts[0]
    assert f'[{output}]' in prompt and prompt.count('a red bus') == 1, prompt


# ---- 5, 7. scoring reads ------------------------------------------------------------------------------------------
@pytest.mark.parametrize('reply', ['The correct caption is B.', 'Based on the image, the answer is B.',
                                   'B is the correct answer.', 'Looking at the image: B', 'Ｂ', 'B\u200b'])
def test_rococo_mcq_reads_a_committed_letter_wherever_it_is_stated(reply):
    from vlmeval_ext.dataset.utils.rococo_mcq import parse_choice
    options = {'A': 'a man riding a horse', 'B': 'a dog on a sofa', 'C': 'two cats', 'D': 'a red bus'}
    assert parse_choice(reply, options) == ('B', 'letter')


@pytest.mark.parametrize('reply, how', [('B or C', 'hedge'), ('A man riding a horse', 'text'),
                                        ('A dog is there', 'unparsed')])
def test_rococo_mcq_still_refuses_hedges_and_the_article_a(reply, how):
    from vlmeval_ext.dataset.utils.rococo_mcq import parse_choice
    options = {'A': 'a man riding a horse', 'B': 'a dog on a sofa', 'C': 'two cats', 'D': 'a red bus'}
    assert parse_choice(reply, options)[1] == how


@pytest.mark.parametrize('reply', ['1e309', '9e-999', '9⁹', '-9, -3, 0, 4, 12', 'Either -9 or 4',
                                   'Answer: -9. Actually -3.'])
def test_grab_normalized_credits_no_overflow_exponent_or_hedge(reply):
    from vlmeval_ext.dataset.utils.grab import normalized_score
    for answer in ('-9', '9', '999'):
        assert normalized_score(reply, answer, 'Give your answer as an integer.')[0] is False, (reply, answer)


def test_grab_normalized_reads_a_sign_word():
    from vlmeval_ext.dataset.utils.grab import normalized_score
    assert normalized_score('minus nine', '-9', 'Give your answer as an integer.')[0] is True
    assert normalized_score('minus nine', '9', 'Give your answer as an integer.')[0] is False


@pytest.mark.parametrize('reply, verdict', [('Score: 2.0', 2), ('Score:\u200b2', 2), ('Score: 1.', 1)])
def test_rbench_verdict_parser_reads_decimal_and_zero_width_forms(reply, verdict):
    from vlmeval_ext.dataset.utils.rbench_full import parse_verdict
    assert parse_verdict(reply, (0, 1, 2)) == verdict


def test_remi_lenient_ignores_a_zero_width_space():
    from vlmeval_ext.dataset.utils import remi as R
    answer, how = R.extract_answer('{"answer": "17\u200b"}')
    assert how == 'ok' and R.exact_match(R.normalise(answer), R.normalise('17'))
    assert not R.exact_match(R.normalise('{"answer": "18\u200b"}'), R.normalise('17'))


# ---- 10, 13, 11. judge options and keys ---------------------------------------------------------------------------
@pytest.mark.parametrize('value, read', [('false', False), (0, False), ('no', False), ('True', True), (1, True)])
def test_cache_option_accepts_the_obvious_spellings(value, read):
    from vlmeval_ext.judging import check_judge_options
    assert check_judge_options({'cache': value}) == {'cache': read}


@pytest.mark.parametrize('value', [None, 'maybe', 2])
def test_other_cache_values_are_one_line(value, tmp_path):
    proc = run_cli(['eval', '--data', 'GRAB_DEMO', '--pred', _grab_predictions(tmp_path), '--judge', 'j',
                    '--judge-args', json.dumps({'cache': value})], kit_environment(tmp_path))
    assert '"cache" must be true or false' in one_error_line(proc)


def test_max_tokens_is_not_taken_for_a_secret():
    from vlmeval_ext.launcher import judge_options_of, refuse_secrets
    refuse_secrets(['--judge-args', '{"max_tokens": 512, "top_p": 0.9}'])
    assert judge_options_of('{"max_tokens": 512}') == ({'max_tokens': 512}, {})


@pytest.mark.parametrize('argv, where', [
    (['--judge-key', FAKE, '--judge-key', 'x'], '--judge-key'),
    (['--judge-base-url', 'http://h:1/v1?api-key=abc123'], '?api-key'),
    (['--judge-args', json.dumps({'extra_body': {'api_key': 'abc'}})], 'extra_body'),
    (['--judge-args', json.dumps({'headers': {'Authorization': 'Bearer abcdef'}})], 'Authorization'),
])
def test_a_key_anywhere_on_the_command_line_is_refused(argv, where):
    from vlmeval_ext.launcher import RefusedArgument, refuse_secrets
    with pytest.raises(RefusedArgument, match='environment') as err:
        refuse_secrets(argv)
    assert where.lstrip('-?') in str(err.value) and FAKE not in str(err.value) and 'abc' not in str(err.value)


def test_credentials_in_a_config_api_base_are_refused():
    from vlmeval_ext.launcher import RefusedArgument, refuse_secrets
    config = {'model': {'m': {'class': 'GPT4V', 'api_base': 'http://user:pass@host/v1'}}}
    with pytest.raises(RefusedArgument, match=r'--config\.model\.m\.api_base') as err:
        refuse_secrets([], config)
    assert 'pass' not in str(err.value).replace('password', '')


# ---- 9. a damaged or foreign verdict cache: one line, exit 2, the way out named ------------------------------------
def _grab_predictions(tmp_path) -> Path:
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV
    data = pd.read_csv(GRAB_DEMO_TSV, sep='\t', dtype=str, keep_default_na=False).drop(columns=['image'])
    data['prediction'] = data['answer']
    path = tmp_path / 'M_GRAB_DEMO.tsv'
    data.to_csv(path, sep='\t', index=False)
    return path


@pytest.mark.parametrize('damage', ['text file', 'cut in half', 'other schema', 'cache is a file'])
def test_a_damaged_verdict_cache_is_one_line_naming_the_way_out(tmp_path, damage):
    import sqlite3

    from vlmeval_ext.judging import STORE_FILE, VerdictStore
    cache = tmp_path / 'cache'
    env = {**kit_environment(tmp_path), 'VLMEVAL_EXT_CACHE': str(cache)}
    if damage == 'cache is a file':
        cache.write_text('not a folder')
    else:
        cache.mkdir()
        store = cache / STORE_FILE
        if damage == 'text file':
            store.write_text('these are not the verdicts you are looking for\n' * 100)
        else:
            VerdictStore(store).close()
            if damage == 'cut in half':
                store.write_bytes(store.read_bytes()[:len(store.read_bytes()) // 2])
            else:
                with sqlite3.connect(store) as db:
                    db.execute('PRAGMA user_version = 99')
    proc = run_cli(['eval', '--data', 'GRAB_DEMO', '--pred', _grab_predictions(tmp_path), '--judge', 'j',
                    '--judge-base-url', 'http://127.0.0.1:9/v1'], env)
    line = one_error_line(proc)
    assert 'verdict cache' in line and '"cache": false' in line.replace("'", '"'), line


# ---- 15-18. preparation checks what the run needs ------------------------------------------------------------------
def test_remi_prepare_refuses_an_item_naming_an_image_it_does_not_have(tmp_path):
    from vlmeval_ext.prepare import demos
    from vlmeval_ext.prepare import remi as data
    items = demos.remi_items()[:3]
    frame = demos.remi_official_frame(items)
    frame.loc[1, 'question'] = frame.loc[1, 'question'] + ' Compare with <image7>.'
    with pytest.raises(data.ReMIDataError, match=r"row 1, column 'question'.*<image7>"):
        data.parquet_rows_to_frame(frame, 'src.parquet')


def test_remi_prepare_refuses_a_seventh_image_and_keeps_an_untagged_one(tmp_path):
    from vlmeval_ext.dataset.utils.remi import interleaved_message
    from vlmeval_ext.prepare import demos
    from vlmeval_ext.prepare import remi as data
    frame = demos.remi_official_frame(demos.remi_items()[:3])
    frame['image_7'] = [None, {'bytes': _png(), 'path': None}, None]
    with pytest.raises(data.ReMIDataError, match=r"\['image_7'\] hold images; a ReMI item has at most six"):
        data.parquet_rows_to_frame(frame, 'src.parquet')
    # an image no <imageK> names is asked after the text, never dropped
    message = interleaved_message('Which is larger, <image1> or the other one?', 'Charts', ['a.png', 'b.png'])
    assert [m['value'] for m in message if m['type'] == 'image'] == ['a.png', 'b.png']


def test_remi_prepare_refuses_a_decompression_bomb(tmp_path, monkeypatch):
    from vlmeval_ext.prepare import demos
    from vlmeval_ext.prepare import remi as data
    # Pillow's own limit (89 Mpx; a bomb past twice that): the kit, once imported, raises it to 1e9 for its process
    monkeypatch.setattr(Image, 'MAX_IMAGE_PIXELS', 89_478_485)
    frame = demos.remi_official_frame(demos.remi_items()[:2])
    buffer = io.BytesIO()
    Image.new('1', (20000, 20000)).save(buffer, format='PNG')          # 400 Mpx: a bomb, 50 kB on disk
    frame.at[1, 'image_1'] = {'bytes': buffer.getvalue(), 'path': None}
    with pytest.raises(data.ReMIDataError, match=r"row 1, column 'image_1'.*DecompressionBomb"):
        data.parquet_rows_to_frame(frame, 'src.parquet')


def test_grab_prepare_refuses_two_records_of_one_pid_and_a_key_that_is_not_a_number(tmp_path, fixtures_dir):
    records = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text(encoding='utf-8'))
    env = kit_environment(tmp_path)
    for k, (bad, says) in enumerate(((lambda r: {'0': r['0'], '1': {**r['1'], 'pid': r['0']['pid']}}, 'pid'),
                                     (lambda r: {'0': r['0'], '²': r['1']}, "'²'"))):
        src = tmp_path / f'src{k}'
        (src / 'images').mkdir(parents=True)
        chosen = bad(records)
        (src / 'grab.json').write_text(json.dumps(chosen))
        for record in chosen.values():
            Image.new('RGB', (64, 48)).save(src / record['image'])
        line = one_error_line(run_cli(['prepare', 'GRAB', '--from', src, '--allow-subset'], env))
        assert 'grab.json' in line and says in line, line


def test_rbench_prepare_refuses_a_boolean_distortion_column(tmp_path):
    from vlmeval_ext.io import DataError
    from vlmeval_ext.prepare.rbench import validate_item
    raw = {'name': 'x', 'type': 'MCQ', 'question': 'q', 'choice': "['a', 'b']", 'answer': 'a',
           'distortion': True, 'strength': 1}
    with pytest.raises(DataError, match=r"All.parquet.*row 3.*column '?distortion.*boolean"):
        validate_item(raw, 'All.parquet', 3)


def test_rococo_annotation_entry_without_caption_is_one_line(tmp_path):
    from vlmeval_ext.io import DataError
    from vlmeval_ext.prepare.rococo import parse_annotation
    with pytest.raises(DataError, match=r'danger.json: entry 1 .*"caption"'):
        parse_annotation([{'image': 'a.jpg', 'caption': [f'a dog number {k}' for k in range(5)]},
                          {'image': 'b.jpg'}], 'danger.json')


@pytest.mark.parametrize('cell', ['<html>Not Found</html>', base64.b64encode(_png()[:40]).decode()])
def test_rbench_prepare_refuses_an_image_that_does_not_decode(tmp_path, cell):
    from vlmeval_ext.io import DataError
    from vlmeval_ext.prepare.rbench import _image_bytes
    raw = cell.encode() if cell.startswith('<') else base64.b64decode(cell)
    with pytest.raises(DataError, match='row 5'):
        _image_bytes({'bytes': raw, 'path': ''}, 'All.parquet: row 5, column ref_image')


# ---- 19. EXIF orientation is applied before distorting -----------------------------------------------------------
def test_corrupt_image_applies_the_exif_orientation_first(tmp_path):
    photo = Image.new('RGB', (60, 30), (255, 255, 255))
    photo.paste((255, 0, 0), (0, 0, 10, 30))                        # a red band on the left, in the stored pixels
    exif = photo.getexif()
    exif[0x0112] = 6                                                # displayed rotated 90 degrees clockwise
    path = tmp_path / 'photo.jpg'
    photo.save(path, exif=exif, quality=95)
    proc = run_cli(['corrupt-image', path, '--out-dir', tmp_path / 'out', '--distortion', '5', '--strength', '1'],
                   kit_environment(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = Image.open(next((tmp_path / 'out').glob('*.png')))
    assert out.size == (30, 60)                                     # the displayed orientation
    assert out.getexif().get(0x0112) in (None, 1)
    top = out.convert('RGB').getpixel((15, 3))
    assert top[0] > 150 and top[1] < 120, top                       # the red band is now at the top


# ---- 22. the work-dir lock -------------------------------------------------------------------------------------------
def test_a_lock_file_planted_as_a_symlink_is_not_followed(tmp_path):
    from vlmeval_ext.errors import ExtError
    from vlmeval_ext.launcher import LOCK_DIR, RunPlan, combination_locks
    work = tmp_path / 'work'
    (work / LOCK_DIR).mkdir(parents=True)
    victim = tmp_path / 'victim.txt'
    victim.write_text('x' * 150)
    (work / LOCK_DIR / 'M__GRAB_DEMO.lock').symlink_to(victim)
    with pytest.raises(ExtError, match='symbolic link'):
        with combination_locks(RunPlan(['M'], ['GRAB_DEMO'], str(work), None)):
            pass
    assert victim.read_text() == 'x' * 150


def test_runs_of_other_datasets_in_one_work_dir_do_not_block_each_other(tmp_path):
    from vlmeval_ext.launcher import RunPlan, WorkDirBusy, combination_locks
    work = str(tmp_path / 'work')
    with combination_locks(RunPlan(['M'], ['GRAB_DEMO'], work, None)):
        with combination_locks(RunPlan(['M'], ['ReMI_DEMO'], work, None)):
            pass
        with pytest.raises(WorkDirBusy, match='M x GRAB_DEMO'):
            with combination_locks(RunPlan(['M'], ['GRAB_DEMO'], work, None)):
                pass


def test_a_work_dir_under_a_file_is_one_line(tmp_path):
    (tmp_path / 'afile').write_text('')
    proc = run_kit(['--data', 'GRAB_DEMO', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'afile' / 'w'],
                   kit_environment(tmp_path))
    assert 'cannot be created or written' in one_error_line(proc)


# ---- 23. launcher inputs ---------------------------------------------------------------------------------------------
CONFIGS = {'a JSON list': ['GRAB_DEMO'], 'data null': {'model': {'Naive-Baseline': {}}, 'data': None}}


@pytest.mark.parametrize('name', list(CONFIGS))
def test_a_config_that_is_not_the_kits_shape_is_one_line(tmp_path, name):
    path = tmp_path / 'config.json'
    path.write_text(json.dumps(CONFIGS[name]))
    line = one_error_line(run_kit(['--config', path, '--work-dir', tmp_path / 'w'], kit_environment(tmp_path)))
    assert 'config.json' in line


def test_a_prediction_format_our_scoring_cannot_read_is_one_line(tmp_path):
    env = {**kit_environment(tmp_path), 'PRED_FORMAT': 'csv'}
    line = one_error_line(run_kit(['--data', 'GRAB_DEMO', '--model', 'Naive-Baseline', '--work-dir', tmp_path / 'w'],
                                  env))
    assert 'PRED_FORMAT' in line


# ---- 25. manifests and records ---------------------------------------------------------------------------------------
def test_diff_manifests_of_a_truncated_manifest_is_one_line(tmp_path):
    good = tmp_path / 'a_manifest.json'
    good.write_text(json.dumps({'dataset': {'name': 'GRAB'}}))
    cut = tmp_path / 'b_manifest.json'
    cut.write_text('{"dataset": {"name": "GR')
    line = one_error_line(run_cli(['diff-manifests', good, cut], kit_environment(tmp_path)))
    assert 'b_manifest.json' in line


def test_records_of_predictions_of_another_dataset_is_refused(tmp_path):
    pred = _grab_predictions(tmp_path)
    line = one_error_line(run_cli(['records', pred, '--data', 'ReMI_DEMO'], kit_environment(tmp_path)))
    assert 'M_GRAB_DEMO.tsv' in line and 'ReMI_DEMO' in line
    assert not list(tmp_path.glob('*_manifest.json'))


# ---- 3, 4. the judge's endpoint and parameters key its verdicts and are compared by diff-manifests --------------
def test_another_port_or_system_prompt_reuses_nothing_and_diff_manifests_says_why(tmp_path):
    from helpers.loopback_server import LoopbackServer
    env = kit_environment(tmp_path)
    runs = {}
    with LoopbackServer() as one, LoopbackServer() as two:
        for server in (one, two):
            server.default = '3'
        plans = {'first': (one, None), 'other port': (two, None),
                 'system prompt': (one, 'Reply None to everything.')}
        for name, (server, system) in plans.items():
            folder = tmp_path / name.replace(' ', '_')
            folder.mkdir()
            pred = _grab_predictions(folder)
            args = ['eval', '--data', 'GRAB_DEMO', '--pred', pred, '--judge', 'judge-7b', '--judge-base-url',
                    server.base_url]
            if system:
                args += ['--judge-args', json.dumps({'system_prompt': system})]
            before = len(server.log)
            proc = run_cli(args, env)
            assert proc.returncode == 0, proc.stderr[-3000:]
            runs[name] = (pred.with_name('M_GRAB_DEMO_manifest.json'), len(server.log) - before)
    first_calls = runs['first'][1]
    assert first_calls > 0 and runs['other port'][1] == first_calls and runs['system prompt'][1] == first_calls
    for name, says in (('other port', 'judge.endpoint'), ('system prompt', 'judge.parameters')):
        proc = run_cli(['diff-manifests', runs['first'][0], runs[name][0]], env)
        assert proc.returncode == 1 and says in proc.stdout and 'not comparable' in proc.stdout, proc.stdout
