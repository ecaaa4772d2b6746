"""Reading predictions and judge progress exactly, for the datasets that score answers as text.

GRAB, R-Bench-Full, ReMI and the RoCOCO datasets each add this same file, so their pull
requests merge in any order. It holds what all of them need:

- `read_text_table`: a predictions table with every cell as the text it holds. The kit's
  `load` guesses types, so the answer "3.0" would come back as 3.0 and the reply "None" as NaN.
- `is_infer_fail`: only the kit's own failure text is an inference failure. An empty reply is
  an answer.
- `load_progress` and `judge_id`: a judge progress file, read back only for the judge that
  wrote it.
- `fill`: a prompt template filled in one pass.
- `FAIL_MSG` and `NO_JUDGE`: the kit's failure text of a judge call, and the judge names that
  mean no LLM judge.
"""
import hashlib
import os
import os.path as osp
import pickle
import re

import pandas as pd

# The kit's API wrappers answer this when a call fails: no answer, never scored.
FAIL_MSG = 'Failed to obtain answer via API.'
# No LLM judge: none given, or run.py's `exact_matching` for a dataset scored by rules.
NO_JUDGE = (None, '', 'exact_matching')
# The kit's failure values: its API wrappers' fail_msg (and the all-turns-failed form), and
# inference's SKIP_ERR text f'Failed to obtain answer: {type(err)} {err}'.
_KIT_FAILURE = re.compile(r"Failed to obtain answer via API\.(?:: Failed with all possible "
                          r"conversation turns\.)?"
                          r"|Failed to obtain answer: <class '[\w.]+'>(?: .*)?", re.DOTALL)


def is_infer_fail(prediction):
    """Only the kit's exact failure text is an inference failure; an empty reply is an answer."""
    return isinstance(prediction, str) and _KIT_FAILURE.fullmatch(prediction) is not None


def read_text_table(path):
    """Every cell as the text it holds: the kit's `load` would read the answer "1.50" as 1.5."""
    kw = dict(dtype=str, keep_default_na=False)
    if str(path).endswith('.xlsx'):
        return pd.read_excel(path, **kw)
    return pd.read_csv(path, sep='\t' if str(path).endswith('.tsv') else ',', **kw)


def fill(template, **values):
    """Every {name} of the template filled in one pass: a reply holding '{question}' stays text."""
    return re.sub(r'\{(\w+)\}', lambda m: values.get(m.group(1), m.group(0)), template)


def judge_id(name, judge):
    """What decides a judge's reply besides the prompt: its name, endpoint and settings (a
    progress file of another judge is never reused)."""
    fields = [name] + [str(getattr(judge, a, '')) for a in
                       ('api_base', 'system_prompt', 'temperature', 'max_tokens')]
    return hashlib.sha1('|'.join(fields).encode()).hexdigest()[:16]


def load_progress(path, logger):
    """The judge results an earlier run saved (the kit's `dump` of a dict to .pkl). A file cut
    short by a kill (the kit writes it in place) is moved aside with a warning and its items are
    judged again."""
    if not osp.exists(path):
        return {}
    try:
        with open(path, 'rb') as f:
            return pickle.load(f)
    except (EOFError, pickle.UnpicklingError, ValueError) as err:
        os.replace(path, path + '.unreadable')
        logger.warning(f'{path}: unreadable ({type(err).__name__}: the run that wrote it was '
                       f'stopped while saving it), moved to {path}.unreadable; its items are '
                       'judged again (a judge that keeps its verdicts answers them without new '
                       'calls)')
        return {}
