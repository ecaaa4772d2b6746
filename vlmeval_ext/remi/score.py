"""ReMI scoring (pure, no kit import): two scorings of every output, naive baselines, ERP.

- `official`: the ReMI authors' evaluation code (the snippet in the evaluation colab linked from the dataset card,
  "Copyright 2024 Google LLC": get_pred / strip_json / prep_label / exact_match / relaxed_accuracy /
  accuracy_with_tolerance), re-implemented here with the same behaviour: the text from the first '{' to the last
  '}', every backslash deleted, the exact key "answer", Python's float(), the same tolerance bounds, the same
  per-task dispatch. The headline, compared with the paper. Deviations (only where the snippet would crash) are
  listed in dataset_specs/remi.yaml (`scoring.official.deviations`).
- `lenient`: a robust reading of the same answer (any JSON object in the output, case-insensitive key, JSON
  escapes honoured, `( a )`, thousands separators, |label|-relative tolerances). A second, named score.

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
from vlmeval_ext.core.predictions import EMPTY, FAILED, classify_prediction, prediction_text

# Why an output scored as wrong without reaching the task rule (each is counted in the score file).
NO_JSON, NOT_OBJECT, NO_ANSWER_FIELD, EMPTY_ANSWER = 'no_json', 'not_object', 'no_answer_field', 'empty_answer'
TOO_DEEP = 'too_deep'   # brackets nested deeper than MAX_NESTING: not read (bounded work), wrong
INFERENCE_FAILURE = 'inference_failure'   # the kit's failure text (vlmeval_ext.core.predictions): not scored
SCORINGS = ('official', 'lenient')


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
            except ValueError:          # JSONDecodeError, or an integer beyond Python's digit limit
                continue
            values.append(value)
    return values


def _loads_lenient(text: str):
    """json.loads, then with lone backslashes (LaTeX) escaped, then a Python dict literal (never eval)."""
    for attempt in (text, _BAD_ESCAPE.sub(r'\\\\', text)):
        try:
            return json.loads(attempt)
        except ValueError:              # JSONDecodeError, or an integer beyond Python's digit limit
            continue
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


SCAN_EDGE = 32_768   # a long output is searched for embedded JSON in its first and last 32 KB only
MAX_FENCES = 8       # and in its first and last 8 ```json fences


def _scan_window(text: str) -> list[str]:
    """Where to look for embedded JSON: all of a normal output; head and tail of a huge one (a 1 MB output of
    braces would otherwise cost one failed decode per brace, each counting lines up to it: minutes)."""
    if len(text) <= 2 * SCAN_EDGE:
        return [text]
    return [text[:SCAN_EDGE], text[-SCAN_EDGE:]]


def _find_object(text: str):
    """(value, found_any_json): the dict to read, preferring one with an "answer" key."""
    stripped = text.strip()
    fenced = [m.group(1).strip() for m in _FENCE.finditer(stripped)]
    if len(fenced) > 2 * MAX_FENCES:     # a reply of 1 MB of ``` holds 170,000 fences: read the first and last
        fenced = fenced[:MAX_FENCES] + fenced[-MAX_FENCES:]
    candidates = [c for c in fenced if c] + [stripped]
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


MAX_NESTING = 100   # the lenient reading looks for JSON only in outputs whose brackets nest at most this deep
_BRACKETS = re.compile(r'[\[\]{}]')
_DEPTH_STEP = {'[': 1, '{': 1, ']': -1, '}': -1}


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting in text, strings not told apart (an upper bound of any JSON value's depth);
    one linear pass."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        depth = max(0, depth + _DEPTH_STEP[m.group()])
        deepest = max(deepest, depth)
    return deepest


def extract_answer(output, field: str = 'answer') -> tuple[str | None, str]:
    """(answer text, status). status is 'ok' or why the output counts as a wrong answer. Never raises.

    An output whose brackets nest deeper than MAX_NESTING is not searched (TOO_DEEP): each '[' of 5,000 would
    start a decode thousands of levels deep (minutes, or a RecursionError)."""
    if not isinstance(output, str):
        output = '' if output is None else str(output)
    if nesting_depth(output) > MAX_NESTING:
        return None, TOO_DEEP
    try:
        value, found = _find_object(output)
    except RecursionError:          # belt and braces: the depth check above keeps every decode shallow
        return None, TOO_DEEP
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


# ---------------------------------------------------------------- official (the authors' snippet)

BAD_JSON = 'BAD_JSON'   # what the snippet's get_pred returns for an output it cannot read (never equal to a label)


def official_json_text(output: str) -> str:
    """The snippet's strip_json: from the first '{' to the last '}' (start 0 without '{', empty without '}')."""
    start = output.index('{') if '{' in output else 0
    end = output.rindex('}') + 1 if '}' in output else 0
    return output[start:end]


def official_prediction(output: str) -> str:
    """The snippet's get_pred: the "answer" value as lower-case text cut at the first '%' and stripped, or BAD_JSON.

    Before parsing, the pairs backslash-quote are deleted and then every remaining backslash. Deviations (the
    snippet would stop with an exception): a JSON text that json.loads refuses with RecursionError or with
    ValueError (integers beyond Python's digit limit), and an "answer" nested too deep for str() (RecursionError),
    are BAD_JSON too.
    """
    text = official_json_text(output).replace('\\"', '').replace('\\', '')
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError):
        return BAD_JSON
    if not isinstance(value, dict) or 'answer' not in value:   # text starts with '{': always a dict when it parses
        return BAD_JSON
    try:
        answer = str(value['answer'])
    except RecursionError:
        return BAD_JSON
    return answer.lower().split('%')[0].strip()


def official_label(label: str) -> str:
    """The snippet's prep_label: lower case, backslashes deleted, cut at the first '%', stripped."""
    return label.lower().replace('\\', '').split('%')[0].strip()


def _is_float(text: str) -> bool:
    try:
        float(text)
    except (ValueError, TypeError):
        return False
    return True


def official_relaxed(label: str, pred: str, eps: float) -> bool:
    """(1 - eps) * label <= pred <= (1 + eps) * label, both read by float() (nothing passes for a negative label)."""
    if not _is_float(label) or not _is_float(pred):
        return False
    return (1 - eps) * float(label) <= float(pred) <= (1 + eps) * float(label)


def official_with_tolerance(label: str, pred: str, tolerance: float) -> bool:
    """label - tolerance <= pred <= label + tolerance, both read by float()."""
    if not _is_float(label) or not _is_float(pred):
        return False
    return float(label) - tolerance <= float(pred) <= float(label) + tolerance


def official_exact(label: str, pred: str, eps: float, function_names=('f', 'g', 'h')) -> bool:
    """The snippet's exact_match: equal strings; equal floats; "f(x)" answered for the label "f" (g, h); one side
    is the other in parentheses; one side without its spaces equals the other; relaxed within eps."""
    return (label == pred
            or (_is_float(label) and _is_float(pred) and float(label) == float(pred))
            or any(pred == f'{name}(x)' and label == name for name in function_names)
            or f'({pred})' == label or f'({label})' == pred
            or pred.replace(' ', '') == label or label.replace(' ', '') == pred
            or official_relaxed(label, pred, eps))


def official_match(task: str, pred: str, label: str, spec: dict | None = None) -> bool:
    """The snippet's per-task dispatch on get_pred's text and prep_label's text (tolerances from the spec)."""
    spec = spec or _spec()
    rule = rule_for(task, spec)
    kind = rule['rule']
    if kind == 'index_list':
        return pred in label.split(',')            # no stripping: "2, 4" holds "2" and " 4"
    if kind == 'relative':
        return official_relaxed(label, pred, rule['tolerance'])
    if kind == 'absolute':
        return official_with_tolerance(label, pred, rule['tolerance'])
    if kind == 'exact':
        names = tuple(spec['scoring'].get('function_names', ('f', 'g', 'h')))
        return official_exact(label, pred, rule['numeric_relative_tolerance'], names)
    raise ValueError(f'unknown ReMI scoring rule {kind!r} for task {task!r} in dataset_specs/remi.yaml')


def official_correct(task: str, output: str, label: str, spec: dict | None = None) -> bool:
    """The official verdict on one model output (text as written; '' reads as BAD_JSON, wrong)."""
    return official_match(task, official_prediction(output), official_label(label), spec)


# ---------------------------------------------------------------- one item, both scorings

def score_item(task: str, prediction, label: str, spec: dict | None = None) -> dict:
    """Both verdicts on one prediction cell, decided by vlmeval_ext.core.predictions first.

    Returns {'kind': answer | empty | failed, 'official', 'lenient' (True/False, None for the kit's failure text:
    excluded), 'official_pred' (get_pred's text), 'status' (why lenient read no answer, or 'ok'), 'parsed'}.
    """
    spec = spec or _spec()
    kind = classify_prediction(prediction)
    if kind == FAILED:
        return {'kind': kind, 'official': None, 'lenient': None, 'official_pred': None,
                'status': INFERENCE_FAILURE, 'parsed': None}
    text = prediction_text(prediction)
    official_pred = official_prediction(text)
    official = official_match(task, official_pred, official_label(label), spec)
    answer, status = extract_answer(text, spec['scoring']['answer_field'])
    lenient = False if answer is None else is_correct(task, answer, label, spec)
    return {'kind': kind, 'official': official, 'lenient': lenient, 'official_pred': official_pred,
            'status': status, 'parsed': answer}


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


def baseline_accuracy(task: str, labels: Sequence[str], spec: dict | None = None,
                      scoring: str = 'lenient') -> float | None:
    """Accuracy (fraction) of the task's naive baseline on these labels under `scoring`'s rule; None for no labels."""
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
    if scoring == 'official':   # the guess as the "answer" of a JSON output, read the way get_pred reads it
        return mean(official_match(task, official_label(guess), official_label(label), spec) for label in labels)
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


def _scoring_summary(rows: Sequence[Mapping], scoring: str, task_order: Sequence[str], spec: dict) -> dict:
    """accuracy / naive_baseline / erp of one scoring over the scored rows (percent; ERP in points)."""
    acc = grouped_mean(rows, lambda r: float(r[scoring]), 'task')
    base, erps = {}, {}
    for task in task_order:
        labels = [r['answer'] for r in rows if r['task'] == task]   # the baseline sees the same items
        base[task] = baseline_accuracy(task, labels, spec, scoring) if task in spec['naive_baselines'] else None
        erps[task] = erp(acc.get(task), base[task])
    return {
        'accuracy': {'Overall': _pct(mean(acc.get(t) for t in task_order)),
                     'micro': _pct(mean(float(r[scoring]) for r in rows)),
                     'task': {t: _pct(acc.get(t)) for t in task_order}},
        'naive_baseline': {'Overall': _pct(mean(base.values())), 'task': {t: _pct(base[t]) for t in task_order}},
        'erp': {'Overall': None if mean(erps.values()) is None else round(mean(erps.values()), 4),
                'task': {t: None if erps[t] is None else round(erps[t], 4) for t in task_order}},
    }


def summarise(rows: Iterable[Mapping], input_mode: str, spec: dict | None = None) -> dict:
    """The <stem>_score.json content from score_item rows (plus task and answer = the label).

    The top-level accuracy / naive_baseline / erp are the official scoring (the headline); `lenient` holds the
    same blocks for the lenient scoring, `official_vs_lenient` how many items the two judge differently.
    """
    spec = spec or _spec()
    rows = list(rows)
    task_order = [t for t in spec['tasks'] if any(r['task'] == t for r in rows)]
    task_order += sorted({r['task'] for r in rows} - set(task_order))
    scored = [r for r in rows if r['kind'] != FAILED]
    official = _scoring_summary(scored, 'official', task_order, spec)
    lenient = _scoring_summary(scored, 'lenient', task_order, spec)
    official['naive_baseline']['prediction'] = {
        t: baseline_prediction(t, [r['answer'] for r in scored if r['task'] == t], spec)
        if any(r['task'] == t for r in scored) else None
        for t in task_order if t in spec['naive_baselines']}
    statuses = Counter(r['status'] for r in scored if r['status'] != 'ok')
    task_counts = {t: {'items': sum(r['task'] == t for r in rows), 'scored': sum(r['task'] == t for r in scored)}
                   for t in task_order}
    return {
        'scoring': 'official',
        **official,
        'lenient': lenient,
        'official_vs_lenient': {
            'differ': sum(r['official'] != r['lenient'] for r in scored),
            'lenient_only': sum(r['lenient'] and not r['official'] for r in scored),
            'official_only': sum(r['official'] and not r['lenient'] for r in scored)},
        'input_mode': input_mode,
        'unit': 'percent',
        'counts': {'items': len(rows), 'scored': len(scored), 'empty': sum(r['kind'] == EMPTY for r in rows),
                   'inference_failures': len(rows) - len(scored),
                   'official_bad_json': sum(r['official_pred'] == BAD_JSON for r in scored),
                   'parse_failures': dict(sorted(statuses.items())), 'task': task_counts},
    }
