"""The kit's judge for a name, without importing the kit: an evaluation whose every verdict is cached needs no kit.

Only the kit's `build_judge` knows what a judge name and its arguments resolve to (its model map, LOCAL_LLM,
OPENAI_API_BASE, the kit's own .env file), and that decides the verdicts' keys in the verdict cache; importing the kit
is the slow part (10-20 s). So every evaluation that builds a judge keeps what `build_judge` gave: the attributes of
the kit's judge that a verdict's key and the kit dialect's progress keys read (endpoint, model id, system prompt,
sampling parameters, extra body fields; never a key). They are kept in `<verdict cache folder>/kit-judges-<hash>.json`,
a file per version of the kit files that build judges (found without importing the kit), each under the inputs
that decide them: the judge name, the `build_judge` arguments and the environment variables those kit files read,
and the kit's .env file (a credential only as set or not). `recall` gives them back only for the same inputs,
and only when the judge rebuilt from them has the same verdict keys; anything else is a miss, and the evaluation
imports the kit as before. No upstream patch: this goes once the kit can build a judge without importing its models.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

# The kit files whose code decides what build_judge returns, relative to the `vlmeval` package folder.
KIT_FILES = ('__init__.py', 'smp/misc.py', 'dataset/utils/judge_util.py')
KIT_FOLDERS = ('api',)
_ENV_READ = re.compile(r"""(?:os\.environ\.get|os\.getenv|os\.environ\.pop)\(\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]"""
                       r"""|os\.environ\[\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s*\]"""
                       r"""|['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s+in\s+os\.environ""")
ATTRIBUTES = ('api_base', 'model', 'system_prompt', 'temperature', 'max_tokens', 'top_p', 'top_k', 'img_detail',
              'use_azure')


class ResolvedJudge:
    """The attributes of a judge the kit built earlier, as `recall` gives them back: what CachedJudge and the kit
    dialect's progress keys read. It makes no call (it has no `generate`)."""

    def __init__(self, attributes: dict, default_kwargs: dict):
        for name, value in attributes.items():
            setattr(self, name, value)
        self.default_kwargs = dict(default_kwargs)


def _kit_sources() -> list[Path] | None:
    spec = importlib.util.find_spec('vlmeval')
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    files = [root / f for f in KIT_FILES]
    for folder in KIT_FOLDERS:
        files += sorted((root / folder).rglob('*.py'))
    return files if all(f.is_file() for f in files[:len(KIT_FILES)]) else None


def _shown(name, value):
    """A value as the inputs keep it: a credential (by its name or its shape) only as set or not."""
    from vlmeval_ext.secrets import is_secret_key_name, looks_like_secret
    if value is None:
        return None
    if is_secret_key_name(name) or looks_like_secret(value):
        return '<set>' if str(value) else ''
    return value if isinstance(value, (bool, int, float)) else str(value)


def _dotenv(path: Path) -> dict:
    """NAME=value lines of the kit's .env file (which its build_judge loads into the environment)."""
    try:
        text = path.read_text(encoding='utf-8', errors='replace')
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith('export '):
            line = line[len('export '):].strip()
        name, eq, value = line.partition('=')
        if eq and not line.startswith('#') and name.strip():
            out[name.strip()] = _shown(name.strip(), value.strip().strip('\'"'))
    return out


def _where(name: str, arguments: dict, cache: Path) -> tuple[Path, str] | None:
    """(the file of this kit's resolutions, the key of these inputs); None without a kit."""
    sources = _kit_sources()
    if sources is None:
        return None
    digest = hashlib.sha256()
    names = set()
    for path in sources:
        raw = path.read_bytes()
        digest.update(path.name.encode() + b'\0' + raw)
        names.update(n for groups in _ENV_READ.findall(raw.decode('utf-8', errors='replace')) for n in groups if n)
    package = sources[0].parent
    inputs = {'judge': name,
              'arguments': {k: _shown(k, v) for k, v in sorted(arguments.items())},
              'environment': {n: _shown(n, os.environ.get(n)) for n in sorted(names)},
              'dotenv': _dotenv(Path(os.path.realpath(package.parent / '.env')))}
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
    return cache / f'kit-judges-{digest.hexdigest()[:16]}.json', key


def remember(name: str, arguments: dict, kit_judge, cache: Path, identity) -> None:
    """Keep what the kit built for `name` with `arguments` (build_judge's), with its `identity(name, judge)` (what
    its verdict keys are made of: vlmeval_ext.judging.judge_identity). A judge whose address carries credentials is
    not kept; a write that fails is no error (this is only a shortcut)."""
    from vlmeval_ext.secrets import looks_like_secret
    where = _where(name, arguments, cache)
    if where is None:
        return
    path, key = where
    attributes = {a: getattr(kit_judge, a) for a in ATTRIBUTES if hasattr(kit_judge, a)}
    attributes = json.loads(json.dumps(attributes, default=str))
    parts = urlsplit(str(attributes.get('api_base') or ''))
    if parts.username or parts.password or parts.query:
        return
    known_as = identity(name, kit_judge)
    entry = {'attributes': attributes, 'default_kwargs': known_as['parameters'].get('extra_body', {}), **known_as}
    text = json.dumps(entry, sort_keys=True)
    if looks_like_secret(text):
        return
    try:
        known = json.loads(path.read_text(encoding='utf-8'))
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    if known.get(key) == entry:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f'{path.name}.{os.getpid()}.tmp')
        tmp.write_text(json.dumps({**known, key: entry}, sort_keys=True), encoding='utf-8')
        os.replace(tmp, path)
    except OSError:
        pass


def recall(name: str, arguments: dict, cache: Path, identity) -> ResolvedJudge | None:
    """The judge the kit built for `name` with `arguments` under the same kit files, environment and .env, rebuilt
    from what `remember` kept; None when nothing was kept for these inputs, or when the rebuilt judge's
    `identity(name, judge)` (its verdict keys) differs from the kit's judge's."""
    where = _where(name, arguments, cache)
    if where is None:
        return None
    path, key = where
    try:
        entry = json.loads(path.read_text(encoding='utf-8')).get(key)
        judge = ResolvedJudge(entry['attributes'], entry['default_kwargs'])
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    known_as = identity(name, judge)
    if known_as != {k: entry.get(k) for k in known_as}:
        return None
    return judge
