"""`<stem>_manifest.json`: what a score depends on; `diff-manifests` compares two.

`vlmeval_ext.reporting.write_run_records` writes it after an evaluation (the launcher after the kit's run, and
`vlmeval-ext eval`), from the kit's output files and the benchmark's `run_record`: {'judge': {...}, 'prompts':
{name: template}, 'seeds': {...}, 'counts': {...}}. Keys never appear: model arguments are filtered and every
value passes the log redactor.
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
import re
import shlex
from pathlib import Path

from vlmeval_ext.io import file_md5, stem_path, write_json
from vlmeval_ext.secrets import redact

# The kit's per-run folder names (an upstream checkout writes <work-dir>/<model>/<eval id>/...).
KIT_EVAL_ID = re.compile(r'T\d{8}-\d{6}|T\d{8}_G[0-9a-fA-F]+')


def model_dir_of(eval_file: str | Path) -> Path:
    """The kit's per-model folder of a predictions file: its folder, or the one above a per-run folder."""
    parent = Path(eval_file).resolve().parent
    return parent.parent if KIT_EVAL_ID.fullmatch(parent.name) else parent


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(['git', '-C', str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_state() -> dict:
    """Revision of this checkout and whether tracked files were modified (a dirty tree is not reproducible
    from the revision alone). Both None for an installed (non-checkout) package."""
    root = Path(__file__).resolve().parents[2]
    if not (root / '.git').exists():
        return {'git_revision': None, 'git_dirty': None}
    revision = _git(root, 'rev-parse', 'HEAD') or None
    status = _git(root, 'status', '--porcelain', '--untracked-files=no')
    return {'git_revision': revision, 'git_dirty': None if status is None else bool(status)}


def _kit_distribution() -> dict:
    for dist in ('ms-vlmeval', 'vlmeval'):
        try:
            return {'distribution': dist, 'version': metadata.version(dist)}
        except metadata.PackageNotFoundError:
            continue
    return {'distribution': None, 'version': None}


def _public_args(args: dict) -> dict:
    from vlmeval_ext.secrets import is_secret_key_name
    return {k: v for k, v in args.items() if not is_secret_key_name(k)}


def _kit_model_args(name: str) -> dict | None:
    """Class and arguments of a kit model (supported_VLM partial), only when the kit is already imported
    (as it is inside an evaluation): the manifest never imports the kit itself."""
    config = sys.modules.get('vlmeval.config')
    factory = getattr(config, 'supported_VLM', {}).get(name) if config else None
    if factory is None:
        return None
    func = getattr(factory, 'func', factory)
    return {'class': getattr(func, '__name__', str(func)), **_public_args(dict(getattr(factory, 'keywords', {}) or {}))}


def _model_info(eval_file: str, model_name: str | None = None) -> dict:
    """Model name (given, else the kit's per-model work dir); class arguments from a --config in the run's
    status.json argv, else from the kit's supported_VLM entry of that name (when the kit is loaded)."""
    name = model_name or model_dir_of(eval_file).name
    info = {'name': name, 'class_args': None}
    status = Path(eval_file).resolve().parent / 'status.json'
    if status.exists():
        try:
            argv = json.loads(status.read_text()).get('argv') or []
        except ValueError:
            argv = []
        if '--config' in argv and argv.index('--config') + 1 < len(argv):
            cfg_path = Path(argv[argv.index('--config') + 1])
            if cfg_path.exists():
                cfg = json.loads(cfg_path.read_text()).get('model', {}).get(name)
                if isinstance(cfg, dict):
                    info['class_args'] = _public_args(cfg)
    if info['class_args'] is None:
        info['class_args'] = _kit_model_args(name)
    return info


def run_command(argv: list[str] | None = None) -> str:
    """The command that ran this evaluation, as a shell would take it back (`run.py --data GRAB --model M`), its
    program by base name, every key-shaped value masked (`--judge-args '{"key": "***"}'`)."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ''
    program = os.path.basename(argv[0]) or argv[0]
    if program == '__main__.py':                     # python -m <package>
        program = f'python -m {os.path.basename(os.path.dirname(os.path.abspath(argv[0])))}'
        return redact(' '.join([program, shlex.join(map(str, argv[1:]))]).strip())
    return redact(shlex.join([program, *map(str, argv[1:])]))


def typed_model_name(manifest: dict | None, folder_name: str) -> str:
    """The model name as the user typed it ('Qwen/Qwen2-VL-7B'), from the run record (the name the run sent to its
    server), else the kit's folder name ('Qwen--Qwen2-VL-7B'), which only file names need."""
    model = (manifest or {}).get('model') if isinstance(manifest, dict) else None
    name = model.get('served_name') if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else folder_name


def manifest_beside(score_path: Path) -> dict | None:
    """The run record of a score file (`<stem>[<tag>]_score.json` -> `<stem>_manifest.json`), None when absent or
    unreadable (a display name is all it is read for here)."""
    from vlmeval_ext.registry import RESULT_TAGS
    stem = score_path.name[:-len('_score.json')] if score_path.name.endswith('_score.json') else score_path.stem
    stem = next((stem[:-len(t)] for t in RESULT_TAGS if stem.endswith(t)), stem)
    path = score_path.with_name(f'{stem}_manifest.json')
    try:
        data = json.loads(path.read_text(encoding='utf-8'))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def sha1_text(text: str) -> str:
    return hashlib.sha1(text.encode('utf-8')).hexdigest()


def table_sha1(path: str) -> str | None:
    """sha1 of a predictions table's contents as loaded (every cell as text, rows in `index` order): equal for two
    files that hold the same table in other bytes (an xlsx rewritten, a TSV saved as xlsx). None if unreadable."""
    from vlmeval_ext.io import DataError, read_table
    try:
        table = read_table(path)
    except (DataError, ValueError, OSError):
        return None
    if 'index' in table.columns:
        table = table.iloc[sorted(range(len(table)), key=lambda i: _index_key(table['index'].iloc[i]))]
    text = table.to_csv(sep='\t', index=False, lineterminator='\n')
    return hashlib.sha1(text.encode('utf-8')).hexdigest()


def _index_key(value: str):
    return (0, int(value), '') if value.lstrip('-').isdigit() else (1, 0, value)


def build_manifest(dataset_name: str, eval_file: str, judge_kwargs: dict, extra: dict, n_items: int | None,
                   tsv: str | None, model_name: str | None = None, model_info: dict | None = None) -> dict:
    from vlmeval_ext import __version__
    extra = dict(extra or {})
    judge = dict(extra.pop('judge', {}) or {})
    judge.setdefault('model', judge_kwargs.get('model'))
    judge.setdefault('mode', judge_kwargs.get('judge_mode'))
    judge.setdefault('retries', judge_kwargs.get('judge_retries', judge_kwargs.get('retry')))
    if 'endpoint_host' not in judge and judge_kwargs.get('api_base'):
        from vlmeval_ext.judging import endpoint_hostname
        judge['endpoint_host'] = endpoint_hostname(judge_kwargs['api_base'])
    prompts = {name: sha1_text(text) for name, text in (extra.pop('prompts', {}) or {}).items()}
    manifest = {
        'created_at': datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
        'plugin': {'name': 'vlmeval-ext', 'version': __version__, **_git_state()},
        'kit': _kit_distribution(),
        'python': sys.version.split()[0],
        'command': run_command(),
        'dataset': {'name': dataset_name, 'tsv_md5': file_md5(tsv) if tsv and os.path.exists(tsv) else None,
                    'n_items': n_items},
        'model': {**_model_info(eval_file, model_name), **(model_info or {})},
        'predictions': {'file': os.path.basename(eval_file), 'md5': file_md5(eval_file),
                        'content_sha1': table_sha1(eval_file)},
        'judge': judge,
        'prompt_sha1': prompts,
        'seeds': extra.pop('seeds', {}),
        'counts': extra.pop('counts', {}),
    }
    manifest.update(extra)
    return json.loads(redact(json.dumps(manifest, default=str)))


def write_manifest(dataset_name, eval_file, judge_kwargs, extra, n_items=None, tsv=None, model_name=None,
                   model_info=None, tag: str = '') -> str:
    path = stem_path(eval_file, f'{tag}_manifest.json')
    write_json(build_manifest(dataset_name, eval_file, judge_kwargs, extra, n_items, tsv, model_name, model_info),
               path)
    return path


# What differs, and why it matters, in the order a reader should look.
_DIFF_FIELDS = [
    (('dataset', 'name'), 'different datasets'),
    (('dataset', 'tsv_md5'), 'the dataset TSV differs (another build or source)'),
    (('dataset', 'n_items'), 'a different number of items'),
    (('predictions', 'content_sha1'), 'the predictions differ (model, inference settings or sampling)'),
    (('model', 'name'), 'different models'),
    (('model', 'class_args'), 'the model was built with other arguments'),
    (('model', 'served_name'), 'another model name was sent to the server'),
    (('model', 'endpoint'), 'the model was served by another endpoint'),
    (('model', 'generation'), 'other generation parameters were sent to the model'),
    (('judge', 'model'), 'the judge model changed'),
    (('judge', 'mode'), 'the judge protocol mode changed'),
    (('judge', 'endpoint_host'), 'the judge endpoint changed'),
    (('judge', 'endpoint'), 'the judge endpoint (host, port or path) changed'),
    (('judge', 'parameters'), 'other judge parameters were sent (system prompt, sampling, extra fields)'),
    (('judge', 'retries'), 'judge retries changed'),
    (('prompt_sha1',), 'a prompt template changed'),
    (('seeds',), 'seeds changed'),
    (('counts',), 'failure counts differ (failed items are excluded from means)'),
    (('plugin', 'version'), 'vlmeval-ext version changed'),
    (('plugin', 'git_revision'), 'vlmeval-ext code revision changed'),
    (('plugin', 'git_dirty'), 'one run used locally modified vlmeval-ext code'),
    (('kit', 'distribution'), 'VLMEvalKit distribution changed (ms-vlmeval vs upstream vlmeval)'),
    (('kit', 'version'), 'VLMEvalKit version changed'),
    (('python',), 'Python version changed'),
]

# Reasons that make the scores not comparable at all (as opposed to "may drift").
NOT_COMPARABLE = ('dataset.name', 'dataset.tsv_md5', 'dataset.n_items', 'judge.model', 'judge.mode', 'judge.endpoint',
                  'judge.parameters', 'prompt_sha1')


def _get(d, path):
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d


def diff_manifests(a: dict, b: dict) -> list[str]:
    """Why two runs may disagree. Predictions are compared by their contents (the table as loaded), not the file
    bytes; a manifest written before contents were recorded falls back to the file md5."""
    reasons = []
    for path, why in _DIFF_FIELDS:
        if path == ('predictions', 'content_sha1') and (_get(a, path) is None or _get(b, path) is None):
            path = ('predictions', 'md5')
        va, vb = _get(a, path), _get(b, path)
        if va != vb:
            if isinstance(va, dict) and isinstance(vb, dict):
                keys = sorted(k for k in set(va) | set(vb) if va.get(k) != vb.get(k))
                reasons.append(f'{".".join(path)}: {why} ({", ".join(keys)})')
            else:
                reasons.append(f'{".".join(path)}: {why} ({va!r} -> {vb!r})')
    return reasons


def resolve_manifest_path(path: str | Path) -> Path:
    """A manifest, or the predictions / `<stem>_score.json` of a run: its `<stem>_manifest.json` beside it."""
    path = Path(path)
    if path.name.endswith('_manifest.json') or (path.suffix == '.json' and not path.name.endswith('_score.json')):
        candidate = path
    elif path.name.endswith('_score.json'):
        candidate = path.with_name(path.name[:-len('_score.json')] + '_manifest.json')
    else:
        candidate = Path(stem_path(path, '_manifest.json'))
    if not candidate.is_file():
        raise FileNotFoundError(f'no manifest {candidate} (every evaluation writes <stem>_manifest.json)')
    return candidate


def diff_manifests_main(argv) -> int:
    p = argparse.ArgumentParser(prog='vlmeval-ext diff-manifests', description='why two runs may disagree',
                                epilog='A and B: <stem>_manifest.json files, or the runs\' predictions or '
                                       '_score.json files (their manifests are found beside them). Exit 0: the '
                                       'manifests agree; 1: they differ.')
    p.add_argument('a')
    p.add_argument('b')
    args = p.parse_args(argv)
    try:
        paths = [resolve_manifest_path(x) for x in (args.a, args.b)]
    except FileNotFoundError as err:
        print(f'[vlmeval-ext] ERROR: {err}', file=sys.stderr)
        return 2
    manifests = []
    for path in paths:
        try:
            manifest = json.loads(path.read_text(encoding='utf-8'))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            print(f'[vlmeval-ext] ERROR: {path}: not a readable manifest ({type(err).__name__}: {err}); it may have '
                  'been cut short: `vlmeval-ext records PREDICTIONS --data NAME` writes it again', file=sys.stderr)
            return 2
        if not isinstance(manifest, dict):
            print(f'[vlmeval-ext] ERROR: {path}: a manifest is a JSON object, this is {type(manifest).__name__}',
                  file=sys.stderr)
            return 2
        manifests.append(manifest)
    a, b = manifests
    reasons = diff_manifests(a, b)
    if not reasons:
        print('The manifests agree on everything that affects the scores.')
        return 0
    blocking = [r for r in reasons if r.split(':', 1)[0] in NOT_COMPARABLE]
    print('The runs may disagree because:')
    for r in reasons:
        print(f'- {r}')
    if blocking:
        print(f'{len(blocking)} of these make the scores not comparable (dataset, judge or prompt changed).')
    return 1
