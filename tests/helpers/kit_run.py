"""Run the kit's run.py (through our launcher) or `vlmeval-ext` in a subprocess, pointed at a loopback server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_KEY = 'sk-vlmevalext-FAKE-0123456789abcdef'


def kit_environment(tmp_path, server=None, key: str = FAKE_KEY) -> dict:
    """LMUData, work dir and verdict cache under tmp_path; model and judge both at the loopback server (key from
    env only)."""
    lmu = Path(tmp_path) / 'LMUData'
    lmu.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update({'LMUData': str(lmu), 'VLMEVAL_EXT_CACHE': str(Path(tmp_path) / 'verdict-cache'),
                'OPENAI_API_KEY': key, 'PYTHONUNBUFFERED': '1',
                'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'TOKENIZERS_PARALLELISM': 'false'})
    if server is not None:
        env['OPENAI_API_BASE'] = server.chat_url
    env.pop('VLMEVALKIT_RUN_PY', None)
    return env


def loopback_model_config(server, datasets: dict, model_name: str = 'LoopbackGPT', **model_kwargs) -> dict:
    """A kit --config JSON: the kit's own GPT4V API class pointed at the loopback server as the model."""
    model = {'class': 'GPT4V', 'model': 'loopback-model', 'api_base': server.chat_url, 'img_size': -1,
             'retry': 2, 'temperature': 0, 'timeout': 20, 'verbose': False}
    model.update(model_kwargs)
    return {'model': {model_name: model}, 'data': datasets}


def write_config(tmp_path, config: dict) -> str:
    path = Path(tmp_path) / 'config.json'
    path.write_text(json.dumps(config, indent=2))
    return str(path)


def run_kit(args, env, cwd=None, timeout=600, entry=('run.py',)) -> subprocess.CompletedProcess:
    """`python run.py ARGS` at the repo root (entry=('-m', 'vlmeval_ext') for the CLI)."""
    cmd = [sys.executable, *[str(REPO_ROOT / e) if e.endswith('.py') else e for e in entry], *map(str, args)]
    return subprocess.run(cmd, env=env, cwd=cwd or REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def run_cli(args, env, cwd=None) -> subprocess.CompletedProcess:
    """`python -m vlmeval_ext ARGS` (each argument as text) in a subprocess."""
    return run_kit(list(map(str, args)), env, cwd=cwd, entry=('-m', 'vlmeval_ext'))


def one_error_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The single `[vlmeval-ext] ERROR` line of a command that must fail with exit `code` and no traceback."""
    lines = [line for line in proc.stderr.splitlines() if line.startswith('[vlmeval-ext] ERROR')]
    assert proc.returncode == code, proc.stdout[-1500:] + proc.stderr[-3000:]
    assert 'Traceback' not in proc.stderr and len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def kit_output(model_dir, name: str) -> Path:
    """The newest file called `name` the kit's run left for one model: in `<work-dir>/<model>/` on ms-vlmeval; in
    the per-run folders `<work-dir>/<model>/T<date>_G<commit>/` on an upstream checkout, whose run.py also links
    the final results of a finished run into the model folder (a killed run's files are only in its run folder)."""
    found = [p for p in Path(model_dir).rglob(name) if p.is_file()]
    if not found:
        raise FileNotFoundError(f'{name} under {model_dir}')
    return max(found, key=lambda p: p.stat().st_mtime_ns)
