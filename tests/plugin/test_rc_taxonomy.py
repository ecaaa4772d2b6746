"""The 33-distortion taxonomy has one home in the code, R-Bench's dataset file (vlmeval_ext/dataset/utils/
rbench_full.py, DISTORTIONS / STEPS / GROUPS; dataset_specs/rbench.yaml documents the same table, see
tests/datasets/test_rbench_constants.py): the corruption engine and every -RC report read it there."""
from vlmeval_ext.dataset.utils import rbench_full as B


def test_every_reader_goes_through_the_one_table(monkeypatch):
    from vlmeval_ext.distortions import distortion_info, distortion_table
    monkeypatch.setitem(B.DISTORTIONS, 16, ('JPEG (renamed)', 'Source', 'Compression'))
    assert distortion_info(16)['name'] == 'JPEG (renamed)'
    assert distortion_table()[16] == {'name': 'JPEG (renamed)', 'step': 'Source', 'group': 'Compression'}


def test_rc_and_rbench_tables_share_the_dimensions():
    from vlmeval_ext.corrupt.report import rc_table
    from vlmeval_ext.corrupt.variants import paired_rows
    table = rc_table(paired_rows({0: 1.0}, {(16, 3): {0: 0.0}}, task='VQA'), 'VQA')
    assert list(table['absolute']) == B.dimension_order(('VQA',))
    assert table['absolute']['Compression'] == 0.0 and table['absolute']['Source'] == 0.0
    assert table['absolute']['Blur'] is None
