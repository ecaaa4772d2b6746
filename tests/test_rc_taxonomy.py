"""The 33-distortion taxonomy has one home (vlmeval_ext.core.taxonomy, reading dataset_specs/rbench.yaml): R-Bench's
report, the corruption engine and every -RC report read it there (pure: no kit import)."""
import copy

import pytest

from vlmeval_ext.core import taxonomy as T
from vlmeval_ext.core.spec import load_spec


@pytest.fixture
def renamed(monkeypatch):
    """The spec as the taxonomy module reads it, with distortion 16 renamed and moved to another group."""
    spec = copy.deepcopy(load_spec('rbench'))
    row = next(d for d in spec['distortions'] if d['id'] == 16)
    row['name'] = 'JPEG (renamed)'
    monkeypatch.setattr(T, 'load_spec', lambda name: spec if name == 'rbench' else load_spec(name))
    return spec


def test_every_reader_goes_through_the_one_table(renamed):
    from vlmeval_ext.corrupt.distortions import distortion_info
    from vlmeval_ext.rbench import report as rb
    assert distortion_info(16)['name'] == 'JPEG (renamed)'
    assert rb.taxonomy()['distortions'][16] == 'JPEG (renamed)'
    assert rb.taxonomy is T.taxonomy and rb.dimension_order()[:4] == ['Overall', 'MCQ', 'VQA', 'CAP']


def test_the_table_is_checked(renamed):
    row = next(d for d in renamed['distortions'] if d['id'] == 16)
    row['group'] = 'Noise'         # the groups list still says Compression
    with pytest.raises(ValueError, match='groups lists distortion 16 under Compression'):
        T.taxonomy()
    renamed['distortions'].pop()
    with pytest.raises(ValueError, match='ids 1..33 exactly'):
        T.distortion_table()


def test_rc_and_rbench_tables_share_the_dimensions():
    from vlmeval_ext.corrupt.report import rc_table
    from vlmeval_ext.corrupt.variants import paired_rows
    table = rc_table(paired_rows({0: 1.0}, {(16, 3): {0: 0.0}}, task='VQA'), 'VQA')
    assert list(table['absolute']) == T.dimension_order(('VQA',))
    assert table['absolute']['Compression'] == 0.0 and table['absolute']['Source'] == 0.0
    assert table['absolute']['Blur'] is None
