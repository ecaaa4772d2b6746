"""vlmeval_ext.kit_workarounds.console.kit_lines_once: a line the kit logs again and again in one block is shown once, then counted."""
from __future__ import annotations

import io
import logging

from vlmeval_ext.kit_workarounds.console import kit_lines_once


def test_a_repeated_kit_line_is_shown_once_and_counted_and_other_lines_pass(capsys):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)            # as the kit's setup_logger gives its `vlmeval` logger
    kit = logging.getLogger('vlmeval')
    kit.addHandler(handler)
    child = logging.getLogger('vlmeval.dataset.utils.multiple_choice')
    try:
        with kit_lines_once('AI2D-RC'):
            for _ in range(67):
                child.warning('Exact Matching mode, will not do GPT-based answer matching. ')
            child.warning('another line')
        child.warning('Exact Matching mode, will not do GPT-based answer matching. ')   # after the block: shown
    finally:
        kit.removeHandler(handler)
    shown = stream.getvalue().splitlines()
    assert shown.count('Exact Matching mode, will not do GPT-based answer matching. ') == 2
    assert 'another line' in shown
    assert capsys.readouterr().err.strip() == ('[AI2D-RC] the kit said this 67 times (once shown): Exact Matching '
                                               'mode, will not do GPT-based answer matching.')
