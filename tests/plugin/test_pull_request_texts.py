"""The pull-request texts (dataset_specs/pull_requests.yaml, rendered by `export-upstream`) cite, for each claim, the
test that checks it: every cited test exists, every benchmark sent as a pull request has its data, licence and
evidence written, and none claims a published comparison it does not have."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers.kit_run import REPO_ROOT
from vlmeval_ext.cli.export_upstream import is_proposal
from vlmeval_ext.registry import BENCHMARKS
from vlmeval_ext.spec import load_spec

FACTS = load_spec('pull_requests')
SENT = [r.key for r in BENCHMARKS if not is_proposal(r)]


def test_every_pull_request_has_its_data_licence_and_evidence():
    assert sorted(FACTS) == sorted(SENT)
    for key in SENT:
        data = FACTS[key]['data']
        assert all(data.get(k) for k in ('source', 'licence', 'redistributes', 'host', 'build')), key
        assert len(FACTS[key]['evidence']) >= 3, key


@pytest.mark.parametrize('key', SENT)
def test_each_cited_test_exists(key):
    for item in FACTS[key]['evidence']:
        path, _, name = item['test'].partition('::')
        file = REPO_ROOT / path
        assert file.is_file(), item['test']
        tree = ast.parse(file.read_text(encoding='utf-8'))
        assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, item['test']


def test_published_comparisons_only_where_the_paper_has_numbers():
    # RoCOCO-MCQ is our recast and ReMI ships no model rows: neither may claim a comparison
    assert FACTS['RoCOCO-MCQ']['published'] is None and FACTS['ReMI']['published'] is None
    assert any('recast' in e['what'] for e in FACTS['RoCOCO-MCQ']['extensions'])
    assert any('efficient' in e['what'] and 'off by default' in e['leave_out']
               for e in FACTS['R-Bench-Full']['extensions'])


@pytest.mark.parametrize('key', SENT)
def test_each_pull_request_ships_the_build_script_its_text_names(key):
    """The data section names a `python scripts/build_<x>_tsv.py` command: that script is a file of the patch, and a
    cited test runs it and compares its TSV with the plugin's build, byte for byte."""
    import re

    from vlmeval_ext.cli.export_upstream import kit_files
    from vlmeval_ext.registry import BENCHMARKS
    record = next(r for r in BENCHMARKS if r.key == key)
    script = re.search(r'python (scripts/build_\w+_tsv\.py)', FACTS[key]['data']['build']).group(1)
    assert script in kit_files(record) and kit_files(record)[script].is_file(), script
    assert any(Path(script).name.replace('.py', '') in item['claim'] or Path(script).name in item['claim']
               for item in FACTS[key]['evidence']), key


def test_what_only_the_maintainers_can_decide_is_asked_in_the_text():
    """RoCOCO-MCQ's TYPE: 'MCQ' makes the kit's run.py configure a judge its evaluate never calls; the pull request
    asks the maintainers instead of choosing silently."""
    from vlmeval_ext.cli.export_upstream import pr_text
    record = next(r for r in BENCHMARKS if r.key == 'RoCOCO-MCQ')
    text = pr_text(record, {}, [], 0)
    todo = text.split('## Still to do before merging', 1)[1]
    assert "`TYPE = 'MCQ'`" in todo and 'gpt-4o-mini' in todo and todo.rstrip().endswith('Which do you prefer?')
