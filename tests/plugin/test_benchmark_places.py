"""The places a benchmark is named outside its registry record (docs/ARCHITECTURE.md, "Where a new benchmark goes":
three files and one record, and what a record may name besides), checked against the registry: a place a record
names that is missing is a failing test here, not a KeyError in a user's run; and the generic engines of records/
name no benchmark. tests/e2e/test_a_new_benchmark.py adds one with the three files and the record alone."""
from __future__ import annotations

import re

from helpers.kit_run import REPO_ROOT
from vlmeval_ext.registry import BENCHMARKS, CORRUPTED


def test_every_benchmark_has_its_plugin_file_with_a_complete_report():
    # compare and the report page ask the record's REPORT: each gives its own summary row, intervals, headlines
    # and page section, from the one plugin file the record names
    from vlmeval_ext.plugin.base import Report
    from vlmeval_ext.registry import load_object
    for record in (*BENCHMARKS, CORRUPTED):
        module = record.report.partition(':')[0]
        assert module.startswith('vlmeval_ext.plugin.') and record.report.endswith(':REPORT'), record.key
        assert (REPO_ROOT / (module.replace('.', '/') + '.py')).is_file(), record.key
        report = load_object(record.report)
        assert isinstance(report, Report), record.key
        for method in ('summary_row', 'intervals'):
            assert getattr(type(report), method) is not getattr(Report, method), (record.key, method)
        for reader in (report.read_headlines, report.page_section):
            assert reader.__module__ == module, (record.key, reader)
        if record.naive:
            assert record.naive.partition(':')[0] == module, record.key


def test_every_record_names_what_exists():
    from vlmeval_ext.registry import load_object
    for record in BENCHMARKS:
        assert record.report and load_object(record.report) is not None, record.key
        kit_module = record.kit_class.partition(':')[0]
        for module in (kit_module, kit_module.replace('.dataset.', '.dataset.utils.')):
            assert (REPO_ROOT / (module.replace('.', '/') + '.py')).is_file(), (record.key, module)
        assert record.plugin_class is None, record.key          # the class is made from the record
        if record.plugin_steps:                                  # its own steps live in its plugin file
            assert record.plugin_steps.partition(':')[0] == record.report.partition(':')[0], record.key
            assert isinstance(load_object(record.plugin_steps), type), record.key
        if record.prepare:
            module = record.prepare.partition(':')[0]
            assert (REPO_ROOT / (module.replace('.', '/') + '.py')).is_file(), record.key
        if record.spec:
            assert (REPO_ROOT / 'dataset_specs' / f'{record.spec}.yaml').is_file(), record.key
        for demo_file in set(record.demos.values()):
            assert (REPO_ROOT / 'vlmeval_ext' / 'demo' / demo_file).is_file(), (record.key, demo_file)


def test_the_architecture_doc_lists_every_place():
    doc = (REPO_ROOT / 'docs' / 'ARCHITECTURE.md').read_text(encoding='utf-8')
    section = doc.split('## Where a new benchmark goes', 1)[1]
    needed, optional = section.split('each only where the benchmark has it', 1)
    for place in ('vlmeval_ext/dataset/<bench>.py', 'vlmeval_ext/dataset/utils/<bench>.py', 'registry.py',
                  'vlmeval_ext/plugin/<bench>.py', 'REPORT', 'naive_answer'):
        assert place in needed, place
    for place in ('plugin_steps', 'prepare/<bench>.py', 'dataset_specs/<bench>.yaml',
                  'dataset_specs/pull_requests.yaml', 'vlmeval_ext/demo/'):
        assert place in optional, place
    assert 'three files and one record' in needed and 'test_a_new_benchmark.py' in needed


def test_the_generic_engines_name_no_benchmark():
    names = [r.key for r in BENCHMARKS] + ['R-Bench', 'RoCOCO']
    for engine in ('summary.py', 'leaderboard.py', 'report_html.py', 'run_records.py', 'intervals.py'):
        code = (REPO_ROOT / 'vlmeval_ext' / 'records' / engine).read_text(encoding='utf-8')
        code = re.sub(r'(?s)""".*?"""', '', code)          # docstrings may give examples
        named = sorted({n for n in names if re.search(rf"['\"]{re.escape(n)}['\"]", code)})
        assert not named, (engine, named)
