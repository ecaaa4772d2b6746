"""The page written after every run reuses each model x dataset section whose inputs did not change (the run's files,
the TSV of its thumbnails, the code that builds it) and builds again the ones a run touched: the same page, without
reading every item and thumbnail of the work dir again."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from vlmeval_ext.cli.main import main as cli_main
from vlmeval_ext.records.report_html import SECTION_CACHE, build
from vlmeval_ext.registry import benchmark_of


def evaluate(folder, name, dataset, answer):
    """`vlmeval-ext eval` of the demo split's predictions file `<name>_<dataset>.tsv` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    data = pd.read_csv(benchmark_of(dataset).demo_file(dataset), sep='\t', dtype=str, keep_default_na=False)
    data = data.drop(columns=['image'])
    data['prediction'] = [answer(row) for row in data.to_dict('records')]
    path = folder / f'{name}_{dataset}.tsv'
    data.to_csv(path, sep='\t', index=False)
    with pytest.raises(SystemExit) as done:
        cli_main(['eval', '--data', dataset, '--pred', str(path)])
    assert done.value.code == 0


def kept_sections(work):
    return {path: json.loads(path.read_text(encoding='utf-8')) for path in (work / SECTION_CACHE).glob('*.json')}


def test_a_page_built_again_reuses_unchanged_sections_and_builds_a_changed_run_anew(tmp_path, lmu):
    work = tmp_path / 'work'
    evaluate(work / 'A', 'A', 'GRAB_DEMO', lambda row: row['answer'])
    evaluate(work / 'B', 'B', 'GRAB_DEMO', lambda row: row['answer'])
    first = build(work)
    kept = kept_sections(work)
    assert len(kept) == 2 and all(k['section']['rows'] for k in kept.values())
    assert build(work) == first                                   # from the kept sections: the very same page
    # what the page shows is the kept section: a note planted in A's kept section appears on the page
    a_path = next(p for p, k in kept.items() if 'A_GRAB_DEMO.tsv' in json.dumps(k['inputs']))
    kept[a_path]['section']['note'] = 'planted in the kept section'
    a_path.write_text(json.dumps(kept[a_path]), encoding='utf-8')
    assert 'planted in the kept section' in build(work)
    # B evaluated again with other answers: B's section is built anew (its new predictions shown), A's still kept
    evaluate(work / 'B', 'B', 'GRAB_DEMO', lambda row: 'B answered 424242')
    page = build(work)
    assert 'planted in the kept section' in page and 'B answered 424242' in page
    # the TSV its thumbnails come from is an input too: a GRAB_DEMO.tsv put under $LMUData builds both anew
    shutil.copyfile(benchmark_of('GRAB_DEMO').demo_file('GRAB_DEMO'), lmu / 'GRAB_DEMO.tsv')
    assert 'planted in the kept section' not in build(work)


def test_a_damaged_kept_section_is_built_again(tmp_path, lmu):
    work = tmp_path / 'work'
    evaluate(work / 'A', 'A', 'GRAB_DEMO', lambda row: row['answer'])
    first = build(work)
    for path in kept_sections(work):
        path.write_text('{"inputs": [', encoding='utf-8')             # cut short
    assert build(work) == first
    assert all(k['section']['rows'] for k in kept_sections(work).values())
