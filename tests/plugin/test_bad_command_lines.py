"""Hostile command lines: each bad input is one line `[vlmeval-ext] ERROR: ...`, exit 2, no traceback, nothing
written; and what the command line leaves behind after a kill."""
from __future__ import annotations

import base64
import io
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from helpers.kit_run import kit_environment, run_kit


def _cli(args, tmp_path, env=None):
    return run_kit(list(map(str, args)), env or kit_environment(tmp_path), entry=('-m', 'vlmeval_ext'))


def _one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.startswith('[vlmeval-ext] ERROR')]
    assert proc.returncode == 2, proc.stdout[-1000:] + proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr and len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def _base_tsv(lmu: Path, name: str = 'TINY_VQA', n: int = 4) -> Path:
    def png(k):
        buf = io.BytesIO()
        Image.new('RGB', (32, 32), (10 * k, 0, 0)).save(buf, format='PNG')
        return base64.b64encode(buf.getvalue()).decode()
    rows = [{'index': k, 'image': png(k), 'question': f'q{k}', 'answer': 'a'} for k in range(n)]
    path = lmu / f'{name}.tsv'
    pd.DataFrame(rows).to_csv(path, sep='\t', index=False)
    return path


@pytest.mark.parametrize('sample', ['0', '-5'])
def test_corrupt_sample_zero_or_negative_is_refused(tmp_path, sample):
    lmu = tmp_path / 'LMUData'
    lmu.mkdir()
    _base_tsv(lmu)
    proc = _cli(['corrupt', '--data', 'TINY_VQA', '--distortions', '1', '--strengths', '1', '--sample', sample],
                tmp_path)
    line = _one_error_line(proc)
    assert f'--sample {sample}' in line and 'at least 1' in line
    assert not (lmu / 'TINY_VQA-RC.tsv').exists()


def test_sample_items_refuses_non_positive():
    from vlmeval_ext.corrupt.variants import sample_items
    base = pd.DataFrame({'index': [0, 1, 2]})
    assert len(sample_items(base, 2, 0)) == 2 and len(sample_items(base, None, 0)) == 3
    for bad in (0, -5, True):
        with pytest.raises(ValueError, match='at least 1'):
            sample_items(base, bad, 0)


# ---- a killed prepare GRAB ------------------------------------------------------------------------------------------
def _grab_release(root: Path, fixtures_dir: Path, pids=(0, 570, 480)) -> Path:
    import json
    grab_json = json.loads((fixtures_dir / 'grab' / 'grab.json').read_text(encoding='utf-8'))
    (root / 'images').mkdir(parents=True)
    (root / 'grab.json').write_text(json.dumps({str(i): grab_json[str(p)] for i, p in enumerate(pids)}))
    for pid in pids:
        Image.new('RGB', (64, 48), (pid % 255, 0, 0)).save(root / grab_json[str(pid)]['image'])
    return root


def test_prepare_after_a_kill_removes_the_part_file_and_says_so(tmp_path, fixtures_dir):
    src = _grab_release(tmp_path / 'src', fixtures_dir)
    lmu = tmp_path / 'LMUData'
    lmu.mkdir()
    part = lmu / 'GRAB.tsv.part'
    part.write_text('index\tpid\tquestion\n0\t0\tWhat is the va')     # what a SIGKILL mid-write leaves
    proc = _cli(['prepare', 'GRAB', '--from', src, '--allow-subset'], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f'removed {part}' in proc.stderr and 'interrupted' in proc.stderr
    assert not part.exists() and len(pd.read_csv(lmu / 'GRAB.tsv', sep='\t')) == 3


def test_a_failing_prepare_leaves_no_part_file(tmp_path, fixtures_dir):
    src = _grab_release(tmp_path / 'src', fixtures_dir)
    next((src / 'images').iterdir()).write_bytes(b'\x89PNG\r\n\x1a\n truncated')
    lmu = tmp_path / 'LMUData'
    lmu.mkdir()
    proc = _cli(['prepare', 'GRAB', '--from', src, '--allow-subset'], tmp_path)
    assert proc.returncode != 0
    assert not (lmu / 'GRAB.tsv.part').exists() and not (lmu / 'GRAB.tsv').exists()


# ---- grab.json entries that leave the release folder ----------------------------------------------------------------
def _point_first_entry(src: Path, entry: str) -> None:
    import json
    records = json.loads((src / 'grab.json').read_text())
    records['0']['image'] = entry
    (src / 'grab.json').write_text(json.dumps(records))


@pytest.mark.parametrize('kind', ['absolute', 'dotdot', 'symlink'])
def test_grab_json_entries_leaving_the_release_folder_are_refused(tmp_path, fixtures_dir, kind):
    from vlmeval_ext.prepare import grab as data
    src = _grab_release(tmp_path / 'src', fixtures_dir)
    secret = tmp_path / 'outside' / 'secret.png'
    secret.parent.mkdir()
    Image.new('RGB', (8, 8), (1, 2, 3)).save(secret)
    entry = {'absolute': str(secret), 'dotdot': '../outside/secret.png', 'symlink': 'images/link.png'}[kind]
    if kind == 'symlink':
        (src / 'images' / 'link.png').symlink_to(secret)
    _point_first_entry(src, entry)
    with pytest.raises(data.GrabDataError, match=r'grab\.json, pid 0, column "image": .*(leaves|outside) the '
                                                 r'release folder'):
        data.build_tsv(tmp_path / 'GRAB.tsv', src, progress=False)
    assert not (tmp_path / 'GRAB.tsv').exists()


def test_a_symlink_inside_the_release_folder_is_read(tmp_path, fixtures_dir):
    from vlmeval_ext.prepare import grab as data
    src = _grab_release(tmp_path / 'src', fixtures_dir)
    import json
    first = json.loads((src / 'grab.json').read_text())['0']['image']
    (src / 'images' / 'alias.png').symlink_to(src / first)
    _point_first_entry(src, 'images/alias.png')
    assert len(pd.read_csv(data.build_tsv(tmp_path / 'GRAB.tsv', src, progress=False), sep='\t')) == 3


def test_grab_json_entry_leaving_the_folder_is_one_line_at_the_cli(tmp_path, fixtures_dir):
    src = _grab_release(tmp_path / 'src', fixtures_dir)
    _point_first_entry(src, '../../etc/passwd')
    line = _one_error_line(_cli(['prepare', 'GRAB', '--from', src], tmp_path))
    assert "'../../etc/passwd' is absolute or leaves the release folder" in line and 'pid 0' in line


# ---- one line instead of a traceback ---------------------------------------------------------------------------
def _truncated(path: Path, fmt: str) -> Path:
    buf = io.BytesIO()
    Image.effect_noise((320, 240), 60).convert('RGB').save(buf, format=fmt)
    path.write_bytes(buf.getvalue()[:len(buf.getvalue()) // 2])
    return path


def _closed_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_truncated_png_in_prepare_grab_is_one_line_naming_file_and_pid(tmp_path, fixtures_dir):
    import json
    src = _grab_release(tmp_path / 'src', fixtures_dir)
    entry = json.loads((src / 'grab.json').read_text())['1']
    _truncated(src / entry['image'], 'PNG')
    line = _one_error_line(_cli(['prepare', 'GRAB', '--from', src], tmp_path))
    assert f'pid {entry["pid"]}, column "image": {src / entry["image"]} cannot be read as an image' in line
    assert not (tmp_path / 'LMUData' / 'GRAB.tsv').exists() and not (tmp_path / 'LMUData' / 'GRAB.tsv.part').exists()


def test_truncated_jpeg_in_corrupt_image_is_one_line(tmp_path):
    bad = _truncated(tmp_path / 'photo.jpg', 'JPEG')
    line = _one_error_line(_cli(['corrupt-image', bad, '--out-dir', tmp_path / 'out', '--distortion', '1',
                                 '--strength', '1'], tmp_path))
    assert f'{bad} cannot be read as an image' in line


def test_corrupt_of_a_kit_dataset_whose_download_fails_is_one_line(tmp_path):
    env = kit_environment(tmp_path)
    proxy = f'http://127.0.0.1:{_closed_port()}'         # no network: every download fails at once
    env.update({'http_proxy': proxy, 'https_proxy': proxy, 'HTTP_PROXY': proxy, 'HTTPS_PROXY': proxy})
    line = _one_error_line(_cli(['corrupt', '--data', 'MMBench_DEV_EN', '--distortions', '1', '--strengths', '1'],
                                tmp_path, env))
    assert "no TSV for dataset 'MMBench_DEV_EN'" in line and 'could not fetch it' in line


def test_prepare_r_bench_offline_is_one_line_and_leaves_no_part_file(tmp_path):
    env = kit_environment(tmp_path)
    env['HF_HUB_OFFLINE'] = '1'
    line = _one_error_line(_cli(['prepare', 'R-Bench-Full'], tmp_path, env))
    assert 'could not download' in line and '--from DIR' in line
    assert not list((tmp_path / 'LMUData').glob('*.part'))


def test_eval_grab_with_the_offline_judge_scores_without_a_traceback(tmp_path):
    from vlmeval_ext.prepare.demos import GRAB_DEMO_TSV as DEMO_TSV
    table = pd.read_csv(DEMO_TSV, sep='\t', dtype=str, keep_default_na=False).drop(columns=['image'])
    table['prediction'] = table['answer']
    table.to_csv(tmp_path / 'M_GRAB.tsv', sep='\t', index=False)
    proc = _cli(['eval', '--data', 'GRAB', '--pred', tmp_path / 'M_GRAB.tsv', '--judge', 'offline'], tmp_path)
    assert proc.returncode == 0 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    assert 'llm_extracted: skipped (--judge offline' in proc.stdout


@pytest.mark.parametrize('judge_args, says', [('{bad', 'is not valid JSON'), ('[1]', 'must be a JSON object')])
def test_eval_with_bad_judge_args_is_one_line(tmp_path, judge_args, says):
    pred = tmp_path / 'M_GRAB_DEMO.tsv'
    pred.write_text('index\tprediction\n0\t3\n')
    line = _one_error_line(_cli(['eval', '--data', 'GRAB_DEMO', '--pred', pred, '--judge-args', judge_args],
                                tmp_path))
    assert f'--judge-args {says}' in line
