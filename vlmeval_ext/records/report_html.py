"""`vlmeval-ext report WORK_DIR [--out FILE.html]`: one self-contained HTML page of a work dir, to look at.

The page (no server, no network: it opens from disk or a shared drive) holds an overview of every model x dataset
(headline scores with their 95 % intervals and item counts, the judge, comparability with the paper, failure
counts, the plots) and, per benchmark, its items, filterable and sortable in the page: R-Bench's reference and
distorted images with both answers and every verdict, GRAB's plot with what each scoring read, ReMI's question with
its images at their tags, RoCOCO-MCQ's options with the twin marked, retrieval's top-5 per query, `-RC`'s pairs.
Images come as small embedded thumbnails, linked to the full image when `$LMUData` holds it.

It is rendered with Jinja2 (autoescaping); the items travel as JSON inside the page and the page's script builds the
table with DOM text nodes, so no text that came from a model, a judge or a dataset is ever parsed as HTML or run.
Written at the end of our run.py and of `vlmeval-ext eval` (`<work dir>/report.html`, beside the summary).
"""
from __future__ import annotations

import argparse
import base64
import glob
import hashlib
import io
import json
import math
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from vlmeval_ext.io import lmu_data_root
from vlmeval_ext.registry import benchmark_of, load_object

THUMB = 96                      # px, the long side of an embedded thumbnail
PAGE_ROWS = 100                 # rows the page shows at a time
TEMPLATE = Path(__file__).resolve().parent / 'templates' / 'report.html.j2'


# ------------------------------------------------------------------------------------------------ images
class Thumbnails:
    """Thumbnails of a dataset TSV's image cells (the TSV is read once per report)."""

    def __init__(self, page_dir: Path | None = None):
        self._tables: dict[str, dict] = {}
        self.page_dir = page_dir            # links to full images are relative to the page's folder
        self.missing: dict[str, str] = {}   # dataset -> the TSV path looked for, when no TSV held its images

    @staticmethod
    def source(dataset: str) -> tuple[str, list[Path]]:
        """(split, the TSVs that may hold `dataset`'s images, in the order they are looked for: $LMUData, else the
        demo shipped in the package)."""
        record = benchmark_of(dataset)
        split = record.split_of(dataset) if record else dataset
        candidates = [Path(lmu_data_root()) / f'{split}.tsv']
        demo = record.demo_file(dataset) if record else None
        if demo:
            candidates.append(Path(demo))
        return split, candidates

    def table(self, dataset: str) -> dict:
        """{index: image cell} of the TSV that holds `dataset`."""
        split, candidates = self.source(dataset)
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            self.missing.setdefault(dataset, str(candidates[0]))
        key = str(path)
        if key not in self._tables:
            cells = {}
            if path is not None:
                frame = pd.read_csv(path, sep='\t', dtype=str, keep_default_na=False,
                                    usecols=lambda c: c in ('index', 'image'))
                if 'image' in frame:
                    cells = dict(zip(frame['index'], frame['image']))
            self._tables[key] = {'cells': cells, 'split': split}
        return self._tables[key]

    @staticmethod
    def encode(cell: str) -> str | None:
        """A data: URI of a small JPEG thumbnail of one base64 image cell (None when it is no image)."""
        from PIL import Image
        try:
            with Image.open(io.BytesIO(base64.b64decode(cell, validate=False))) as im:
                im = im.convert('RGB')
                im.thumbnail((THUMB, THUMB))
                buf = io.BytesIO()
                im.save(buf, format='JPEG', quality=70)
        except Exception:       # an undecodable cell shows as "no image", never stops the report
            return None
        return 'data:image/jpeg;base64,' + base64.b64encode(buf.getvalue()).decode()

    def cells_of(self, dataset: str, index) -> list[str]:
        cell = self.table(dataset)['cells'].get(str(index), '')
        if cell.startswith('['):
            try:
                return [c for c in json.loads(cell) if isinstance(c, str)]
            except ValueError:
                return []
        if cell and len(cell) <= 64:                  # the kit's reference to another row's image
            cell = self.table(dataset)['cells'].get(cell, '')
        return [cell] if cell else []

    def of(self, dataset: str, index) -> list[str | None]:
        return [self.encode(c) for c in self.cells_of(dataset, index)]

    def full_image(self, dataset: str, index) -> str:
        """The image file the kit dumped for this row under $LMUData/images/<split>/ ('' when absent)."""
        folder = Path(lmu_data_root()) / 'images' / self.table(dataset)['split']
        for suffix in ('.jpg', '.png', '_0.png', '_0.jpg'):
            path = folder / f'{index}{suffix}'
            if path.is_file():
                return os.path.relpath(path, self.page_dir) if self.page_dir else path.name
        return ''


class LinkOutside(Exception):
    """A per-item file that is a link to a file outside its own folder: never read into the page."""


def stays_inside(path: Path) -> bool:
    """False for a link whose target is outside the link's own folder. (The upstream kit links a run's files from
    <model>/<run id>/ into <model>/: such links are read; one that leaves the folder, planted or copied from
    elsewhere, is not.)"""
    return not path.is_symlink() or path.parent.resolve() in path.resolve().parents


def read_file(path: str | Path) -> pd.DataFrame | None:
    path = Path(path)
    if not path.is_file():
        return None
    if not stays_inside(path):
        raise LinkOutside(f'{path.name} is a link to a file outside its folder: not shown')
    if path.suffix == '.xlsx':
        return pd.read_excel(path, dtype=str, keep_default_na=False)
    return pd.read_csv(path, sep='\t' if path.suffix == '.tsv' else ',', dtype=str, keep_default_na=False)


def number(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def verdict(value) -> str:
    return {'True': 'right', 'False': 'wrong', '1': 'right', '0': 'wrong', '1.0': 'right', '0.0': 'wrong'}.get(
        str(value), 'not scored')


# ------------------------------------------------------------------------------------------------ sections
@dataclass
class Section:
    """One model x dataset's items: what the page's table shows and how it filters them."""
    title: str
    benchmark: str
    columns: list                        # [{key, label, kind}]
    rows: list
    filters: list = field(default_factory=list)    # [{key, label}]: a select of each key's values
    note: str = ''
    total: int | None = None

    def payload(self) -> dict:
        return {'columns': self.columns, 'rows': self.rows, 'filters': self.filters, 'page': PAGE_ROWS}


def col(key, label, kind='text'):
    return {'key': key, 'label': label, 'kind': kind}


# ------------------------------------------------------------------------------------------------ overview
def _data_uri_png(path: Path) -> str:
    return 'data:image/png;base64,' + base64.b64encode(path.read_bytes()).decode()


def _comparability(score_file: Path, tag: str) -> str:
    try:
        side = read_file(str(score_file).replace(f'{tag}_score.json', f'{tag}_vs_paper.csv'))
    except LinkOutside as err:
        return str(err)
    if side is None or side.empty:
        return 'no published row for this model'
    first = side.iloc[0]
    if str(first.get('comparable')) == 'True':
        flagged = int((side['flag'] == 'True').sum())
        return f'comparable; {flagged} cell(s) where the paper is outside our 95 % interval'
    return f"not comparable: {first.get('not_comparable_why') or ''}"


def _plots_of(score_file: Path, other_stems: set[str]) -> list[Path]:
    """The plots of one score file: `<stem>_*.png`, not those of another score file whose stem starts like this one
    (`M_ReMI_DEMO_composite_radar.png` is not a plot of `M_ReMI_DEMO`)."""
    stem = score_file.name[:-len('_score.json')]
    longer = [o for o in other_stems if o != stem and o.startswith(stem + '_')]
    return sorted(p for p in score_file.parent.glob(f'{stem}_*.png')
                  if p.is_file() and stays_inside(p) and not any(p.name.startswith(o + '_') for o in longer))


def run_overview(score_file: Path, score: dict, dataset: str, model: str, tag: str, other_stems: set[str],
                 page_dir: Path | None = None) -> dict:
    from vlmeval_ext.records.manifest import manifest_beside
    from vlmeval_ext.records.summary import benchmark_of as summary_benchmark
    found = summary_benchmark(dataset)
    row = found[1](score) if found else {}
    judge = score.get('judge') or {}
    judge_text = judge.get('label') or (f"{judge.get('name') or judge.get('model')} ({judge.get('mode')} mode)"
                                        if judge else 'none (rule-based)')
    counts = score.get('counts') or {}
    coverage = score.get('coverage') or {}
    plots = _plots_of(score_file, other_stems)
    record = benchmark_of(dataset)
    manifest = manifest_beside(score_file) or {}
    label = dataset + (f' ({tag.lstrip("_")} mode)' if tag else '')
    return {'model': model, 'dataset': label, 'benchmark': found[0] if found else '',
            'cells': [(k, v) for k, v in row.items() if k != 'judge'],
            'headlines': _headlines(record, score, label) if record else [],
            'judge': judge_text, 'comparable': _comparability(score_file, tag),
            'notes': [n for n in score.get('notes') or [] if isinstance(n, str)],
            'demo': bool(record and dataset in record.demos),
            'accounting': {'items': counts.get('items', score.get('n_items')), 'empty': counts.get('empty'),
                           'inference failures': counts.get('inference_failures', score.get('inference_failed')),
                           'missing from the predictions': coverage.get('missing_items')},
            'config': _run_config(manifest, judge_text, page_dir),
            'plots': [{'name': p.name, 'src': _data_uri_png(p)} for p in plots if p.stat().st_size < 2_000_000]}


LOWER_IS_BETTER = ('false rate',)


def _headlines(record, score: dict, dataset_label: str) -> list[dict]:
    """Each headline of a run: {key, label, unit, value, ci, lower_better} (the score card's columns)."""
    from vlmeval_ext.records.intervals import leaf
    report = load_object(record.report)
    row = report.summary_row(score)
    out = []
    for label, path, unit in report.HEADLINE:
        value = row.get(f'{label} ({unit})')
        if value is None:
            node = score
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            value = node
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
            value = None
        out.append({'key': f'{dataset_label} | {label} ({unit})', 'dataset': dataset_label,
                    'label': f'{label} ({unit})', 'unit': unit, 'value': value,
                    'ci': leaf(score.get('ci95'), path), 'lower_better': label in LOWER_IS_BETTER})
    return out


def page_command(command, page_dir: Path | None) -> str | None:
    """A recorded command for the page, without this machine's paths: an absolute path inside the page's folder
    as `<report folder>/...`, any other absolute path as `.../<its name>`."""
    if not isinstance(command, str) or not command:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    root = Path(page_dir).resolve() if page_dir else None

    def shown(word: str) -> str:
        if not os.path.isabs(word):
            return word
        path = Path(word)
        if root is not None and (path == root or root in path.parents):
            return '<report folder>/' + path.relative_to(root).as_posix()
        return '.../' + path.name
    return shlex.join(shown(w) for w in words)


def _run_config(manifest: dict, judge_text: str, page_dir: Path | None = None) -> dict:
    """What the run record says the scores depend on, for the page (never a key: the record holds none)."""
    model = manifest.get('model') or {}
    kit = manifest.get('kit') or {}
    plugin = manifest.get('plugin') or {}
    dataset = manifest.get('dataset') or {}
    return {'model class': (model.get('class_args') or {}).get('class') if isinstance(model.get('class_args'), dict)
            else None,
            'judge': judge_text, 'kit': ' '.join(str(v) for v in (kit.get('distribution'), kit.get('version')) if v),
            'vlmeval-ext': plugin.get('version'), 'python': manifest.get('python'),
            'dataset md5': dataset.get('tsv_md5'), 'recorded': manifest.get('created_at'),
            'command': page_command(manifest.get('command'), page_dir)}


def score_card(overview: list[dict]) -> dict:
    """Models x headlines: one row per model, one column per (dataset, headline) in first-seen order; a column's
    best value is marked only when its interval does not overlap the next best's."""
    columns, rows = {}, {}
    for run in overview:
        for h in run['headlines']:
            columns.setdefault(h['key'], {k: h[k] for k in ('key', 'dataset', 'label', 'unit', 'lower_better')})
            rows.setdefault(run['model'], {})[h['key']] = {'value': h['value'], 'ci': h['ci']}
    for key, column in columns.items():
        cells = sorted(((cells[key], model) for model, cells in rows.items()
                        if key in cells and cells[key]['value'] is not None),
                       key=lambda c: c[0]['value'], reverse=not column['lower_better'])
        if len(cells) < 2:
            continue
        (best, _), (second, _) = cells[0], cells[1]
        if best['ci'] and second['ci'] and (best['ci'][0] > second['ci'][1] if not column['lower_better']
                                            else best['ci'][1] < second['ci'][0]):
            best['best'] = True
    return {'columns': list(columns.values()), 'rows': [{'model': m, 'cells': c} for m, c in rows.items()]}


def details(overview: list[dict]) -> list[dict]:
    """Per benchmark, its runs in real columns: the summary row's cells, then judge, comparability and counts."""
    out: dict[str, dict] = {}
    for run in overview:
        block = out.setdefault(run['benchmark'] or 'other', {'benchmark': run['benchmark'] or 'other', 'runs': []})
        block['runs'].append(run)
    for n, block in enumerate(out.values()):
        block['anchor'] = f'details-{n}'
        block['columns'] = list(dict.fromkeys(name for run in block['runs'] for name, _ in run['cells']))
        block['accounting'] = list(dict.fromkeys(k for run in block['runs'] for k, v in run['accounting'].items()
                                                 if v is not None and k not in block['columns']))
    return list(out.values())


def comparisons(work_dir: Path) -> list[dict]:
    """The `compare` results found under the work dir (`*_compare.json`), one row per headline."""
    rows = []
    for path in sorted(work_dir.rglob('*_compare.json')):
        if not path.is_file() or not stays_inside(path):
            continue
        try:
            result = json.loads(path.read_text(encoding='utf-8'))
        except (OSError, ValueError):
            continue
        if not isinstance(result, dict) or not isinstance(result.get('scores'), dict):
            continue
        from vlmeval_ext.records.compare import p_text, reading
        models = result.get('models') or {}
        for name, r in result['scores'].items():
            try:
                rows.append({'dataset': result.get('dataset'), 'a': models.get('a') or Path(result['a']).stem,
                             'b': models.get('b') or Path(result['b']).stem, 'score': f'{name} ({r["unit"]})',
                             'a_value': r['a'], 'b_value': r['b'], 'difference': f'{r["difference"]:+}',
                             'ci': f'[{r["ci95"][0]}, {r["ci95"][1]}]', 'p': p_text(r['p_value']),
                             'test': r.get('test'), 'reading': reading(r), 'file': path.name})
            except (KeyError, TypeError, IndexError):
                continue
    return rows


def _format(value, column: str = '') -> str:
    """A value as the overview shows it: percent with 2 decimals, 0-1 scores with 4 (the unit is in the name)."""
    from vlmeval_ext.records.summary import format_cell
    return format_cell(value, column)


# ------------------------------------------------------------------------------------------------ the page
def score_files(work_dir: Path) -> list[Path]:
    return sorted(p for p in work_dir.rglob('*_score.json') if p.is_file() and not p.is_symlink()
                  and not p.name.endswith('_score_incomplete.json'))


def _predictions_of(score_file: Path, tag: str) -> Path | None:
    stem = str(score_file)[:-len(f'{tag}_score.json')]
    return next((Path(stem + ext) for ext in ('.tsv', '.xlsx', '.csv') if Path(stem + ext).is_file()), None)


def _script_json(data) -> str:
    """JSON for a <script type="application/json"> block: '<', '>' and '&' escaped so no text closes the block."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    return text.replace('&', '\\u0026').replace('<', '\\u003c').replace('>', '\\u003e').replace(
        '\u2028', '\\u2028').replace('\u2029', '\\u2029')


# Sections already built, one JSON file each, under the work dir: a page built again (at the end of every run) reads
# a section whose inputs are unchanged instead of reading its items and thumbnails again.
SECTION_CACHE = Path('.vlmeval-ext-report')


def _stamp(path: Path) -> list:
    """What says a file or folder is unchanged: its path, size and modification time ([path] when absent)."""
    try:
        st = path.stat()
    except OSError:
        return [str(path)]
    return [str(path.resolve()), st.st_size, st.st_mtime_ns]


def section_inputs(report, dataset: str, pred: Path, thumbs: Thumbnails) -> list:
    """Everything a section is built from: the run's files (every file of its folder whose name starts with the
    predictions' stem), the TSVs its thumbnails may come from and the kit's image folder its links point into,
    where the page is, and the code that builds it."""
    stem = pred.name[:-len(pred.suffix)] if pred.suffix else pred.name
    files = sorted(p for p in pred.parent.glob(f'{glob.escape(stem)}*') if p.is_file())
    split, candidates = thumbs.source(dataset)
    modules = {c.__module__ for c in type(report).__mro__ if c is not object}
    if getattr(report, 'page_section', None) is not None:
        modules.add(report.page_section.__module__)
    code = [Path(__file__), *sorted(Path(sys.modules[m].__file__) for m in modules)]
    return [[_stamp(p) for p in files], [_stamp(p) for p in candidates],
            _stamp(Path(lmu_data_root()) / 'images' / split), str(thumbs.page_dir), [_stamp(p) for p in code]]


def cached_section(work_dir: Path, report, title: str, dataset: str, pred: Path, tag: str, thumbs: Thumbnails):
    """The run's section: the one built before when none of its inputs changed, else built now and kept. A cache
    file that cannot be read is built again; one that cannot be written leaves the page as it is."""
    inputs = json.loads(json.dumps(section_inputs(report, dataset, pred, thumbs)))
    name = hashlib.sha1(f'{title}|{dataset}|{tag}|{pred.resolve()}'.encode('utf-8')).hexdigest()
    path = work_dir / SECTION_CACHE / f'{name}.json'
    try:
        kept = json.loads(path.read_text(encoding='utf-8'))
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict) and kept.get('inputs') == inputs:
        if kept.get('missing'):
            thumbs.missing.setdefault(dataset, kept['missing'])
        return Section(**kept['section']) if kept.get('section') else None
    section = report.section(title, dataset, str(pred), tag, thumbs)
    kept = {'inputs': inputs, 'section': asdict(section) if section is not None else None,
            'missing': thumbs.missing.get(dataset)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f'{path.name}.partial{os.getpid()}')
        tmp.write_text(json.dumps(kept, ensure_ascii=False, default=str), encoding='utf-8')
        os.replace(tmp, path)
    except OSError:
        pass
    return section


def build(work_dir: Path, page_dir: Path | None = None) -> str:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from vlmeval_ext.records.manifest import manifest_beside, typed_model_name
    from vlmeval_ext.records.summary import dataset_of, model_of, tag_of
    thumbs = Thumbnails(page_dir or work_dir)
    overview, sections, skipped = [], [], []
    files = score_files(work_dir)
    stems = {p.name[:-len('_score.json')] for p in files}
    for path in files:
        dataset, tag = dataset_of(path), tag_of(path)
        record = benchmark_of(dataset)
        if record is None:
            continue
        score = json.loads(path.read_text(encoding='utf-8'))
        model = typed_model_name(manifest_beside(path), model_of(path) or path.name.split(f'_{dataset}')[0])
        overview.append(run_overview(path, score, dataset, model, tag, stems, page_dir or work_dir))
        pred = _predictions_of(path, tag)
        if pred is None:
            continue
        title = f'{model} / {dataset}' + (f' ({tag.lstrip("_")} mode)' if tag else '')
        try:
            section = cached_section(work_dir, load_object(record.report), title, dataset, pred, tag, thumbs)
        except LinkOutside as err:
            skipped.append(f'{title}: {err}')
            print(f'[vlmeval-ext] WARNING: report: {title}: {err}', file=sys.stderr)
            continue
        if section is not None:
            sections.append(section)
    banners = []
    if thumbs.missing:
        looked = Path(next(iter(thumbs.missing.values()))).parent
        banners.append(f'Thumbnails of {", ".join(sorted(thumbs.missing))} are missing: their TSVs are not under '
                       f'$LMUData (the folder {looked.name}/ was searched); set LMUData to the folder the run used '
                       'and build the page again with `vlmeval-ext report WORK_DIR`')
    demos = sorted({run['dataset'] for run in overview if run['demo']})
    env = Environment(loader=FileSystemLoader(str(TEMPLATE.parent)), autoescape=select_autoescape(['html', 'j2']))
    env.filters['cell'] = _format
    env.filters['script_json'] = _script_json
    template = env.get_template(TEMPLATE.name)
    return template.render(work_dir=work_dir.resolve().name, overview=overview, sections=sections,
                           payloads=[s.payload() for s in sections], skipped=skipped, card=score_card(overview),
                           details=details(overview), comparisons=comparisons(work_dir), banners=banners,
                           demos=demos)


def write_report(work_dir: str | Path, out: str | Path | None = None) -> Path:
    work_dir = Path(work_dir)
    out = Path(out) if out else work_dir / 'report.html'
    html = build(work_dir, out.resolve().parent)
    tmp = out.with_name(f'{out.name}.partial{os.getpid()}')
    tmp.write_text(html, encoding='utf-8')
    os.replace(tmp, out)
    return out


def report_line(work_dir) -> str:
    """The report written at the end of a run or an evaluation, as one line (a failure to write it is said, and
    never fails the run whose scores are already written)."""
    try:
        out = write_report(work_dir)
    except Exception as err:
        return (f'[vlmeval-ext] WARNING: the HTML report of {work_dir} could not be written ({type(err).__name__}: '
                f'{str(err)[:160]}); `vlmeval-ext report {work_dir}` tries again')
    return f'report: {out}'


def report_main(argv=None) -> int:
    p = argparse.ArgumentParser(prog='vlmeval-ext report', description=__doc__.split('\n\n')[0])
    p.add_argument('work_dir', metavar='WORK_DIR')
    p.add_argument('--out', default=None, metavar='FILE.html', help='default: WORK_DIR/report.html')
    args = p.parse_args(argv)
    root = Path(args.work_dir)
    if not root.is_dir():
        print(f'[vlmeval-ext] ERROR: {root} is not a folder', file=sys.stderr)
        return 2
    if not score_files(root):
        print(f'[vlmeval-ext] ERROR: no *_score.json under {root} (evaluate a run first)', file=sys.stderr)
        return 1
    out = write_report(root, args.out)
    print(f'report: {out} ({out.stat().st_size / 1e6:.1f} MB)')
    return 0


if __name__ == '__main__':
    sys.exit(report_main())
