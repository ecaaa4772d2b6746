"""Replies that look like missing values survive the kit's reruns.

When the kit resumes a run (`--reuse`, which our run.py passes), it reads its own predictions file back with
pandas' missing-value parsing and writes it again: a reply 'None', 'NA', 'null', 'N/A' or '' comes back as the
text 'nan'. The launcher keeps the replies of our datasets as they were before it hands over (`remember`, in
the run's context: vlmeval_ext.run_context), and the evaluation of each of our predictions files puts back the
ones the kit's reload turned into 'nan' (`restore`, one line saying how many), before anything is scored. The fix
that belongs in the kit is upstream/0005-predictions-read-back-as-text.patch.
"""
from __future__ import annotations

import sys
from pathlib import Path

from vlmeval_ext import run_context

# What pandas reads as missing by default (pandas' STR_NA_VALUES) and the empty answer: what the kit's reload
# turns into 'nan'.
NA_LOOKING = frozenset({'', '#N/A', '#N/A N/A', '#NA', '-1.#IND', '-1.#QNAN', '-NaN', '-nan', '1.#IND', '1.#QNAN',
                        '<NA>', 'N/A', 'NA', 'NULL', 'NaN', 'None', 'n/a', 'nan', 'null'})


def remember(prediction_files) -> None:
    """Keep, for each existing predictions file, the replies that a reload would turn into 'nan' (by file name:
    the kit writes the rerun's file under the same name, in the same folder or in a new run folder)."""
    from vlmeval_ext.io import read_table
    remembered = run_context.current().replies_before_kit
    remembered.clear()
    for path in prediction_files:
        try:
            table = read_table(path)
        except Exception:  # an unreadable file is the launcher's set_aside_unloadable's to report
            continue
        if 'prediction' not in table.columns or 'index' not in table.columns:
            continue
        kept = {i: p for i, p in zip(table['index'], table['prediction']) if p in NA_LOOKING and p != 'nan'}
        if kept:
            remembered.setdefault(Path(path).name, {}).update(kept)


def restore(prediction_file) -> int:
    """Put back, in the predictions file itself (atomically), each remembered reply the kit's reload turned
    into 'nan'; returns how many, after one line saying so."""
    from vlmeval_ext.io import read_table, write_predictions_table
    kept = run_context.current().replies_before_kit.get(Path(prediction_file).name)
    if not kept:
        return 0
    table = read_table(prediction_file)
    if 'prediction' not in table.columns or 'index' not in table.columns:
        return 0
    column = list(table['prediction'])
    fixed = [k for k, (i, p) in enumerate(zip(table['index'], column)) if p == 'nan' and i in kept]
    if not fixed:
        return 0
    for k in fixed:
        column[k] = kept[table['index'].iloc[k]]
    table['prediction'] = column
    write_predictions_table(table, prediction_file)
    shown = sorted({repr(column[k]) for k in fixed})[:5]
    print(f'[vlmeval-ext] INFO: {prediction_file}: {len(fixed)} repl(ies) ({", ".join(shown)}) that the kit read '
          "back as missing values and rewrote as 'nan' are restored as the model gave them", file=sys.stderr,
          flush=True)
    return len(fixed)
