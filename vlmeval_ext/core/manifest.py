"""`<stem>_manifest.json`: what a score depends on, written by every evaluation; `diff-manifests` compares two.

The dataset base class writes it after each `evaluate`. A benchmark adds what only it knows by setting
`self.manifest_extra` during evaluate: {'judge': {...}, 'prompts': {name: template}, 'seeds': {...},
'counts': {...}}. Keys never appear: model arguments are filtered and every value passes the log redactor.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from vlmeval_ext.core.io import file_md5, stem_path, write_json
from vlmeval_ext.core.secrets import redact

SECRET_ARG_NAMES = ('key', 'api_key', 'token', 'secret', 'password')


def _git_revision() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / '.git').exists():
        return None
    try:
        out = subprocess.run(['git', '-C', str(root), 'rev-parse', 'HEAD'], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _kit_distribution() -> dict:
    for dist in ('ms-vlmeval', 'vlmeval'):
        try:
            return {'distribution': dist, 'version': metadata.version(dist)}
        except metadata.PackageNotFoundError:
            continue
    return {'distribution': None, 'version': None}


def _model_info(eval_file: str) -> dict:
    """Model name = the kit's per-model work dir; class arguments from a --config in its status.json argv."""
    model_dir = Path(eval_file).resolve().parent
    info = {'name': model_dir.name, 'class_args': None}
    status = model_dir / 'status.json'
    if status.exists():
        try:
            argv = json.loads(status.read_text()).get('argv') or []
        except ValueError:
            argv = []
        if '--config' in argv and argv.index('--config') + 1 < len(argv):
            cfg_path = Path(argv[argv.index('--config') + 1])
            if cfg_path.exists():
                cfg = json.loads(cfg_path.read_text()).get('model', {}).get(model_dir.name)
                if isinstance(cfg, dict):
                    info['class_args'] = {k: v for k, v in cfg.items()
                                          if not any(s in k.lower() for s in SECRET_ARG_NAMES)}
    return info


def sha1_text(text: str) -> str:
    return hashlib.sha1(text.encode('utf-8')).hexdigest()


def build_manifest(dataset_name: str, eval_file: str, judge_kwargs: dict, extra: dict, n_items: int | None,
                   tsv: str | None) -> dict:
    from vlmeval_ext import __version__
    extra = dict(extra or {})
    judge = dict(extra.pop('judge', {}) or {})
    judge.setdefault('model', judge_kwargs.get('model'))
    judge.setdefault('mode', judge_kwargs.get('judge_mode'))
    judge.setdefault('retries', judge_kwargs.get('judge_retries', judge_kwargs.get('retry')))
    if 'endpoint_host' not in judge and judge_kwargs.get('api_base'):
        from urllib.parse import urlparse
        judge['endpoint_host'] = urlparse(judge_kwargs['api_base']).hostname
    prompts = {name: sha1_text(text) for name, text in (extra.pop('prompts', {}) or {}).items()}
    manifest = {
        'created_at': datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
        'plugin': {'name': 'vlmeval-ext', 'version': __version__, 'git_revision': _git_revision()},
        'kit': _kit_distribution(),
        'python': sys.version.split()[0],
        'dataset': {'name': dataset_name, 'tsv_md5': file_md5(tsv) if tsv and os.path.exists(tsv) else None,
                    'n_items': n_items},
        'model': _model_info(eval_file),
        'predictions': {'file': os.path.basename(eval_file), 'md5': file_md5(eval_file)},
        'judge': judge,
        'prompt_sha1': prompts,
        'seeds': extra.pop('seeds', {}),
        'counts': extra.pop('counts', {}),
    }
    manifest.update(extra)
    return json.loads(redact(json.dumps(manifest, default=str)))


def write_manifest(dataset_name, eval_file, judge_kwargs, extra, n_items=None, tsv=None) -> str:
    path = stem_path(eval_file, '_manifest.json')
    write_json(build_manifest(dataset_name, eval_file, judge_kwargs, extra, n_items, tsv), path)
    return path


# What differs, and why it matters, in the order a reader should look.
_DIFF_FIELDS = [
    (('dataset', 'name'), 'different datasets'),
    (('dataset', 'tsv_md5'), 'the dataset TSV differs (another build or source)'),
    (('dataset', 'n_items'), 'a different number of items'),
    (('predictions', 'md5'), 'the predictions differ (model, inference settings or sampling)'),
    (('model', 'name'), 'different models'),
    (('model', 'class_args'), 'the model was built with other arguments'),
    (('judge', 'model'), 'the judge model changed'),
    (('judge', 'mode'), 'the judge protocol mode changed'),
    (('judge', 'endpoint_host'), 'the judge endpoint changed'),
    (('judge', 'retries'), 'judge retries changed'),
    (('prompt_sha1',), 'a prompt template changed'),
    (('seeds',), 'seeds changed'),
    (('counts',), 'failure counts differ (failed items are excluded from means)'),
    (('plugin', 'version'), 'vlmeval-ext version changed'),
    (('plugin', 'git_revision'), 'vlmeval-ext code revision changed'),
    (('kit', 'version'), 'VLMEvalKit version changed'),
]


def _get(d, path):
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def diff_manifests(a: dict, b: dict) -> list[str]:
    reasons = []
    for path, why in _DIFF_FIELDS:
        va, vb = _get(a, path), _get(b, path)
        if va != vb:
            if isinstance(va, dict) and isinstance(vb, dict):
                keys = sorted(k for k in set(va) | set(vb) if va.get(k) != vb.get(k))
                reasons.append(f'{".".join(path)}: {why} ({", ".join(keys)})')
            else:
                reasons.append(f'{".".join(path)}: {why} ({va!r} -> {vb!r})')
    return reasons


def diff_manifests_main(argv) -> int:
    p = argparse.ArgumentParser(prog='vlmeval-ext diff-manifests', description='why two runs may disagree')
    p.add_argument('a')
    p.add_argument('b')
    args = p.parse_args(argv)
    a, b = (json.loads(Path(x).read_text()) for x in (args.a, args.b))
    reasons = diff_manifests(a, b)
    if not reasons:
        print('The manifests agree on everything that affects the scores.')
        return 0
    print('The runs may disagree because:')
    for r in reasons:
        print(f'- {r}')
    return 1
