"""A new benchmark is three files and one registry record (docs/ARCHITECTURE.md, "Where a new benchmark goes").

The package is copied, and a toy benchmark is added to the copy exactly as a contributor would add one: its
kit-dialect class (`dataset/toy.py`), its rules (`dataset/utils/toy.py`), its plugin half (`plugin/toy.py`) and one
`Benchmark` record appended in `registry.py`; nothing else of the copy is touched. Then, with the copy first on the
path, the everyday commands must handle it: `list`, `eval` (through the kit: the generic plugin class), `summary`,
`compare`, `report` and `export-upstream --only Toy` (a patch that applies, and a draft text that says what is
missing before a pull request)."""
from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers.kit_checkout import _git, copy_checkout, installed_kit
from helpers.kit_run import REPO_ROOT, kit_environment

pytestmark = [pytest.mark.slow]

TOY_DATASET = '''"""Toy: a picture and a question with a one-word answer, exact match (the tests' new benchmark)."""
import os.path as osp

import pandas as pd

from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.smp import LMUDataRoot, dump, get_intermediate_file_path

from .utils.exact_io import read_text_table
from .utils.toy import evaluation_files, result_table


class Toy(ImageBaseDataset):
    TYPE = 'VQA'
    DATASET_URL = {'Toy': ''}
    DATASET_MD5 = {}
    force_use_dataset_prompt = True

    def load_data(self, dataset):
        return pd.read_csv(osp.join(LMUDataRoot(), f'{dataset}.tsv'), sep='\\t', dtype=str,
                           keep_default_na=False)

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        message = [dict(type='image', value=p) for p in self.dump_image(line)]
        return message + [dict(type='text', value=line['question'])]

    def evaluate(self, eval_file, **judge_kwargs):
        files = evaluation_files(read_text_table(eval_file))
        for name, content in files.items():
            suffix, fmt = name.rsplit('.', 1)
            dump(content, get_intermediate_file_path(eval_file, suffix, fmt))
        return result_table(files['_score.json'])
'''

TOY_RULES = '''"""Toy's rule: the reply, stripped and lower-cased, equals the answer."""
import pandas as pd

from .exact_io import is_infer_fail


def evaluation_files(data):
    rows = [{'index': r['index'], 'answer': r['answer'], 'prediction': r['prediction'],
             'hit': int(r['prediction'].strip().lower() == r['answer'].lower())}
            for r in data.to_dict('records') if not is_infer_fail(r['prediction'])]
    accuracy = round(100 * sum(r['hit'] for r in rows) / len(rows), 2) if rows else None
    score = {'accuracy': accuracy, 'counts': {'items': len(data), 'scored': len(rows)}}
    return {'_score.json': score, '_items.tsv': pd.DataFrame(rows)}


def result_table(score):
    return pd.DataFrame([{'Toy': 'Overall', 'accuracy (%)': score['accuracy'],
                          'scored (items)': score['counts']['scored']}])
'''

TOY_PLUGIN = '''"""Toy's plugin half: summary row, intervals, the items compare reads, its report-page section."""
from pathlib import Path

import numpy as np

from vlmeval_ext.io import stem_path
from vlmeval_ext.plugin.base import Report, read_table
from vlmeval_ext.records.compare import Headline, item_table, plain
from vlmeval_ext.records.intervals import Intervals, binary_detectable, wilson
from vlmeval_ext.records.report_html import Section, col, read_file


class ToyReport(Report):
    HEADLINE = (('accuracy', ('accuracy',), '%'),)

    def summary_row(self, score):
        return {'accuracy (%)': score['accuracy'], 'items': score['counts']['items']}

    def intervals(self, eval_file, score, tag=''):
        items = read_table(stem_path(eval_file, '_items.tsv'))
        hits = items['hit'].astype(float)
        iv = Intervals(len(hits), {'method': 'wilson', 'unit': 'items'})
        iv.put(['accuracy'], wilson(hits.sum(), len(hits)), len(hits))
        return iv.block(binary_detectable(hits.to_numpy()))


def read_headlines(eval_file: Path, tag: str = '') -> list[Headline]:
    items = item_table(Path(stem_path(eval_file, '_items.tsv')))
    return [plain('accuracy', '%', items['index'].tolist(), items['hit'].to_numpy(float))]


def page_section(title, dataset, eval_file, tag, thumbs):
    items = read_file(stem_path(eval_file, '_items.tsv'))
    if items is None:
        return None
    rows = [{'index': r['index'], 'answer': r['answer'], 'prediction': r['prediction'],
             'outcome': 'right' if r['hit'] == '1' else 'wrong'} for r in items.to_dict('records')]
    columns = [col('index', 'index'), col('answer', 'answer'), col('prediction', 'reply'),
               col('outcome', 'outcome')]
    return Section(title, 'Toy', columns, rows, [{'key': 'outcome', 'label': 'outcome'}])


def naive_answer(prompt_text, dataset):
    return 'cat'


REPORT = ToyReport(read_headlines, page_section)
'''

TOY_RECORD = '''

BENCHMARKS = (*BENCHMARKS, Benchmark(
    key='Toy', title='Toy', kit_class='vlmeval_ext.dataset.toy:Toy', plugin_class=None, names=('Toy',),
    required_columns=('index', 'question', 'answer', 'image'), prediction_columns=('index', 'answer', 'prediction'),
    naive='vlmeval_ext.plugin.toy:naive_answer', report='vlmeval_ext.plugin.toy:REPORT'))
'''
ANSWERS = ['cat', 'dog', 'bird', 'fish', 'cat', 'dog', 'cow', 'cat', 'bird', 'dog', 'cat', 'fish']


def _png() -> str:
    from PIL import Image
    buf = io.BytesIO()
    Image.new('RGB', (8, 8), (200, 30, 30)).save(buf, format='PNG')
    return base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope='module')
def toy(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('toy')
    repo = tmp / 'repo'
    shutil.copytree(REPO_ROOT / 'vlmeval_ext', repo / 'vlmeval_ext',
                    ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    shutil.copytree(REPO_ROOT / 'dataset_specs', repo / 'dataset_specs')
    package = repo / 'vlmeval_ext'
    # the three files and the one record
    (package / 'dataset' / 'toy.py').write_text(TOY_DATASET)
    (package / 'dataset' / 'utils' / 'toy.py').write_text(TOY_RULES)
    (package / 'plugin' / 'toy.py').write_text(TOY_PLUGIN)
    registry = package / 'registry.py'
    text = registry.read_text()
    anchor = '\n# `<Dataset>-RC`'
    registry.write_text(text.replace(anchor, TOY_RECORD + anchor, 1))
    env = kit_environment(tmp)
    env['PYTHONPATH'] = str(repo)
    pd.DataFrame({'index': [str(i) for i in range(len(ANSWERS))], 'question': ['What animal is this?'] * len(ANSWERS),
                  'answer': ANSWERS, 'image': [_png()] * len(ANSWERS)}).to_csv(
        Path(env['LMUData']) / 'Toy.tsv', sep='\t', index=False)
    work = tmp / 'work'
    for model, wrong in (('ModelA', {1, 4, 6}), ('ModelB', {1, 2, 3, 4, 6, 9, 10})):
        folder = work / model
        folder.mkdir(parents=True)
        pd.DataFrame({'index': [str(i) for i in range(len(ANSWERS))], 'question': ['What animal is this?'] * len(ANSWERS),
                      'answer': ANSWERS, 'prediction': [('horse' if i in wrong else a.upper())
                                                        for i, a in enumerate(ANSWERS)]}).to_csv(
            folder / f'{model}_Toy.tsv', sep='\t', index=False)
    return {'tmp': tmp, 'repo': repo, 'env': env, 'work': work}


def _cli(toy, *args, timeout=600) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, '-m', 'vlmeval_ext', *map(str, args)], env=toy['env'], cwd=toy['tmp'],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def test_the_copy_with_the_toy_is_what_runs(toy):
    proc = subprocess.run([sys.executable, '-c', 'import vlmeval_ext; print(vlmeval_ext.__file__)'],
                          env=toy['env'], cwd=toy['tmp'], capture_output=True, text=True)
    assert Path(proc.stdout.strip()).resolve().parent == (toy['repo'] / 'vlmeval_ext').resolve()


def test_list_eval_summary_compare_and_report_handle_a_benchmark_of_three_files_and_one_record(toy):
    listed = _cli(toy, 'list').stdout
    assert 'Toy' in listed and 'prepared' in listed.split('Toy', 1)[1].splitlines()[0]
    for model, accuracy in (('ModelA', 75.0), ('ModelB', round(100 * 5 / 12, 2))):
        pred = toy['work'] / model / f'{model}_Toy.tsv'
        out = _cli(toy, 'eval', '--data', 'Toy', '--pred', pred).stdout
        assert 'accuracy (%)' in out, out
        score = json.loads(pred.with_name(f'{model}_Toy_score.json').read_text())
        assert score['accuracy'] == accuracy and score['counts'] == {'items': 12, 'scored': 12}
        assert 'ci95' in score and score['coverage']['missing_items'] == 0, score      # the plugin's steps ran
        assert pred.with_name(f'{model}_Toy_manifest.json').is_file()
    summary = _cli(toy, 'summary', toy['work']).stdout
    assert 'Toy' in summary and '75' in summary, summary
    compared = _cli(toy, 'compare', toy['work'] / 'ModelA' / 'ModelA_Toy.tsv',
                    toy['work'] / 'ModelB' / 'ModelB_Toy.tsv', '--data', 'Toy').stdout
    assert 'accuracy' in compared and '12' in compared, compared
    page = toy['tmp'] / 'page.html'
    _cli(toy, 'report', toy['work'], '--out', page)
    html = page.read_text(encoding='utf-8')
    assert 'Toy' in html and 'horse' in html


@pytest.mark.kit
def test_export_upstream_only_the_toy_gives_a_patch_that_applies_and_a_draft_that_says_what_is_missing(toy):
    kit = copy_checkout(*installed_kit(), toy['tmp'] / 'VLMEvalKit')
    out = _cli(toy, 'export-upstream', '--kit', kit, '--patch-dir', toy['tmp'] / 'patches', '--only', 'Toy').stdout
    assert 'no entry in dataset_specs/pull_requests.yaml' in out, out
    patch = toy['tmp'] / 'patches' / 'Toy.patch'
    diff = patch.read_text()
    for path in ('vlmeval/dataset/toy.py', 'vlmeval/dataset/utils/toy.py', 'vlmeval/dataset/utils/exact_io.py'):
        assert f'+++ b/{path}' in diff, path
    assert 'plugin/toy.py' not in diff and 'vlmeval_ext' not in diff
    _git(kit, 'apply', str(patch))
    init = (kit / 'vlmeval' / 'dataset' / '__init__.py').read_text()
    assert 'from .toy import Toy' in init
    draft = (toy['tmp'] / 'patches' / 'Toy.md').read_text()
    assert 'not ready for a pull request' in draft and 'pull_requests.yaml' in draft
    assert 'How the scoring was checked' not in draft           # claims nothing it was not told
    assert os.path.getsize(patch) > 0
