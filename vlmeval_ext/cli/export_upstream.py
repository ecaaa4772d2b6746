"""`vlmeval-ext export-upstream --kit DIR --patch-dir OUT [--url-base URL]`: one patch per benchmark for VLMEvalKit.

The kit-dialect files of a benchmark are the files a pull request adds: vlmeval_ext/dataset/<bench>.py, its
vlmeval_ext/dataset/utils/<bench>.py, the shared vlmeval_ext/dataset/utils/exact_io.py and the record's
`export_extra` (its vlmeval_ext/scripts/build_<bench>_tsv.py, which goes to the checkout's scripts/, and RoCOCO
retrieval's vlmeval_ext/vlm/rococo_embedding.py). They import only the kit, the standard library,
numpy/pandas/pyarrow/PIL and their own utils modules. Every patch adds exact_io.py with the same bytes, so any two
apply together (`git apply --3way`). The export copies them as they are into a scratch clone of the checkout
(`vlmeval/dataset/...`, `vlmeval/vlm/...`, `scripts/...`), adds the lines that register them (an import among the
sorted imports and a line inside `IMAGE_DATASET = [...]` in `vlmeval/dataset/__init__.py`, each benchmark at its own
place), and writes `git diff` as `OUT/<benchmark>.patch`, with the pull request's text beside it as
`OUT/<benchmark>.md`. Each patch applies alone to the checkout (`git apply`), and after any other
(`git apply --3way`); `OUT/all.patch` holds them all at once. RoCOCO retrieval needs embedding models, a kind the
kit does not evaluate: it is written as a design proposal for the maintainers, `OUT/RoCOCO-retrieval-proposal.md`,
its patch (with its models in `vlmeval/vlm/__init__.py` and `vlmeval/config.py`) an appendix.

Only two values are filled in: `DATASET_MD5` from the TSV `vlmeval-ext prepare` built under $LMUData (its `.md5`
sidecar; a subset build is not used), and `DATASET_URL` from --url-base (where the contributor will host the TSVs).
Without them they stay the kit's empty values, and the PR text says what is missing. Nothing else is rewritten; the
user's checkout itself is never written.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
from importlib import import_module
from pathlib import Path

from vlmeval_ext.errors import ExtError
from vlmeval_ext.registry import BENCHMARKS, Benchmark

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


class ExportError(ExtError):
    """The export cannot be made as asked (one line: why and the way out)."""


# Added by every patch, byte for byte the same, so that two merged patches do not conflict: the one
# text-table reader, failure rule and judge-progress reader of the datasets.
SHARED_MODULES = ('vlmeval_ext.dataset.utils.exact_io',)


def kit_files(record: Benchmark) -> dict[str, Path]:
    """{path in the kit checkout: our file} of a benchmark's patch."""
    modules = [record.kit_class.partition(':')[0]]
    modules.append(modules[0].replace('vlmeval_ext.dataset.', 'vlmeval_ext.dataset.utils.'))
    modules += list(SHARED_MODULES) + list(record.export_extra)
    out = {}
    for module in modules:
        out[_kit_path(module)] = PACKAGE_ROOT / (module.replace('vlmeval_ext.', '', 1).replace('.', '/') + '.py')
    return out


def _kit_path(module: str) -> str:
    """Where a module of ours goes in the checkout: vlmeval_ext/scripts/ to its scripts/, the rest under vlmeval/."""
    relative = module.replace('vlmeval_ext.', '', 1).replace('.', '/') + '.py'
    return relative if relative.startswith('scripts/') else 'vlmeval/' + relative


def _class_name(record: Benchmark) -> str:
    return record.kit_class.partition(':')[2]


def _module_name(record: Benchmark) -> str:
    return record.kit_class.partition(':')[0].rsplit('.', 1)[1]


# ---------------------------------------------------------------------------------------------- the two values
def dataset_values(record: Benchmark, url_base: str | None) -> tuple[dict, dict, list[str]]:
    """(DATASET_URL, DATASET_MD5, notes) of the exported class: the TSVs `prepare` built (their md5) and where
    they will be hosted."""
    from vlmeval_ext.io import read_md5_sidecar, tsv_path
    from vlmeval_ext.prepare.common import subset_note
    urls, md5s, notes = {}, {}, []
    for name in record.names:
        split = record.split_of(name)
        urls[name] = f'{url_base.rstrip("/")}/{split}.tsv' if url_base else ''
        path = tsv_path(split)
        sidecar = Path(f'{path}.md5')
        if split in md5s:
            continue
        if sidecar.is_file() and not subset_note(path):
            md5s[split] = read_md5_sidecar(path, split)
        elif name == split:
            notes.append(f'DATASET_MD5 of {split}: not filled yet (the build script under Data prints it)')
    if not url_base:
        notes.append('DATASET_URL: left empty until the TSV is hosted (see Data)')
    return urls, md5s, notes


def _dict_literal(name: str, values: dict, indent: str = '    ') -> str:
    if not values:
        return f'{indent}{name} = {{}}\n'
    items = [f'{indent}    {k!r}: {v!r},\n' for k, v in values.items()]
    return f'{indent}{name} = {{\n' + ''.join(items) + f'{indent}}}\n'


def fill_values(text: str, class_name: str, urls: dict, md5s: dict) -> str:
    """The file with the class's DATASET_URL / DATASET_MD5 assignments replaced by these values (only when a value
    is known: otherwise the file is returned byte for byte)."""
    if not any(urls.values()) and not md5s:
        return text
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    lines = text.splitlines(keepends=True)
    spans = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ('DATASET_URL', 'DATASET_MD5'):
            spans[node.targets[0].id] = (node.lineno - 1, node.end_lineno)
    for name, (start, end) in sorted(spans.items(), key=lambda kv: -kv[1][0]):
        values = urls if name == 'DATASET_URL' else md5s
        if name == 'DATASET_URL' and not any(urls.values()):
            continue
        lines[start:end] = [_dict_literal(name, values)]
    return ''.join(lines)


# ---------------------------------------------------------------------------------------------- registration
def add_import(text: str, line: str) -> str:
    """`line` ('from .grab import GRAB') among the file's top-level `from .x import` lines, in sorted place."""
    lines = text.splitlines(keepends=True)
    module = line.split()[1]
    positions = [i for i, l in enumerate(lines) if l.startswith('from .') and not l.startswith('from .. ')]
    for i in positions:
        if lines[i].split()[1] > module:
            lines.insert(i, line + '\n')
            return ''.join(lines)
    at = (positions[-1] + 1) if positions else 0
    while at < len(lines) and lines[at - 1].rstrip().endswith(('(', ',')):       # a wrapped import continues
        at += 1
    lines.insert(at, line + '\n')
    return ''.join(lines)


def add_to_list(text: str, list_name: str, entry: str, slot: int) -> str:
    """`entry` as a line of its own inside the top-level `<list_name> = [...]`, as the kit registers a dataset: just
    before the closing bracket for slot 0, two lines higher for each further slot. Each benchmark has its own slot,
    so two patches never touch the same lines and apply in either order (`git apply --3way`)."""
    tree = ast.parse(text)
    node = next((n for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
                 and n.targets[0].id == list_name and isinstance(n.value, ast.List)), None)
    if node is None:
        raise ExportError(f'vlmeval/dataset/__init__.py has no top-level `{list_name} = [...]` list at this commit '
                          'of the kit: it registers datasets another way, and the patches could not register ours; '
                          'export against a commit that has the list')
    lines = text.splitlines(keepends=True)
    closing = node.end_lineno - 1                     # 0-based index of the line holding `]`
    at = closing - 2 * slot
    if at <= node.lineno - 1 or lines[closing].strip() != ']':
        at = closing                                  # a short or one-line list: before its end
    before = lines[at - 1] if at - 1 > node.lineno - 1 else ''
    indent = re.match(r'[ \t]*', before).group(0) or '    '
    lines.insert(at, f'{indent}{entry},\n')
    return ''.join(lines)


def add_models(text: str, models: dict) -> str:
    """The benchmark's models as one group of `vlmeval/config.py`, before supported_VLM is filled."""
    entries = []
    for name, (path, kwargs) in models.items():
        cls = path.partition(':')[2]
        args = ', '.join(f'{k}={v!r}' for k, v in kwargs.items())
        entries.append(f'    {name!r}: partial(\n        vlm.{cls}, {args}),\n')
    block = 'rococo_embedding_series = {\n' + ''.join(entries) + '}\n\nmodel_groups.append(rococo_embedding_series)\n\n'
    if 'for grp in model_groups:' not in text:
        raise ExportError('vlmeval/config.py has no `for grp in model_groups:` loop at this commit of the kit: the '
                          'embedding models could not be registered; export against a commit that has it')
    anchor = text.rindex('for grp in model_groups:')
    return text[:anchor] + block + text[anchor:]


# ---------------------------------------------------------------------------------------------- the PR text
def pr_facts(record: Benchmark) -> dict | None:
    """The pull request's data and evidence statements (dataset_specs/pull_requests.yaml), None when the benchmark
    has no entry there yet."""
    from vlmeval_ext.spec import load_spec
    facts = load_spec('pull_requests').get(record.key)
    return facts if isinstance(facts, dict) else None


def pr_text(record: Benchmark, files: dict, notes: list[str], lines: int) -> str:
    """The pull request's text: what the benchmark is, where its data comes from and under which licence, what was
    checked and by which test of vlmeval-ext, what is an extension and how to leave it out, what is still to do.
    Without an entry in dataset_specs/pull_requests.yaml it claims none of that, and says what is missing."""
    module = import_module(record.kit_class.partition(':')[0])
    facts = pr_facts(record)
    if facts is None:
        return draft_text(record, module, files, notes, lines)
    data = facts['data']
    evidence = '\n'.join(f'- {e["claim"]} (`{e["test"]}`)' for e in facts['evidence'])
    extensions = '\n'.join(f'- {e["what"]}. To leave it out: {e["leave_out"]}.'
                           for e in facts.get('extensions') or [])
    published = facts.get('published') or ('No published numbers exist for this dataset, so none are compared '
                                           'here.')
    shared = {_kit_path(m) for m in SHARED_MODULES}
    added = '\n'.join(f'- `{path}`' + (' (the same file in each pull request of this series: GRAB, R-Bench-Full, '
                                       'ReMI, RoCOCO-MCQ; a second merge leaves it as it is)' if path in shared else '')
                      for path in files)
    notes_text = '\n'.join(f'- {n}' for n in [*notes, *(facts.get('open') or [])]) or '- none'
    parquet = ' (with pyarrow, its parquet engine)' if any(
        'parquet' in Path(source).read_text(encoding='utf-8') for source in files.values()) else ''
    judged = (' with a local OpenAI-compatible judge' if record.judge in ('optional', 'required') else
              ' (scored by its rules: no judge is built, and none is called)')
    return (f'# Add {record.title} ({", ".join(f"`{n}`" for n in record.names)})\n\n'
            f'{(module.__doc__ or "").strip()}\n\n'
            f'## Files\n\n{added}\n\nplus one import and one line inside `IMAGE_DATASET` in '
            f'`vlmeval/dataset/__init__.py`; {lines} lines in all. The files import only the kit, the standard '
            f'library, numpy, pandas{parquet} and Pillow.\n\n'
            '## Data\n\n'
            f'- Source: {data["source"]}.\n- Licence: {data["licence"]}.\n'
            f'- The TSV redistributes {data["redistributes"]}.\n'
            + (f'- {data["build"]}.\n' if data.get('build') else '') +
            f'- It still has to be hosted: {data["host"]}. `DATASET_URL` and `DATASET_MD5` are filled once it '
            'is.\n\n'
            '## How the scoring was checked\n\n'
            'These files are developed in vlmeval-ext (a plugin for VLMEvalKit), whose tests check each claim '
            'below on the benchmark\'s official data (the test that checks it in brackets). Its CI applies this '
            'patch alone to a copy of VLMEvalKit (commit e8e78f05, and the ms-vlmeval 0.0.20 package), checks that '
            'it applies after each of the other patches of the series (`git apply --3way`), and runs the demo '
            f"split through that copy's own `run.py`{judged}, twice: with a local "
            "OpenAI-compatible model, and with the kit's own `Qwen2VLChat` on a tiny random-weight Qwen2-VL "
            "checkpoint (on the CPU). Each time it compares every score with the plugin's on the same "
            "predictions.\n\n"
            f'{evidence}\n\n'
            f'## Published numbers\n\n{published}\n\n'
            f'## Beyond the paper\n\n{extensions or "- nothing: the benchmark as published."}\n\n'
            f'## Still to do before merging\n\n{notes_text}\n')


def draft_text(record: Benchmark, module, files: dict, notes: list[str], lines: int) -> str:
    """The text of a benchmark whose pull-request facts are not written yet: its files, and what is missing."""
    added = '\n'.join(f'- `{path}`' for path in files)
    notes_text = '\n'.join(f'- {n}' for n in notes)
    return (f'# Add {record.title} ({", ".join(f"`{n}`" for n in record.names)}): not ready for a pull request\n\n'
            f'{(module.__doc__ or "").strip()}\n\n'
            f'## Files\n\n{added}\n\nplus one import and one line inside `IMAGE_DATASET` in '
            f'`vlmeval/dataset/__init__.py`; {lines} lines in all.\n\n'
            '## Still to do before a pull request\n\n'
            f'- Write the entry of {record.key} in vlmeval-ext\'s dataset_specs/pull_requests.yaml: where the data '
            'comes from and under which licence, what its TSV redistributes, who could host it, and the evidence '
            'that the scoring applies the benchmark\'s published rule (each claim with the test that checks it). '
            'Until then this text claims none of it.\n'
            f'{notes_text}\n')


# ---------------------------------------------------------------------------------------------- git
def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(['git', '-C', str(repo), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise ExportError(f'git {" ".join(args)} in {repo} failed: {(out.stderr or out.stdout).strip()[:300]}')
    return out.stdout


def check_kit(kit: Path) -> Path:
    kit = kit.resolve()
    if not (kit / 'vlmeval' / 'dataset' / '__init__.py').is_file() or not (kit / 'run.py').is_file():
        raise ExportError(f'{kit} is not a VLMEvalKit checkout (no run.py and vlmeval/dataset/ in it)')
    if subprocess.run(['git', '-C', str(kit), 'rev-parse', '--git-dir'], capture_output=True).returncode != 0:
        raise ExportError(f'{kit} is not a git checkout: the patches are diffs against its HEAD')
    return kit


def check_destination(patch_dir: Path, kit: Path) -> Path:
    """Refused before anything is written: a patch folder inside the checkout (the patches would land in the
    code they patch) or a path that is a file."""
    patch_dir = patch_dir.resolve()
    if patch_dir == kit or kit in patch_dir.parents:
        raise ExportError(f'--patch-dir {patch_dir} is inside the checkout {kit}: choose a folder outside it')
    if patch_dir.exists() and not patch_dir.is_dir():
        raise ExportError(f'--patch-dir {patch_dir} is a file, not a folder')
    return patch_dir


def write_output(path: Path, text: str) -> None:
    """Write one output file of the export, never through a link: a link planted in --patch-dir (to a file of the
    checkout, say) is refused, not followed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        if path.is_symlink():
            raise ExportError(f'{path} is a symbolic link (to {os.readlink(path)}): outputs are never written '
                              'through a link; remove it or choose another --patch-dir') from None
        raise ExportError(f'{path}: cannot write it ({err.strerror})') from None
    with os.fdopen(fd, 'w', encoding='utf-8') as f:
        f.write(text)


def add_benchmark(clone: Path, kit: Path, record: Benchmark, url_base: str | None) -> tuple[dict, list[str]]:
    """A benchmark's files and registration lines, written into the scratch clone: (its files, notes)."""
    files = kit_files(record)
    urls, md5s, notes = dataset_values(record, url_base)
    for kit_path, ours in files.items():
        text = ours.read_text(encoding='utf-8')
        if kit_path.startswith('vlmeval/dataset/') and '/utils/' not in kit_path:
            text = fill_values(text, _class_name(record), urls, md5s)
        target = clone / kit_path
        if target.exists():
            shared = kit_path in {_kit_path(m) for m in SHARED_MODULES}
            tracked = _git(clone, 'ls-files', '--', kit_path).strip()
            if shared and not tracked and target.read_text(encoding='utf-8') == text:
                continue            # added by an earlier benchmark of all.patch, the same bytes
            raise ExportError(f'{kit_path} already exists in {kit}: the kit has a file of that name')
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding='utf-8')
    init = clone / 'vlmeval' / 'dataset' / '__init__.py'
    text = add_import(init.read_text(encoding='utf-8'), f'from .{_module_name(record)} import {_class_name(record)}')
    init.write_text(add_to_list(text, 'IMAGE_DATASET', _class_name(record), BENCHMARKS.index(record)),
                    encoding='utf-8')
    if record.kit_models:
        vlm_init = clone / 'vlmeval' / 'vlm' / '__init__.py'
        model_cls = next(iter(record.kit_models.values()))[0].partition(':')[2]
        vlm_init.write_text(add_import(vlm_init.read_text(encoding='utf-8'),
                                       f'from .rococo_embedding import {model_cls}'), encoding='utf-8')
        config = clone / 'vlmeval' / 'config.py'
        config.write_text(add_models(config.read_text(encoding='utf-8'), record.kit_models), encoding='utf-8')
    return files, notes


def is_proposal(record: Benchmark) -> bool:
    """RoCOCO retrieval ranks embeddings: it needs a kind of model the kit does not have, a maintainers' decision,
    so it is written up as a design proposal (its patch an appendix), not sent as a dataset pull request."""
    return record.judge == 'embeddings'


def retrieval_proposal(record: Benchmark, diff: str) -> str:
    """OUT/<benchmark>-proposal.md: what the kit would need for embedding-model benchmarks, with the patch."""
    models = '\n'.join(f'- `{name}`: `{path.partition(":")[2]}({", ".join(f"{k}={v!r}" for k, v in kwargs.items())})`'
                       for name, (path, kwargs) in record.kit_models.items())
    names = ', '.join(f'`{n}`' for n in record.names)
    return (f'# Proposal: embedding-model benchmarks in VLMEvalKit ({record.title})\n\n'
            'This is a design proposal for the maintainers, not a dataset pull request. RoCOCO (Park et al. 2023, '
            'arXiv 2304.10727) measures image-text retrieval under adversarial captions and mixed images: '
            f'{names}. Retrieval ranks a whole gallery by the similarity of embeddings, and the kit evaluates '
            'generative models, which answer one item at a time. Adding it is a decision about what kinds of '
            'model the kit evaluates.\n\n'
            "## Why the kit's generative loop does not fit\n\n"
            '- Inference calls `model.generate(message, dataset)` once per row and stores text. A retrieval row is '
            'one image or one caption, and what it needs back is a vector; the attached patch passes vectors '
            'through `generate` as text (`emb:f32:<dim>:<base64>`).\n'
            '- A generative model on a retrieval split would be asked about every gallery row (5,000 images and '
            '25,000 captions per split) before `evaluate` could only refuse the replies. Nothing in the kit stops '
            'that before inference.\n'
            '- The score depends on the whole gallery at once (R@K, the false rate on mixed images), not on '
            'independent items, so per-item reuse, retries and sharding do not apply as they do elsewhere.\n\n'
            '## What an embedding-model interface could be\n\n'
            '- A model class with `embed_images(list[PIL.Image]) -> ndarray` and `embed_texts(list[str]) -> '
            'ndarray` (L2-normalised rows), flagged `is_embedding = True`.\n'
            '- A dataset type `RETRIEVAL` whose inference batches the gallery through those two methods and saves '
            'one array per split, and which run.py refuses for a generative model before any call (one line).\n'
            '- `supported_VLM` entries for the embedding models; the attached patch registers these four:\n\n'
            f'{models}\n\n'
            '## Until then\n\n'
            'vlmeval-ext evaluates RoCOCO retrieval as a plugin dataset with the classes below, refuses a '
            'generative model on a retrieval split before inference, and offers `RoCOCO-MCQ-<attack>`, a '
            'multiple-choice recast that generative models can take (sent as its own pull request).\n\n'
            '## Appendix: the files as a patch against this checkout\n\n'
            f'```diff\n{diff}```\n')


def export(kit: Path, patch_dir: Path, url_base: str | None = None, only: list[str] | None = None) -> dict:
    """Write OUT/<benchmark>.patch and OUT/<benchmark>.md for each generative benchmark (each applies alone, and
    in any order with the others: `git apply --3way`), OUT/all.patch with all of them at once, and
    OUT/<benchmark>-proposal.md for RoCOCO retrieval; returns {key: {patch, md, lines}}."""
    kit = check_kit(Path(kit))
    patch_dir = check_destination(Path(patch_dir), kit)
    records = [r for r in BENCHMARKS if not only or r.key in only]
    unknown = set(only or []) - {r.key for r in BENCHMARKS}
    if unknown:
        raise ExportError(f'unknown benchmark(s) {sorted(unknown)}; export knows {[r.key for r in BENCHMARKS]}')
    patch_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix='vlmeval-ext-export-') as scratch:
        clone = Path(scratch) / 'kit'
        _git(Path(scratch), 'clone', '--quiet', '--shared', str(kit), str(clone))
        notes_of = {}
        for record in records:
            _git(clone, 'reset', '--quiet', '--hard', 'HEAD')
            _git(clone, 'clean', '--quiet', '-fdx')
            files, notes_of[record.key] = add_benchmark(clone, kit, record, url_base)
            _git(clone, 'add', '-A')
            diff = _git(clone, 'diff', '--cached', '--binary')
            lines = diff.count('\n')
            name = record.key
            if is_proposal(record):
                write_output(patch_dir / f'{name}-proposal.md', retrieval_proposal(record, diff))
                results[name] = {'patch': None, 'md': str(patch_dir / f'{name}-proposal.md'), 'lines': lines,
                                 'files': list(files), 'notes': []}
                continue
            write_output(patch_dir / f'{name}.patch', diff)
            write_output(patch_dir / f'{name}.md', pr_text(record, files, notes_of[name], lines))
            results[name] = {'patch': str(patch_dir / f'{name}.patch'), 'md': str(patch_dir / f'{name}.md'),
                             'lines': lines, 'files': list(files), 'notes': notes_of[name]}
        sent = [r for r in records if not is_proposal(r)]
        if len(sent) > 1:           # every pull request at once, as a maintainer merging them all would have it
            _git(clone, 'reset', '--quiet', '--hard', 'HEAD')
            _git(clone, 'clean', '--quiet', '-fdx')
            for record in sent:
                add_benchmark(clone, kit, record, url_base)
            _git(clone, 'add', '-A')
            diff = _git(clone, 'diff', '--cached', '--binary')
            write_output(patch_dir / 'all.patch', diff)
            results['all'] = {'patch': str(patch_dir / 'all.patch'), 'md': None, 'lines': diff.count('\n'),
                              'files': [], 'notes': []}
    return results


def export_main(argv=None) -> int:
    p = argparse.ArgumentParser(prog='vlmeval-ext export-upstream',
                                description='One patch per benchmark for a VLMEvalKit git checkout, each applying '
                                            'alone (`git apply OUT/<benchmark>.patch`), with its pull-request '
                                            'text beside it. The checkout itself is not changed.')
    p.add_argument('--kit', required=True, help='a VLMEvalKit git checkout (the patches are diffs against its HEAD)')
    p.add_argument('--patch-dir', required=True, help='folder for <benchmark>.patch and <benchmark>.md')
    p.add_argument('--url-base', default=None, help='where the TSVs will be hosted (fills DATASET_URL)')
    p.add_argument('--only', nargs='+', default=None, help=f'benchmarks to export ({", ".join(r.key for r in BENCHMARKS)})')
    args = p.parse_args(argv)
    results = export(Path(args.kit), Path(args.patch_dir), args.url_base, args.only)
    for name, info in results.items():
        if info['patch'] is None:
            print(f'{name}: {info["md"]} (a design proposal for the maintainers, its {info["lines"]}-line patch '
                  'in an appendix)')
        else:
            print(f'{name}: {info["patch"]} ({info["lines"]} lines)' + (f', {info["md"]}' if info['md'] else
                                                                       ' (every pull request at once)'))
        for note in info['notes']:
            print(f'  {note}')
        if info['patch'] and info['md'] and name != 'all' and pr_facts(
                next(r for r in BENCHMARKS if r.key == name)) is None:
            print(f'  {name}: no entry in dataset_specs/pull_requests.yaml: {info["md"]} is a draft that says what '
                  'is missing, not a pull-request text')
    if any(note.startswith('DATASET_MD5') for info in results.values() for note in info['notes']):
        print('To fill in DATASET_MD5: `vlmeval-ext prepare NAME` builds the full TSV under $LMUData (the same bytes '
              'as the build script), then export again.')
    if any(note.startswith('DATASET_URL') for info in results.values() for note in info['notes']):
        print('To fill in DATASET_URL: export again with --url-base, where the TSVs will be hosted.')
    return 0


if __name__ == '__main__':
    sys.exit(export_main())
