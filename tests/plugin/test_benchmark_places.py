"""Every place a benchmark must be named outside its registry record (docs/ARCHITECTURE.md, "Where a new benchmark
goes"), checked against the registry: a benchmark left out of one is a failing test here, not a KeyError in a
user's run."""
from __future__ import annotations

import re

from helpers.kit_run import REPO_ROOT
from vlmeval_ext.registry import BENCHMARKS, CORRUPTED


def test_compare_and_the_report_have_a_part_for_every_benchmark():
    from vlmeval_ext.records.compare import READERS
    from vlmeval_ext.records.report_html import SECTIONS
    keys = {r.key for r in (*BENCHMARKS, CORRUPTED)}
    assert set(READERS) == keys
    assert set(SECTIONS) == keys


def test_every_record_names_what_exists():
    from vlmeval_ext.registry import load_object
    for record in BENCHMARKS:
        assert record.report and load_object(record.report) is not None, record.key
        assert record.prepare, record.key
        module = record.prepare.partition(':')[0]
        assert (REPO_ROOT / (module.replace('.', '/') + '.py')).is_file(), record.key
        assert (REPO_ROOT / 'dataset_specs' / f'{record.spec}.yaml').is_file(), record.key
        for demo_file in set(record.demos.values()):
            assert (REPO_ROOT / 'vlmeval_ext' / 'demo' / demo_file).is_file(), (record.key, demo_file)


def test_the_architecture_doc_lists_every_place():
    doc = (REPO_ROOT / 'docs' / 'ARCHITECTURE.md').read_text(encoding='utf-8')
    section = doc.split('## Where a new benchmark goes', 1)[1]
    for place in ('vlmeval_ext/dataset/<bench>.py', 'vlmeval_ext/dataset/utils/<bench>.py', 'registry.py',
                  'datasets.py', 'records/benchmarks.py', 'records/intervals.py', 'records/compare.py',
                  'READERS', 'records/report_html.py', 'SECTIONS', 'baselines.py', 'prepare/<bench>.py',
                  'dataset_specs/<bench>.yaml', 'dataset_specs/pull_requests.yaml', 'vlmeval_ext/demo/'):
        assert place in section, place
    assert re.search(r'\b12 places\b', section)
