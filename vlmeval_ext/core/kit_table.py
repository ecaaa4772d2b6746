"""The table an evaluate() returns: what the kit's run.py prints under "Evaluation Results" (and `vlmeval-ext eval`
prints), once, with every row and column labelled and every column naming its unit.

The kit prints a returned DataFrame with `tabulate(df)`, which shows no column headers, after transposing it when it
has fewer rows than columns. So the table is built wide: the first column holds the row labels (its header names
the table), the others are `<label> (<unit>)`. Transposed, the column labels become the printed row labels and the
first column becomes the printed first row: every label is on screen. The kit also takes its "primary metric" from
this table through our `report_primary_metric` (core.evaluation): the first value of the first row, the headline,
so its run summary names the metric and its unit. A table taller
than wide (e.g. ReMI with one task) becomes one `row: column (unit)` label and value per line.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd


NOT_DEFINED = 'n/a'


def result_table(title: str, rows: Mapping[str, Mapping[str, object]], digits: int = 2) -> pd.DataFrame:
    """{row label: {column with its unit: value}} -> a DataFrame whose first column, `title`, holds the row labels.
    Floats are rounded to `digits`; a value that is not defined (None, NaN) reads 'n/a'."""
    records = []
    for label, values in rows.items():
        record = {title: label}
        for column, value in values.items():
            if value is None or (isinstance(value, float) and value != value):
                value = NOT_DEFINED          # e.g. ERP where the baseline makes no error: said, not 'nan'
            record[column] = round(value, digits) if isinstance(value, float) else value
        records.append(record)
    table = pd.DataFrame(records)
    if len(table) >= len(table.columns):
        # Taller than wide: the kit would print it as is, without column headers. One labelled value per row
        # instead (the labels are then data, which the kit prints).
        long = [{title: f'{row[title]}: {column}', 'value': row[column]}
                for row in records for column in row if column != title]
        return pd.DataFrame(long)
    return table


def as_text(table: pd.DataFrame) -> str:
    """The table as our CLI prints it: headers, no index."""
    return table.to_string(index=False)


def as_kit_prints(table: pd.DataFrame) -> str:
    """The table as the kit's run.py prints it (tabulate, transposed when wider than tall): for tests and docs."""
    from tabulate import tabulate
    shown = table.T if len(table) < len(table.columns) else table
    return tabulate(shown)
