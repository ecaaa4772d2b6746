"""The one interface a benchmark's plugin file implements, and what its implementations share (kit-free).

Each benchmark's plugin half is one module of this package (`vlmeval_ext/plugin/<bench>.py`), whose `REPORT` the
registry record names (`report`). The generic engines ask it and name no benchmark themselves:
- `summary_row(score)`: its row in `vlmeval-ext summary` and the leaderboard: {column with its unit: value};
- `judge_arguments(kwargs, notes)` and `rule_files(...)`: what its evaluation takes, and its scoring without the
  kit where no LLM judge is used (vlmeval_ext.evaluation); `without_the_kit(...)` where the benchmark decides that
  itself (R-Bench: the offline judge, or every verdict in the verdict cache);
- `extend_score(dataset, eval_file, score)`: its own additions to the score file (a note, say);
- `run_record(dataset)`: what its scores depend on beyond the files (prompt templates, seeds, input mode), which
  the manifest stores (templates as sha1);
- `write_extras(dataset, eval_file, score, tag, model)`: the plots and tables beside the score file (`model`: the
  name as the user typed it, for plot titles);
- `intervals(eval_file, score, tag)`: the score file's `ci95` block (methods in vlmeval_ext.records.intervals), from
  the per-item file the evaluation wrote; `with_intervals(table, score)`: the table evaluate returns (what the kit
  prints) with each headline row's interval;
- `headlines(eval_file, tag)`: the per-item values `vlmeval-ext compare` tests (vlmeval_ext.records.compare);
- `section(title, dataset, eval_file, tag, thumbs)`: its items on the report page (vlmeval_ext.records.report_html).
The module's `naive_answer(prompt_text, dataset)` (the record's `naive`) is what `Naive-Baseline` answers.
Prompts are read from the kit-dialect utils modules (vlmeval_ext.dataset.utils), their one copy.
"""
from __future__ import annotations

from typing import Callable, Mapping


class Report:
    # (label, score path, unit) of each headline: its interval goes beside it in the summary and leaderboard
    HEADLINE: tuple = ()
    # Whether a --judge makes the benchmark's evaluate use an LLM judge (which the kit builds); without one, a
    # benchmark with `rule_files` is scored without the kit (vlmeval_ext.evaluation.RuleScoring)
    LLM_JUDGE: bool = False
    # rule_files(dataset, data, eval_file, judge_kwargs) -> ({file suffix: content}, the table evaluate returns):
    # the pure function of dataset/utils/<bench>.py that the kit-dialect evaluate wraps; None: only the kit scores
    rule_files = None
    # without_the_kit(record, dataset, eval_file, judge_kwargs) -> what scores this evaluation without the kit (an
    # object with RuleScoring's methods), or None where the kit must; None here: RuleScoring where rule_files allow
    without_the_kit = None

    def __init__(self, read_headlines: Callable, page_section: Callable):
        """`read_headlines(eval_file, tag)` and `page_section(title, dataset, eval_file, tag, thumbs)`: the plugin
        file's own readers of its per-item files, for `compare` and the report page."""
        self.read_headlines, self.page_section = read_headlines, page_section

    def summary_row(self, score: Mapping) -> dict:
        raise NotImplementedError

    def interval_columns(self, score: Mapping) -> dict:
        """The headlines' 95 % intervals and the smallest difference this run's item count can detect."""
        from vlmeval_ext.records.intervals import detectable_text, leaf, text
        if 'ci95' not in score:
            return {}
        out = {f'{label} 95 % CI ({unit})': text(leaf(score['ci95'], path), 2 if unit == '%' else 4)
               for label, path, unit in self.HEADLINE}
        detect = score.get('detectable_difference')
        if isinstance(detect, Mapping):
            value = detect.get('value')
            out[f'detectable difference ({detect.get("unit", "")})'] = value if value is not None \
                else detectable_text(detect)
        return out

    def run_record(self, dataset: str) -> dict:
        return {}

    def judge_arguments(self, judge_kwargs: dict, notes: list) -> dict:
        """The judge arguments the kit dialect's evaluate gets (a benchmark may drop a judge it cannot use, adding
        a note to `notes`)."""
        return judge_kwargs

    def extend_score(self, dataset: str, eval_file: str, score: dict) -> None:
        """The benchmark's own additions to the score file, before its intervals (default: none)."""
        return None

    def write_extras(self, dataset: str, eval_file: str, score: Mapping, tag: str = '', model: str = '') -> None:
        """`model`: the model's name as the user typed it, for plot titles (default: the kit's folder name)."""
        return None

    def intervals(self, eval_file: str, score: Mapping, tag: str = '') -> dict:
        return {}

    def with_intervals(self, table, score: Mapping):
        """The returned table with the 95 % interval of each row's first value (its headline) right after it, as
        two columns (`... 95 % CI low` / `high`): numbers, so the kit's run summary still takes the headline as the
        row's first value; `n<2` where a cell has too few items, `-` where the row has no interval (a fixed rule,
        such as a naive baseline, has no sampling interval)."""
        import pandas as pd

        from vlmeval_ext.records.intervals import text
        rows = self.interval_rows(score)
        if table is None or not rows or len(table) != len(rows):
            return table
        column = table.columns[1]
        unit = column[column.rfind('('):] if column.endswith(')') else ''
        digits = 4 if unit == '(0-1)' else 2
        name = column.split(' (')[0]
        table = table.copy()
        for k, side in enumerate(('low', 'high')):
            values = [round(float(r[k]), digits) if isinstance(r, (list, tuple)) else text(r) for r in rows]
            table.insert(2 + k, f'{name} 95 % CI {side} {unit}'.strip(),
                         pd.Series(values, index=table.index, dtype=object))
        return table

    def interval_rows(self, score: Mapping) -> list:
        """The interval of each row's headline in the returned table, in row order ([] for none)."""
        return []

    def headlines(self, eval_file, tag: str = '') -> list:
        """The run's headline scores as per-item values (vlmeval_ext.records.compare.Headline), for `compare`."""
        return self.read_headlines(eval_file, tag)

    def section(self, title: str, dataset: str, eval_file: str, tag: str, thumbs):
        """The run's items for the report page (vlmeval_ext.records.report_html.Section), None when its per-item
        file is missing."""
        return self.page_section(title, dataset, eval_file, tag, thumbs)


def read_table(path: str):
    import pandas as pd
    return pd.read_csv(path, sep='\t' if path.endswith('.tsv') else ',', dtype=str, keep_default_na=False)


def save_figure(fig, path, title: str = '', dpi: int = 110) -> None:
    """The figure (vlmeval_ext.records.plots.new_figure) with its run title on top (wrapped to the figure's width),
    written to `path` (the title also as the PNG's Title)."""
    from vlmeval_ext.records.plots import wrapped
    if title:
        fig.suptitle(wrapped(title, fig.get_figwidth(), 10), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi, metadata={'Title': title} if title else None)
