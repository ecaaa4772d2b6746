"""ReMI scoring (pure, no kit import): JSON answer extraction, per-task rules, naive baselines, ERP.

All parameters come from dataset_specs/remi.yaml (`scoring`, `naive_baselines`). Accuracies are fractions here
and percent in `summarise`.
"""
from __future__ import annotations

import ast
import json
import math
import re
import statistics
from collections import Counter
from typing import Iterable, Mapping, Sequence

from vlmeval_ext.core.aggregate import grouped_mean, mean

# Why an output scored as wrong without reaching the task rule (each is counted in the score file).
NO_JSON, NOT_OBJECT, NO_ANSWER_FIELD, EMPTY_ANSWER = 'no_json', 'not_object', 'no_answer_field', 'empty_answer'
INFERENCE_FAILURE = 'inference_failure'


def _spec() -> dict:
    from vlmeval_ext.core.spec import load_spec
    return load_spec('remi')


# ---------------------------------------------------------------- answer extraction

_FENCE = re.compile(r'```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```', re.DOTALL)
_BAD_ESCAPE = re.compile(r'\\(?!["\\/bfnrtu])')


def _json_values(text: str) -> list:
    """Every JSON value decodable at a '{' or '[' in text, left to right (nested ones included)."""
    decoder = json.JSONDecoder()
    values = []
    for pos, char in enumerate(text):
        if char in '{[':
            try:
                value, _ = decoder.raw_decode(text, pos)
            except json.JSONDecodeError:
                continue
            values.append(value)
    return values


def _loads_lenient(text: str):
    """json.loads, then with lone backslashes (LaTeX) escaped, then a Python dict literal (never eval)."""
    for attempt in (text, _BAD_ESCAPE.sub(r'\\\\', text)):
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            continue
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


SCAN_EDGE = 32_768   # a long output is searched for embedded JSON in its first and last 32 KB only


def _scan_window(text: str) -> list[str]:
    """Where to look for embedded JSON: all of a normal output; head and tail of a huge one (a 1 MB output of
    braces would otherwise cost one failed decode per brace, each counting lines up to it: minutes)."""
    if len(text) <= 2 * SCAN_EDGE:
        return [text]
    return [text[:SCAN_EDGE], text[-SCAN_EDGE:]]


def _find_object(text: str):
    """(value, found_any_json): the dict to read, preferring one with an "answer" key."""
    stripped = text.strip()
    candidates = [m.group(1).strip() for m in _FENCE.finditer(stripped)] + [stripped]
    whole = []
    for candidate in candidates:
        value = _loads_lenient(candidate)
        if value is not None:
            whole.append(value)
    embedded = []
    for candidate in candidates:
        for part in _scan_window(candidate):
            embedded += _json_values(part) + _json_values(_BAD_ESCAPE.sub(r'\\\\', part))
        start, end = candidate.find('{'), candidate.rfind('}')
        if 0 <= start < end:
            value = _loads_lenient(candidate[start:end + 1])
            if value is not None:
                embedded.append(value)
    values = whole + embedded
    dicts = [v for v in values if isinstance(v, dict)]
    for d in dicts:
        if _answer_key(d) is not None:
            return d, True
    if dicts:
        return dicts[0], True
    return (values[0] if values else None), bool(values)


def _answer_key(obj: Mapping, field: str = 'answer'):
    for key in obj:
        if isinstance(key, str) and key.strip().lower() == field:
            return key
    return None


def answer_to_text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return json.dumps(value, ensure_ascii=False)


def extract_answer(output, field: str = 'answer') -> tuple[str | None, str]:
    """(answer text, status). status is 'ok' or why the output counts as a wrong answer. Never raises."""
    if not isinstance(output, str):
        output = '' if output is None else str(output)
    value, found = _find_object(output)
    if not found:
        return None, NO_JSON
    if not isinstance(value, dict):
        return None, NOT_OBJECT
    key = _answer_key(value, field)
    if key is None:
        return None, NO_ANSWER_FIELD
    answer = value[key]
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return None, EMPTY_ANSWER
    return answer_to_text(answer), 'ok'


# ---------------------------------------------------------------- normalisation and rules

_THOUSANDS = re.compile(r'^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$')


def normalise(text) -> str:
    """Lowercase, drop backslashes, cut at the first '%', strip (the official order)."""
    return str(text).lower().replace('\\', '').split('%')[0].strip()


def to_number(text: str) -> float | None:
    s = text.strip()
    if _THOUSANDS.match(s):
        s = s.replace(',', '')
    try:
        value = float(s)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _unwrap(s: str) -> str:
    return s[1:-1].strip() if len(s) >= 2 and s[0] == '(' and s[-1] == ')' else s


def within(pred: float, label: float, relative: float | None = None, absolute: float | None = None) -> bool:
    """|pred - label| within the tolerance; relative tolerances scale with |label| (negative labels work)."""
    diff = abs(pred - label)
    slack = 1e-9 * max(1.0, abs(label))   # so that 41.2 vs 40 at 3 % is not lost to binary rounding
    if absolute is not None:
        return diff <= absolute + slack
    return diff <= relative * abs(label) + slack


def exact_match(pred: str, label: str, numeric_tolerance: float = 0.01, function_names=('f', 'g', 'h')) -> bool:
    if pred == label:
        return True
    p_num, l_num = to_number(pred), to_number(label)
    if p_num is not None and l_num is not None:
        return p_num == l_num or within(p_num, l_num, relative=numeric_tolerance)
    for name in function_names:
        if {pred, label} == {name, f'{name}(x)'}:
            return True
    if _unwrap(pred) == label or _unwrap(label) == pred:
        return True
    return pred.replace(' ', '') == label.replace(' ', '')


def index_list_match(pred: str, label: str) -> bool:
    """RefCoco: the prediction is one of the comma-separated indices of the label."""
    options = [x.strip() for x in label.split(',')]
    if pred.replace(' ', '') in options:
        return True
    p_num = to_number(pred)
    return p_num is not None and any(to_number(o) == p_num for o in options)


def rule_for(task: str, spec: dict) -> dict:
    rules = spec['scoring']['rules']
    return rules.get(task, rules['default'])


def is_correct(task: str, answer: str, label: str, spec: dict | None = None) -> bool:
    """Apply the task's rule to an extracted answer and the label (both normalised here)."""
    spec = spec or _spec()
    rule = rule_for(task, spec)
    default = spec['scoring']['rules']['default']
    names = tuple(spec['scoring'].get('function_names', ('f', 'g', 'h')))
    pred, gold = normalise(answer), normalise(label)
    kind = rule['rule']
    if kind == 'index_list':
        return index_list_match(pred, gold)
    if kind in ('relative', 'absolute'):
        p_num, l_num = to_number(pred), to_number(gold)
        if p_num is not None and l_num is not None:
            return within(p_num, l_num, **{kind: rule['tolerance']})
        return exact_match(pred, gold, default['numeric_relative_tolerance'], names)
    if kind == 'exact':
        return exact_match(pred, gold, rule['numeric_relative_tolerance'], names)
    raise ValueError(f'unknown ReMI scoring rule {kind!r} for task {task!r} in dataset_specs/remi.yaml')


def is_inference_failure(prediction, fail_markers: Sequence[str] = ()) -> bool:
    if prediction is None or (isinstance(prediction, float) and math.isnan(prediction)):
        return True
    text = str(prediction)
    return not text.strip() or any(m and m in text for m in fail_markers)


def score_item(task: str, prediction, label: str, spec: dict | None = None,
               fail_markers: Sequence[str] = ()) -> dict:
    """{'correct': True/False, or None for an inference failure (excluded), 'status', 'parsed'}."""
    spec = spec or _spec()
    if is_inference_failure(prediction, fail_markers):
        return {'correct': None, 'status': INFERENCE_FAILURE, 'parsed': None}
    answer, status = extract_answer(prediction, spec['scoring']['answer_field'])
    if answer is None:
        return {'correct': False, 'status': status, 'parsed': None}
    return {'correct': is_correct(task, answer, label, spec), 'status': 'ok', 'parsed': answer}


# ---------------------------------------------------------------- naive baselines and ERP

def baseline_prediction(task: str, labels: Sequence[str], spec: dict | None = None) -> str | None:
    """The constant a constant-prediction baseline answers for `task` (None for uniform baselines)."""
    spec = spec or _spec()
    entry = spec['naive_baselines'][task]
    kind = entry['kind']
    if kind == 'constant':
        return str(entry['value'])
    if kind == 'majority_label':
        counts = Counter(normalise(x) for x in labels)
        best = max(counts.values())
        return sorted(k for k, c in counts.items() if c == best)[0]   # ties: alphabetical, deterministic
    if kind == 'median_label':
        numbers = [n for n in (to_number(normalise(x)) for x in labels) if n is not None]
        if not numbers:
            raise ValueError(f'{task}: median_label baseline needs numeric labels, none among {len(labels)}')
        value = statistics.median_low(numbers)
        return str(int(value)) if value.is_integer() else repr(value)
    if kind == 'uniform':
        return None
    raise ValueError(f'unknown naive baseline kind {kind!r} for {task} in dataset_specs/remi.yaml')


def baseline_accuracy(task: str, labels: Sequence[str], spec: dict | None = None) -> float | None:
    """Accuracy (fraction) of the task's naive baseline on these labels; None when there are no labels."""
    spec = spec or _spec()
    labels = list(labels)
    if not labels:
        return None
    entry = spec['naive_baselines'][task]
    if entry['kind'] == 'uniform':
        choices = entry['choices']
        if choices == 'distinct_labels':
            choices = max(2, len({normalise(x) for x in labels}))
        return 1.0 / int(choices)
    guess = baseline_prediction(task, labels, spec)
    return mean(is_correct(task, guess, label, spec) for label in labels)


def erp(model_accuracy: float | None, baseline_acc: float | None) -> float | None:
    """Error reduction percentage 100 * (Err(B) - Err(M)) / Err(B); None when undefined (Err(B) = 0)."""
    if model_accuracy is None or baseline_acc is None:
        return None
    err_base, err_model = 1.0 - baseline_acc, 1.0 - model_accuracy
    if err_base <= 0:
        return None
    return 100.0 * (err_base - err_model) / err_base


# ---------------------------------------------------------------- summary

def _pct(x):
    return None if x is None else round(100.0 * x, 4)


def summarise(rows: Iterable[Mapping], input_mode: str, spec: dict | None = None) -> dict:
    """The <stem>_score.json content. rows: dicts with task, answer (label), correct (bool or None), status."""
    spec = spec or _spec()
    rows = list(rows)
    task_order = [t for t in spec['tasks'] if any(r['task'] == t for r in rows)]
    task_order += sorted({r['task'] for r in rows} - set(task_order))
    scored = [r for r in rows if r['correct'] is not None]
    acc = grouped_mean(scored, lambda r: float(r['correct']), 'task')
    base, erps, counts = {}, {}, {}
    for task in task_order:
        labels = [r['answer'] for r in scored if r['task'] == task]   # the baseline sees the same items
        base[task] = baseline_accuracy(task, labels, spec) if task in spec['naive_baselines'] else None
        erps[task] = erp(acc.get(task), base[task])
        counts[task] = {'items': sum(r['task'] == task for r in rows), 'scored': len(labels)}
    statuses = Counter(r['status'] for r in rows if r['status'] not in ('ok', INFERENCE_FAILURE))
    return {
        'accuracy': {'Overall': _pct(mean(acc.get(t) for t in task_order)),
                     'micro': _pct(mean(float(r['correct']) for r in scored)),
                     'task': {t: _pct(acc.get(t)) for t in task_order}},
        'naive_baseline': {'Overall': _pct(mean(base.values())), 'task': {t: _pct(base[t]) for t in task_order},
                           'prediction': {t: baseline_prediction(t, [r['answer'] for r in scored if r['task'] == t],
                                                                 spec) if counts[t]['scored'] else None
                                          for t in task_order if t in spec['naive_baselines']}},
        'erp': {'Overall': None if mean(erps.values()) is None else round(mean(erps.values()), 4),
                'task': {t: None if erps[t] is None else round(erps[t], 4) for t in task_order}},
        'input_mode': input_mode,
        'unit': 'percent',
        'counts': {'items': len(rows), 'scored': len(scored), 'inference_failures': len(rows) - len(scored),
                   'parse_failures': dict(sorted(statuses.items())), 'task': counts},
    }
