"""`vlmeval-ext export-upstream --kit DIR`: our benchmarks as kit-native dataset code inside a VLMEvalKit checkout.

What it writes into the checkout DIR (a git work tree):

- `vlmeval/dataset/{rbench,grab,remi,rococo}/`: each benchmark's modules (data, prompt, score, report, dataset,
  ...) and its demo split, copied from this package with every `vlmeval_ext.X` import rewritten to the module's
  new place; nothing imports `vlmeval_ext` at run time;
- `vlmeval/dataset/bench_core/`: the helpers they share (dataset base on the kit's `ImageBaseDataset`, judge
  binding through the kit's `build_judge`, judge runner, predictions rule, text-exact I/O), the error root, and
  `specs/` (the YAML specs the code reads);
- `vlmeval/dataset/__init__.py`: the classes imported and added to `IMAGE_DATASET`, as the kit does for its own;
- `vlmeval/vlm/rococo_embedding.py`: the RoCOCO embedding model, imported in `vlmeval/vlm/__init__.py`, its named
  configurations added to `supported_VLM` in `vlmeval/config.py`;
- `setup.cfg`: flake8's line-length exemption for the exported files (they keep their 120 columns);
- `scripts/prepare_tsv.py`: builds a benchmark's TSV from its official release and prints the md5 the kit's
  `DATASET_MD5` takes, for the maintainers who host the TSVs.

Then it marks new files with `git add -N` and writes `git diff --binary` of exactly those paths to a patch file.
It refuses (one line) when DIR is not a VLMEvalKit git checkout, or when a file it would write has changes that
it did not make itself (what it wrote last time is recorded, by sha1, in the checkout's git folder). Running it
again overwrites its own files and removes those it no longer writes.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vlmeval_ext.errors import ExtError

PACKAGE_ROOT = Path(__file__).resolve().parent
SPEC_ROOT = PACKAGE_ROOT.parent / 'dataset_specs'     # a source checkout; else the installed package data

# The kit dataset classes exported, each 'module:Class' in this package (the export follows their imports).
EXPORTED_CLASSES = (
    'vlmeval_ext.rbench.dataset:RBenchFull',
    'vlmeval_ext.grab.dataset:GRAB',
    'vlmeval_ext.remi.dataset:ReMI',
    'vlmeval_ext.rococo.dataset:RoCOCOMCQ',
    'vlmeval_ext.rococo.dataset:RoCOCORetrieval',
)
# The kit models exported with them (RoCOCO retrieval is scored from embeddings): module -> its kit module, and the
# registered names of this package that are built from them (vlmeval_ext.registry.MODEL_FACTORIES).
EXPORTED_MODELS = ('vlmeval_ext.rococo.models:RoCOCOEmbeddingModel',)
MODEL_MODULES = {'vlmeval_ext.rococo.models': 'vlmeval.vlm.rococo_embedding'}
VLM_INIT = 'vlmeval/vlm/__init__.py'
CONFIG = 'vlmeval/config.py'
BENCHMARKS = tuple(dict.fromkeys(path.split('.')[1] for path in EXPORTED_CLASSES))   # their demo/ folders go too
CORE = 'bench_core'                  # vlmeval/dataset/bench_core: what the benchmarks share
SHARED_SOURCES = ('core', 'corrupt')  # our packages whose needed modules go to bench_core
DEMO_GLOB = 'demo/*.tsv'

INIT = 'vlmeval/dataset/__init__.py'
SETUP_CFG = 'setup.cfg'                  # flake8: the exported modules keep this package's 120-column lines
PREPARE_SCRIPT = 'scripts/prepare_tsv.py'
BLOCK_BEGIN = '# R-Bench-Full, GRAB, ReMI, RoCOCO (vlmeval/dataset/{rbench,grab,remi,rococo}): begin'
BLOCK_END = '# R-Bench-Full, GRAB, ReMI, RoCOCO: end'
RECORD = 'vlmeval-ext-export.json'   # inside the checkout's git folder: what the last export wrote

# Text that names this plugin's tools, and what it says inside the kit.
TEXT_REPLACEMENTS = (
    ('python -m vlmeval_ext.rococo prepare NAME --ann-dir D --coco-root C',
     f'python {PREPARE_SCRIPT} NAME --from ANNOTATION_DIR --coco-root C'),
    ('vlmeval-ext prepare', f'python {PREPARE_SCRIPT}'),
    ('such as RoCOCO-CLIP-B32, generative models', 'returning one vector per row, generative models'),
    (' (or `pip install vlmeval-ext[offline-judge]`)', ''),
    ('VLMEVAL_EXT_CACHE', 'VLMEVAL_JUDGE_CACHE'),
    ("'vlmeval-ext'", "'vlmeval-judge'"),
    ('/vlmeval-ext', '/vlmeval-judge'),
    ('[vlmeval-ext]', '[VLMEvalKit]'),
    ('vlmeval-ext', 'VLMEvalKit'),
    ('dataset_specs/', f'vlmeval/dataset/{CORE}/specs/'),
)
_MODULE_NAME = re.compile(r'\bvlmeval_ext(?:\.[A-Za-z_]\w*)*')


class ExportError(ExtError):
    """The export cannot run on this folder (not a checkout, or files with changes of their own)."""


# ---------------------------------------------------------------------------------------------- module mapping
def kit_module(name: str) -> str:
    """Where our module `name` (vlmeval_ext.X.Y) lives in the kit: vlmeval.dataset.<bench>.Y, or
    vlmeval.dataset.bench_core.Y for the shared helpers (core, errors, the corruption functions); models go to
    vlmeval/vlm/ (MODEL_MODULES)."""
    if name in MODEL_MODULES:
        return MODEL_MODULES[name]
    parts = name.split('.')
    assert parts[0] == 'vlmeval_ext', name
    rest = parts[1:]
    if not rest:
        return 'vlmeval.dataset'
    if rest[0] in SHARED_SOURCES:
        return '.'.join(['vlmeval', 'dataset', CORE, *rest[1:]])
    if rest[0] == 'errors':
        return f'vlmeval.dataset.{CORE}.errors'
    return '.'.join(['vlmeval', 'dataset', *rest])


def _source_file(module: str) -> Path:
    path = PACKAGE_ROOT.parent.joinpath(*module.split('.'))
    return path / '__init__.py' if path.is_dir() else path.with_suffix('.py')


def _imports(module: str) -> set[str]:
    """The vlmeval_ext modules `module` imports anywhere in its code (also inside functions)."""
    path = _source_file(module)
    package = module if path.name == '__init__.py' else module.rpartition('.')[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split('.')[0] == 'vlmeval_ext')
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')[:len(package.split('.')) - node.level + 1]
                target = '.'.join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ''
            if target.split('.')[0] != 'vlmeval_ext':
                continue
            found.add(target)
            found.update(f'{target}.{a.name}' for a in node.names if _is_module(f'{target}.{a.name}'))
    return {m for m in found if _is_module(m)}


def _is_module(module: str) -> bool:
    path = PACKAGE_ROOT.parent.joinpath(*module.split('.'))
    return path.is_dir() and (path / '__init__.py').is_file() or path.with_suffix('.py').is_file()


def module_closure(roots) -> list[str]:
    """Every vlmeval_ext module the roots need, with the packages that hold them (sorted)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(_imports(module))
    packages = {'.'.join(m.split('.')[:k]) for m in seen for k in range(2, len(m.split('.')))}
    return sorted(seen | packages)


# -------------------------------------------------------------------------------------------- source rewriting
def rewrite_source(text: str) -> str:
    """Our module's text as kit code: module names mapped (imports, and mentions in docs), tool names replaced."""
    text = _MODULE_NAME.sub(lambda m: kit_module(m.group(0)), text)
    for old, new in TEXT_REPLACEMENTS:
        text = text.replace(old, new)
    return text


def _replace_function(text: str, name: str, body: str) -> str:
    """`text` with the top-level function `name` replaced by `body` (a whole def)."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            lines = text.splitlines(keepends=True)
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            return ''.join(lines[:start]) + body + ''.join(lines[node.end_lineno:])
    raise ExtError(f'export: no function {name} to replace')


# The kit keeps the specs beside the code, in bench_core/specs/.
SPEC_DIR_FUNCTION = '''def spec_dir() -> Path:
    """The folder holding the YAML specs (specs/ beside this module)."""
    return Path(__file__).resolve().parent / 'specs'
'''


# What only the plugin's own tools read (its reference model, its run records): left out of the kit's copy.
PLUGIN_ONLY_METHODS = ('naive_prediction', 'run_record')
PLUGIN_ONLY_ATTRIBUTES = ('manifest_extra',)


def _plugin_only_lines(tree: ast.Module) -> set[int]:
    """Line numbers (1-based) of the methods and `self.<attr> = ...` statements only the plugin reads."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in PLUGIN_ONLY_METHODS:
                    start = min([item.lineno] + [d.lineno for d in item.decorator_list])
                    lines.update(range(start, item.end_lineno + 1))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Attribute) and target.attr in PLUGIN_ONLY_ATTRIBUTES and \
                    isinstance(target.value, ast.Name) and target.value.id == 'self':
                lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def _unused_imports(tree: ast.Module) -> set[str]:
    """Names bound by top-level imports that nothing in the module uses."""
    imported = {(a.asname or a.name).split('.')[0] for node in tree.body
                if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names if a.name != '*'}
    return imported - {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _unused_locals(tree: ast.Module) -> set[tuple[str, str]]:
    """(function, name) of plain `name = ...` statements in functions whose name is never read there."""
    found = set()
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            read = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                        and node.targets[0].id not in read:
                    found.add((func.name, node.targets[0].id))
    return found


def _without_lines(text: str, drop: set[int]) -> str:
    """`text` without the given lines (1-based), and without a blank line a dropped block leaves doubled."""
    kept: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if number in drop:
            continue
        if not line.strip() and kept and not kept[-1].strip() and (number - 1) in drop:
            continue
        kept.append(line)
    return ''.join(kept)


def drop_plugin_only(text: str) -> str:
    """`text` without PLUGIN_ONLY_METHODS / PLUGIN_ONLY_ATTRIBUTES, and without what only they used: the local
    variables they read (side-effect-free spec look-ups) and imports."""
    tree = ast.parse(text)
    drop = _plugin_only_lines(tree)
    if not drop:
        return text
    imports_before, locals_before = _unused_imports(tree), _unused_locals(tree)
    text = _without_lines(text, drop)
    tree = ast.parse(text)
    stale = _unused_locals(tree) - locals_before
    drop = set()
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                        isinstance(node.targets[0], ast.Name) and (func.name, node.targets[0].id) in stale:
                    drop.update(range(node.lineno, node.end_lineno + 1))
    text = _without_lines(text, drop)
    tree = ast.parse(text)
    newly_unused = _unused_imports(tree) - imports_before
    for node in reversed([n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]):
        names = [a for a in node.names if (a.asname or a.name).split('.')[0] not in newly_unused]
        if len(names) == len(node.names):
            continue
        listed = ', '.join(a.name + (f' as {a.asname}' if a.asname else '') for a in names)
        new = [] if not names else [f'from {"." * node.level}{node.module or ""} import {listed}\n'
                                    if isinstance(node, ast.ImportFrom) else f'import {listed}\n']
        lines = text.splitlines(keepends=True)
        text = ''.join(lines[:node.lineno - 1] + new + lines[node.end_lineno:])
    return text


def kit_module_text(module: str) -> str:
    text = drop_plugin_only(_source_file(module).read_text(encoding='utf-8'))
    if module == 'vlmeval_ext.core.spec':
        text = _replace_function(text, 'spec_dir', SPEC_DIR_FUNCTION)
        if 'resources.' not in text:
            text = text.replace('from importlib import resources\n', '')
    return rewrite_source(text)


def kit_path(module: str) -> str:
    """The file of our module inside the checkout."""
    target = kit_module(module).split('.')
    source = _source_file(module)
    if source.name == '__init__.py':
        return '/'.join(target + ['__init__.py'])
    return '/'.join(target) + '.py'


def _spec_names(texts) -> set[str]:
    names: set[str] = set()
    for text in texts:
        names.update(re.findall(r"load_spec\('([A-Za-z0-9_]+)'\)", text))
    return names


def _spec_source(name: str) -> Path:
    if SPEC_ROOT.is_dir():
        return SPEC_ROOT / f'{name}.yaml'
    from importlib import resources
    return Path(str(resources.files('vlmeval_ext.dataset_specs'))) / f'{name}.yaml'


# ---------------------------------------------------------------------------------------------- the export plan
@dataclass(frozen=True)
class ExportFile:
    path: str           # relative to the checkout
    data: bytes


def _class_parts(path: str) -> tuple[str, str]:
    module, _, name = path.partition(':')
    return module, name


def plan_files() -> list[ExportFile]:
    """Every file the export writes (besides the edit of vlmeval/dataset/__init__.py)."""
    roots = [_class_parts(p)[0] for p in EXPORTED_CLASSES + EXPORTED_MODELS]
    modules = module_closure(roots)
    files: dict[str, bytes] = {}
    texts = []
    for module in modules:
        if module == 'vlmeval_ext' or module in {f'vlmeval_ext.{s}' for s in SHARED_SOURCES}:
            continue                     # the kit's own vlmeval/dataset/__init__.py; bench_core's is CORE_INIT
        text = kit_module_text(module)
        texts.append(text)
        path = kit_path(module)
        if path in files:
            raise ExtError(f'export: two modules map to {path}')
        files[path] = text.encode('utf-8')
    files.setdefault(f'vlmeval/dataset/{CORE}/__init__.py', CORE_INIT.encode('utf-8'))
    for name in sorted(_spec_names(texts)):
        files[f'vlmeval/dataset/{CORE}/specs/{name}.yaml'] = _spec_source(name).read_bytes()
    for bench in BENCHMARKS:
        for demo in sorted((PACKAGE_ROOT / bench).glob(DEMO_GLOB)):
            files[f'vlmeval/dataset/{bench}/demo/{demo.name}'] = demo.read_bytes()
    files[PREPARE_SCRIPT] = prepare_script().encode('utf-8')
    return [ExportFile(p, d) for p, d in sorted(files.items())]


CORE_INIT = '''"""Helpers shared by R-Bench-Full, GRAB, ReMI and RoCOCO (vlmeval/dataset/{rbench,grab,remi,rococo}).

dataset.py: their base class, the kit's ImageBaseDataset with a validating load_data; judging.py: judge binding
through the kit's build_judge; judge.py: the judge runner (retries, verdict cache); io.py: predictions read as
text, so scoring sees the model's output byte for byte; predictions.py: what counts as an inference failure.
"""
'''


def import_lines() -> list[str]:
    """The import lines for vlmeval/dataset/__init__.py (relative, as the kit imports its own)."""
    by_module: dict[str, list[str]] = {}
    for path in EXPORTED_CLASSES:
        module, name = _class_parts(path)
        by_module.setdefault(kit_module(module).removeprefix('vlmeval.dataset'), []).append(name)
    return [f'from {module} import {", ".join(names)}' for module, names in by_module.items()]


def class_names() -> list[str]:
    return [_class_parts(p)[1] for p in EXPORTED_CLASSES]


def strip_block(text: str) -> str:
    """A kit file the export edits, without what an export added (every line between the markers)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    k = 0
    while k < len(lines):
        if lines[k].strip() != BLOCK_BEGIN:
            out.append(lines[k])
            k += 1
            continue
        end = next((e for e in range(k, len(lines)) if lines[e].strip() == BLOCK_END), len(lines) - 1)
        k = end + 1
        # A block between two blank lines came with one of them.
        if out and not out[-1].strip() and k < len(lines) and not lines[k].strip():
            k += 1
    return ''.join(out)


def edit_init(text: str) -> str:
    """The kit's dataset list with our classes: imports after the kit's own, IMAGE_DATASET += [...] after its
    last extension of IMAGE_DATASET (before VIDEO_DATASET); both between markers, so a new export replaces them."""
    text = strip_block(text)
    lines = text.splitlines(keepends=True)
    imports = [BLOCK_BEGIN + '\n', *[line + '\n' for line in import_lines()], BLOCK_END + '\n']
    registry = [BLOCK_BEGIN + '\n', f'IMAGE_DATASET += [{", ".join(class_names())}]\n', BLOCK_END + '\n', '\n']
    last_import = max((i for i, line in enumerate(lines) if line.startswith('from .') and 'isort: skip' not in line),
                      default=None)
    video = next((i for i, line in enumerate(lines) if line.startswith('VIDEO_DATASET = [')), None)
    if last_import is None or video is None or 'IMAGE_DATASET = [' not in text:
        raise ExportError(f'{INIT}: not the kit\'s dataset list as expected (no `from .x import` lines, '
                          '`IMAGE_DATASET = [` or `VIDEO_DATASET = [`)')
    end_import = last_import
    while not lines[end_import].rstrip().endswith(')') and '(' in lines[last_import] and end_import < len(lines):
        end_import += 1                          # a parenthesised import over several lines
    out = lines[:end_import + 1] + imports + lines[end_import + 1:video] + registry + lines[video:]
    return ''.join(out)


def edit_setup_cfg(text: str) -> str:
    """The kit's flake8 section with E501 (line length) ignored in the exported folders, as the kit does for some
    of its own files; unchanged when it has no `per-file-ignores`."""
    text = strip_block(text)
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith('per-file-ignores')), None)
    if start is None:
        return text
    end = start + 1
    while end < len(lines) and lines[end].startswith((' ', '\t')) and lines[end].strip():
        end += 1
    folders = [*(f'vlmeval/dataset/{b}' for b in (CORE, *BENCHMARKS))]
    block = [f'    {BLOCK_BEGIN}\n', *[f'    {folder}/*.py: E501\n' for folder in folders],
             *[f'    {kit_path(_class_parts(m)[0])}: E501\n' for m in EXPORTED_MODELS],
             f'    {PREPARE_SCRIPT}: E501\n', f'    {BLOCK_END}\n']
    return ''.join(lines[:end] + block + lines[end:])


def edit_vlm_init(text: str) -> str:
    """The kit's model package with our model classes imported at its end (between markers)."""
    text = strip_block(text)
    lines = [f'from {kit_module(m).removeprefix("vlmeval.vlm")} import {c}\n'
             for m, c in map(_class_parts, EXPORTED_MODELS)]
    return _at_end(text, [BLOCK_BEGIN + '\n', *lines, BLOCK_END + '\n'])


def _at_end(text: str, block: list[str]) -> str:
    return (text if not text or text.endswith('\n') else text + '\n') + ''.join(block)


def model_entries() -> dict[str, str]:
    """name -> `partial(vlm.Class, k=v, ...)` for our registered models built from an exported class."""
    from vlmeval_ext.registry import MODEL_FACTORIES
    entries = {}
    for name, (path, kwargs) in MODEL_FACTORIES.items():
        if path in EXPORTED_MODELS:
            args = ''.join(f', {k}={v!r}' for k, v in kwargs.items())
            entries[name] = f'partial(\n        vlm.{_class_parts(path)[1]}{args})'
    return entries


def edit_config(text: str) -> str:
    """The kit's model table with our models added to supported_VLM at its end (between markers)."""
    text = strip_block(text)
    if 'supported_VLM' not in text or 'from functools import partial' not in text:
        raise ExportError(f'{CONFIG}: not the kit\'s model table as expected (no supported_VLM / partial)')
    rows = [f'    {name!r}: {entry},\n' for name, entry in model_entries().items()]
    return _at_end(text, [BLOCK_BEGIN + '\n', 'rococo_embedding_series = {\n', *rows, '}\n',
                          'supported_VLM.update(rococo_embedding_series)\n', BLOCK_END + '\n'])


# The kit's own files the export edits (between markers; `strip_block` gives back the kit's text).
EDITED = {INIT: edit_init, SETUP_CFG: edit_setup_cfg, VLM_INIT: edit_vlm_init, CONFIG: edit_config}


# -------------------------------------------------------------------------------------------------- the script
def prepare_script() -> str:
    rows = []
    for path in EXPORTED_CLASSES:
        module, name = _class_parts(path)
        rows.append(f"    ('{kit_module(module)}', '{name}'),")
    classes = '\n'.join(rows)
    return f'''"""Build the TSV of R-Bench-Full, GRAB, ReMI or RoCOCO from its official release, for hosting.

    python {PREPARE_SCRIPT} NAME [--from DIR] [--coco-root DIR] [--mixed-root DIR]

NAME is one of the dataset names of vlmeval/dataset/{{rbench,grab,remi,rococo}} (R-Bench-Full, GRAB, ReMI,
RoCOCO-MCQ-<attack>, RoCOCO-I2T-<attack>, RoCOCO-T2I-<mix|patch>); --from is a local copy of the official release
(R-Bench-Full and ReMI download it when it is left out; GRAB: grab.json + images/; RoCOCO: the annotation JSONs,
with the COCO val2014 images under --coco-root). The TSV is written to $LMUData/NAME.tsv; its md5 is printed:
upload the file and put its URL and md5 in the class's DATASET_URL / DATASET_MD5.
"""
import argparse
import hashlib
import importlib

CLASSES = [
{classes}
]


def dataset_class(name):
    for module, cls_name in CLASSES:
        cls = getattr(importlib.import_module(module), cls_name)
        if name in cls.supported_datasets():
            return cls
    known = [n for module, c in CLASSES for n in getattr(importlib.import_module(module), c).supported_datasets()]
    raise SystemExit(f'unknown dataset {{name!r}}; known: {{", ".join(known)}}')


def md5(path):
    digest = hashlib.md5()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\\n')[0])
    parser.add_argument('name')
    parser.add_argument('--from', dest='source', default=None, help='local copy of the official release')
    parser.add_argument('--coco-root', default=None, help='RoCOCO: the COCO images (val2014/)')
    parser.add_argument('--mixed-root', default=None, help='RoCOCO-T2I: the mixed images')
    args = parser.parse_args()
    cls = dataset_class(args.name)
    extra = {{k: v for k, v in (('coco_root', args.coco_root), ('mixed_root', args.mixed_root)) if v}}
    path = cls.prepare(args.name, args.source, **extra)
    print(f'{{args.name}}: {{path}}')
    print(f'md5 {{md5(path)}}  (DATASET_MD5 of {{cls.__name__}} once the file is hosted)')


if __name__ == '__main__':
    main()
'''


# ------------------------------------------------------------------------------------------------ the checkout
def _git(kit: Path, *args: str, check: bool = True) -> str:
    try:
        proc = subprocess.run(['git', '-C', str(kit), *args], capture_output=True, text=True)
    except FileNotFoundError as err:
        raise ExportError('export-upstream needs git on PATH') from err
    if check and proc.returncode != 0:
        raise ExportError(f'{kit}: git {" ".join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}')
    return proc.stdout


def check_checkout(kit: Path) -> Path:
    """The checkout's root; an ExportError unless it is a VLMEvalKit git checkout."""
    if not kit.is_dir():
        raise ExportError(f'{kit}: no such folder')
    missing = [p for p in ('run.py', INIT, 'vlmeval/dataset/image_base.py', 'vlmeval/smp/__init__.py')
               if not (kit / p).is_file()]
    if missing:
        raise ExportError(f'{kit} is not a VLMEvalKit checkout (no {", ".join(missing)})')
    probe = subprocess.run(['git', '-C', str(kit), 'rev-parse', '--show-toplevel'], capture_output=True, text=True)
    if probe.returncode != 0:
        raise ExportError(f'{kit} is not a git checkout (the export ends with a `git diff`): clone VLMEvalKit, '
                          'or run `git init && git add -A && git commit -m base` in it first')
    top = Path(probe.stdout.strip()).resolve()
    if top != kit.resolve():
        raise ExportError(f'{kit} is inside the git work tree {top}: give the VLMEvalKit checkout\'s root')
    return top


def _sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def _record_path(kit: Path) -> Path:
    path = Path(_git(kit, 'rev-parse', '--git-path', RECORD).strip())
    return path if path.is_absolute() else kit / path


def _read_record(kit: Path) -> dict:
    path = _record_path(kit)
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())['files']
    except (ValueError, KeyError, TypeError) as err:
        raise ExportError(f'{path}: not the record of an export ({err}); remove it to start over') from err


def _changed_paths(kit: Path, paths) -> set[str]:
    """Of `paths`, those with changes against HEAD or untracked (git status)."""
    out = _git(kit, 'status', '--porcelain', '--untracked-files=all', '-z', '--', *paths)
    changed = set()
    for entry in out.split('\0'):
        if len(entry) > 3:
            changed.add(entry[3:])
    return changed


def check_writable(kit: Path, planned: dict[str, bytes], record: dict) -> None:
    """Refuse when a file the export writes or removes has changes that are not the last export's own."""
    paths = sorted(set(planned) | set(record))
    foreign = []
    for path in sorted(_changed_paths(kit, paths)):
        file = kit / path
        current = file.read_bytes() if file.is_file() else None
        if path in EDITED and current is not None:
            head = _git(kit, 'show', f'HEAD:{path}', check=False)
            if strip_block(current.decode('utf-8')) == head:
                continue                 # only the block a previous export added
        elif current is not None and record.get(path) == _sha1(current):
            continue                     # exactly what the last export wrote
        elif current is None and path in record:
            continue                     # a file the last export wrote, deleted since
        foreign.append(path)
    if foreign:
        raise ExportError(f'{kit}: uncommitted changes in files the export writes: {", ".join(foreign[:6])}'
                          f'{" ..." if len(foreign) > 6 else ""}; commit or stash them first')


def export(kit: Path, patch: Path) -> dict:
    """Write the export into the checkout `kit` and its diff to `patch`; returns what was written."""
    kit = check_checkout(Path(kit))
    files = {f.path: f.data for f in plan_files()}
    for path, edit in EDITED.items():
        if (kit / path).is_file():
            files[path] = edit((kit / path).read_text(encoding='utf-8')).encode('utf-8')
    record = _read_record(kit)
    check_writable(kit, files, record)
    removed = []
    for path in sorted(set(record) - set(files)):
        file = kit / path
        if file.is_file():
            file.unlink()
            removed.append(path)
    for path, data in files.items():
        file = kit / path
        file.parent.mkdir(parents=True, exist_ok=True)
        if not file.is_file() or file.read_bytes() != data:
            file.write_bytes(data)
    _record_path(kit).write_text(json.dumps({'files': {p: _sha1(d) for p, d in files.items() if p not in EDITED}},
                                            indent=1, sort_keys=True))
    paths = sorted(files)
    _git(kit, 'add', '--intent-to-add', '--', *paths)
    diff = _git(kit, 'diff', '--binary', '--', *paths, *removed)
    patch = Path(patch)
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(diff)
    stat = _git(kit, 'diff', '--stat', '--', *paths, *removed)
    return {'files': paths, 'removed': removed, 'patch': str(patch), 'stat': stat}


def export_main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog='vlmeval-ext export-upstream',
        description='Write R-Bench-Full, GRAB, ReMI and RoCOCO as kit-native dataset code into a VLMEvalKit git '
                    'checkout (vlmeval/dataset/..., its dataset list, scripts/prepare_tsv.py), then its git diff '
                    'to a patch file. Nothing in the written code imports vlmeval_ext.')
    p.add_argument('--kit', required=True, help='the VLMEvalKit checkout (a git work tree, its root)')
    p.add_argument('--patch', default='vlmeval-upstream.patch',
                   help='where to write the git diff (default: ./vlmeval-upstream.patch)')
    args = p.parse_args(argv)
    result = export(Path(args.kit), Path(args.patch))
    print(result['stat'].rstrip())
    for path in result['removed']:
        print(f'removed (no longer exported): {path}')
    print(f'patch: {Path(result["patch"]).resolve()} (git diff of {len(result["files"])} files; '
          f'new files are marked with git add -N in {args.kit})')
    return 0
