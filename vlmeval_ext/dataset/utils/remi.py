# The prompt appendices (APPENDIX) and the `official` scoring follow the ReMI authors' evaluation
# snippet, linked from the dataset card (https://huggingface.co/datasets/mehrankazemi/ReMI):
# https://colab.research.google.com/drive/1l6rcYm0kTxuZY4NrUzWdsmr2XN0DnSxR
# Copyright 2024 Google LLC. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0); rewritten here, not copied.
"""ReMI (Kazemi et al. 2024, arXiv 2406.09175): prompts, the two scorings, naive baselines, ERP.

official  the ReMI authors' evaluation snippet (the colab linked from the dataset card, "Copyright
          2024 Google LLC"): the text from the first '{' to the last '}', backslashes deleted, the
          exact key "answer", Python float(), its tolerances and per-task rules. It deviates only
          where the snippet would raise (deep nesting, huge integers): such an output is BAD_JSON.
          The headline, comparable with the paper.
lenient   a robust reading of the same answer (any JSON object, key case, JSON escapes, "( a )",
          "3,400", |label|-relative tolerances): a second, named score.
Accuracies are fractions here and percent in `summarise`. Standard library, pandas and Pillow only.
"""
import ast
import json
import math
import re
import statistics
from collections import Counter

import pandas as pd

from .exact_io import is_infer_fail

MODES = {'_labelled': 'labelled', '_composite': 'composite'}


def split_and_mode(dataset):
    """'ReMI_composite' -> ('ReMI', 'composite'): the three modes share one TSV."""
    for suffix, mode in MODES.items():
        if dataset.endswith(suffix):
            return dataset[:-len(suffix)], mode
    return dataset, 'interleaved'


TASKS = ('EmojiAlgebra', 'FuncRead', 'GeomShape', 'GeomCost', 'Collisions', 'Clocks', 'Schedule',
         'Charts', 'CodeEdit', 'Isomorphism', 'Maps', 'RefCoco', 'IQ')
# The snippet's QUESTION_APPENDICES, verbatim (typos included: the model sees the paper's prompt).
COMMON = (' Output only a valid JSON string with two fields: "explanation" and "answer". Do not '
          'output anything else. The explanation field contains your reasoning.')
NUMERIC = ' The answer field contains the numeric value corresponding to your final answer.'
STRING = ' The answer field contains a string corresponding to your final answer.'
APPENDIX = {
    'Collisions': NUMERIC + ' If it is a yes or no question, the answer field must be 0 for no '
                            'and 1 for yes.',
    'Clocks': NUMERIC, 'EmojiAlgebra': NUMERIC, 'GeomShape': NUMERIC, 'GeomCost': NUMERIC,
    'RefCoco': NUMERIC, 'Schedule': STRING, 'Maps': STRING,
    'Charts': ' The answer field contains a string or numerical value corresponding to your final '
              'answer.',
    'CodeEdit': ' The answer field contains the line of code corresponding to your final answer.',
    'FuncRead': ' The answer field contains a string or numeric value corresponding to your final '
                'answer.',
    'IQ': ' The answer field contains the a string corresponding to your final choice.',
    'Isomorphism': ' The answer field must be 1 if the two graphs are isomorphic and 0 otherwise.',
}
TAG = re.compile(r'<image(\d+)>')
# Per-task rules of the snippet: (rule, tolerance); every other task is 'exact' within 1 %.
RULES = {'RefCoco': ('index_list', None), 'GeomShape': ('relative', 0.03),
         'GeomCost': ('relative', 0.03), 'Clocks': ('absolute', 10)}
EXACT_TOLERANCE, FUNCTION_NAMES = 0.01, ('f', 'g', 'h')
# Naive baselines: a constant answer scored by the task's rule, or 1/c for a uniform pick.
BASELINES = {'EmojiAlgebra': ('constant', '0'), 'FuncRead': ('majority', None),
             'GeomShape': ('median', None), 'GeomCost': ('median', None),
             'Collisions': ('uniform', 2), 'Clocks': ('constant', '720'),
             'Schedule': ('majority', None), 'Charts': ('constant', '(0, 0)'),
             'CodeEdit': ('majority', None), 'Isomorphism': ('uniform', 2),
             'Maps': ('majority', None), 'RefCoco': ('constant', '0'), 'IQ': ('uniform', 'labels')}
BAD_JSON = 'BAD_JSON'
NO_JSON, NOT_OBJECT, NO_ANSWER_FIELD, EMPTY_ANSWER = 'no_json', 'not_object', 'no_answer_field', \
    'empty_answer'
TOO_DEEP, INFERENCE_FAILURE = 'too_deep', 'inference_failure'
_ZERO_WIDTH = dict.fromkeys(map(ord, '\u200b\u200c\u200d\u2060\ufeff'), None)


# -------------------------------------------------------------------------------------- prompts
def prompt_text(question, task):
    if task not in APPENDIX:
        raise ValueError(f'unknown ReMI task {task!r}; known: {", ".join(TASKS)}')
    return 'Question: ' + question + COMMON + APPENDIX[task]


def split_at_tags(text, n_images):
    """[('text', str) | ('image', k)] with k 0-based; a tag naming a missing image is an error."""
    parts, pos = [], 0
    for m in TAG.finditer(text):
        k = int(m.group(1))
        if not 1 <= k <= n_images:
            raise ValueError(f'tag {m.group(0)} but the item has {n_images} image(s)')
        parts += [('text', text[pos:m.start()])] if m.start() > pos else []
        parts.append(('image', k - 1))
        pos = m.end()
    return parts + ([('text', text[pos:])] if pos < len(text) else [])


def interleaved_message(question, task, images):
    """The K-th image exactly at <imageK>; images no tag names come last, in order."""
    parts = split_at_tags(prompt_text(question, task), len(images))
    message = [dict(type=kind, value=value if kind == 'text' else images[value])
               for kind, value in parts]
    used = {v for kind, v in parts if kind == 'image'}
    return message + [dict(type='image', value=im) for k, im in enumerate(images) if k not in used]


def labelled_text(question, task, n_images):
    """The prompt with every <imageK> written "Image K" (for the two non-interleaved modes)."""
    parts = split_at_tags(prompt_text(question, task), n_images)
    return ''.join(v if kind == 'text' else f'Image {v + 1}' for kind, v in parts)


def labelled_message(question, task, images):
    message = [dict(type='text', value=labelled_text(question, task, len(images)))]
    for k, image in enumerate(images):
        message += [dict(type='text', value=f'Image {k + 1}:'), dict(type='image', value=image)]
    return message


def make_composite(paths, out_path, columns=3, cell=448, caption=28):
    """Tile the images (each fitted into a cell, aspect kept) with "Image K" captions."""
    from PIL import Image, ImageDraw, ImageFont
    columns = min(columns, len(paths))
    rows = -(-len(paths) // columns)
    canvas = Image.new('RGB', (columns * cell, rows * (cell + caption)), 'white')
    draw = ImageDraw.Draw(canvas)
    try:
        font = ImageFont.load_default(size=max(12, caption - 8))
    except TypeError:  # Pillow < 10.1 has no sized default font
        font = ImageFont.load_default()
    for k, path in enumerate(paths):
        with Image.open(path) as im:
            im = im.convert('RGB')
            im.thumbnail((cell, cell))
            x0, y0 = (k % columns) * cell, (k // columns) * (cell + caption)
            draw.text((x0 + 6, y0 + 4), f'Image {k + 1}', fill='black', font=font)
            canvas.paste(im, (x0 + (cell - im.width) // 2,
                              y0 + caption + (cell - im.height) // 2))
    canvas.save(out_path)


def composite_message(question, task, images, composite_path):
    note = (f' The picture tiles the {len(images)} images, each captioned with its name '
            f'(Image 1 to Image {len(images)}).')
    return [dict(type='image', value=composite_path),
            dict(type='text', value=labelled_text(question, task, len(images)) + note)]


# ----------------------------------------------------------------- official (the authors' snippet)
def official_prediction(output):
    """The snippet's get_pred: the "answer" value lower-cased and cut at '%', or BAD_JSON."""
    start = output.index('{') if '{' in output else 0
    end = output.rindex('}') + 1 if '}' in output else 0
    text = output[start:end].replace('\\"', '').replace('\\', '')
    try:
        value = json.loads(text)
        if not isinstance(value, dict) or 'answer' not in value:
            return BAD_JSON
        return str(value['answer']).lower().split('%')[0].strip()
    except (ValueError, RecursionError):  # JSONDecodeError, huge integers, deep nesting
        return BAD_JSON


def official_label(label):
    """The snippet's prep_label."""
    return label.lower().replace('\\', '').split('%')[0].strip()


def _float(text):
    try:
        return float(text)
    except (ValueError, TypeError):
        return None


def _relaxed(label, pred, eps):
    a, b = _float(label), _float(pred)
    return a is not None and b is not None and (1 - eps) * a <= b <= (1 + eps) * a


def official_match(task, pred, label):
    """The snippet's per-task dispatch on get_pred's and prep_label's texts."""
    rule, tol = RULES.get(task, ('exact', EXACT_TOLERANCE))
    if rule == 'index_list':
        return pred in label.split(',')  # no stripping: "2, 4" holds "2" and " 4"
    if rule == 'relative':
        return _relaxed(label, pred, tol)
    a, b = _float(label), _float(pred)
    if rule == 'absolute':
        return a is not None and b is not None and a - tol <= b <= a + tol
    return (label == pred or (a is not None and b is not None and a == b)
            or any(pred == f'{n}(x)' and label == n for n in FUNCTION_NAMES)
            or f'({pred})' == label or f'({label})' == pred
            or pred.replace(' ', '') == label or label.replace(' ', '') == pred
            or _relaxed(label, pred, tol))


# ---------------------------------------------------------------------------------- lenient
_FENCE = re.compile(r'```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```', re.DOTALL)
_BAD_ESCAPE = re.compile(r'\\(?!["\\/bfnrtu])')
_THOUSANDS = re.compile(r'^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$')
MAX_NESTING, SCAN_EDGE, MAX_FENCES = 100, 32768, 8


def _json_values(text):
    """Every JSON value decodable at a '{' or '[' of the text, left to right."""
    decoder, values = json.JSONDecoder(), []
    for pos, char in enumerate(text):
        if char in '{[':
            try:
                values.append(decoder.raw_decode(text, pos)[0])
            except ValueError:
                continue
    return values


def _loads(text):
    """json.loads, then with lone (LaTeX) backslashes escaped, then a Python dict literal."""
    for attempt in (text, _BAD_ESCAPE.sub(r'\\\\', text)):
        try:
            return json.loads(attempt)
        except ValueError:
            continue
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _windows(text):
    """All of a normal output; the first and last 32 KB of a huge one (bounded work)."""
    return [text] if len(text) <= 2 * SCAN_EDGE else [text[:SCAN_EDGE], text[-SCAN_EDGE:]]


def _answer_key(obj):
    return next((k for k in obj if isinstance(k, str) and k.strip().lower() == 'answer'), None)


def _find_object(text):
    """(value, found any JSON): the dict to read, preferring one with an "answer" key."""
    stripped = text.strip()
    fenced = [m.group(1).strip() for m in _FENCE.finditer(stripped)]
    if len(fenced) > 2 * MAX_FENCES:
        fenced = fenced[:MAX_FENCES] + fenced[-MAX_FENCES:]
    candidates = [c for c in fenced if c] + [stripped]
    values = [v for v in map(_loads, candidates) if v is not None]
    for candidate in candidates:
        for part in _windows(candidate):
            values += _json_values(part) + _json_values(_BAD_ESCAPE.sub(r'\\\\', part))
        start, end = candidate.find('{'), candidate.rfind('}')
        value = _loads(candidate[start:end + 1]) if 0 <= start < end else None
        values += [value] if value is not None else []
    dicts = [v for v in values if isinstance(v, dict)]
    best = next((d for d in dicts if _answer_key(d) is not None), dicts[0] if dicts else None)
    return (best if best is not None else (values[0] if values else None)), bool(values)


def nesting_depth(text):
    depth = deepest = 0
    for m in re.finditer(r'[\[\]{}]', text):
        depth = max(0, depth + (1 if m.group() in '[{' else -1))
        deepest = max(deepest, depth)
    return deepest


def extract_answer(output):
    """(answer text, 'ok') or (None, why the output counts as a wrong answer). Never raises."""
    if nesting_depth(output) > MAX_NESTING:
        return None, TOO_DEEP
    try:
        value, found = _find_object(output)
    except RecursionError:
        return None, TOO_DEEP
    if not found:
        return None, NO_JSON
    if not isinstance(value, dict):
        return None, NOT_OBJECT
    key = _answer_key(value)
    if key is None:
        return None, NO_ANSWER_FIELD
    answer = value[key]
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return None, EMPTY_ANSWER
    if isinstance(answer, str):
        return answer, 'ok'
    return ('true' if answer else 'false') if isinstance(answer, bool) else json.dumps(
        answer, ensure_ascii=False), 'ok'


def normalise(text):
    """Lower case, backslashes and zero-width characters dropped, cut at '%', stripped."""
    return str(text).translate(_ZERO_WIDTH).lower().replace('\\', '').split('%')[0].strip()


def to_number(text):
    s = text.strip()
    s = s.replace(',', '') if _THOUSANDS.match(s) else s
    value = _float(s)
    return value if value is not None and math.isfinite(value) else None


def within(pred, label, relative=None, absolute=None):
    slack = 1e-9 * max(1.0, abs(label))  # 41.2 vs 40 at 3 % is not lost to binary rounding
    bound = absolute if absolute is not None else relative * abs(label)
    return abs(pred - label) <= bound + slack


def _unwrap(s):
    return s[1:-1].strip() if len(s) >= 2 and s[0] == '(' and s[-1] == ')' else s


def exact_match(pred, label, tolerance=EXACT_TOLERANCE):
    p, q = to_number(pred), to_number(label)
    if pred == label or (p is not None and q is not None and (
            p == q or within(p, q, relative=tolerance))):
        return True
    if p is not None and q is not None:
        return False
    return (any({pred, label} == {n, f'{n}(x)'} for n in FUNCTION_NAMES)
            or _unwrap(pred) == label or _unwrap(label) == pred
            or pred.replace(' ', '') == label.replace(' ', ''))


def is_correct(task, answer, label):
    """The lenient rule of the task on an extracted answer and the label."""
    rule, tol = RULES.get(task, ('exact', EXACT_TOLERANCE))
    pred, gold = normalise(answer), normalise(label)
    if rule == 'index_list':
        options = [x.strip() for x in gold.split(',')]
        p = to_number(pred)
        return pred.replace(' ', '') in options or (
            p is not None and any(to_number(o) == p for o in options))
    if rule in ('relative', 'absolute'):
        p, q = to_number(pred), to_number(gold)
        if p is not None and q is not None:
            return within(p, q, **{rule: tol})
    return exact_match(pred, gold)


def score_item(task, prediction, label):
    """Both verdicts on one prediction; None for the kit's failure text (excluded)."""
    if is_infer_fail(prediction):
        return {'kind': 'failed', 'official': None, 'lenient': None, 'official_pred': None,
                'status': INFERENCE_FAILURE, 'parsed': None}
    pred = official_prediction(prediction)
    answer, status = extract_answer(prediction)
    return {'kind': 'answer' if prediction.strip() else 'empty',
            'official': official_match(task, pred, official_label(label)),
            'lenient': answer is not None and is_correct(task, answer, label),
            'official_pred': pred, 'status': status, 'parsed': answer}


# --------------------------------------------------------------------- naive baselines and ERP
def baseline_prediction(task, labels):
    """The constant a naive baseline answers for the task (None for a uniform pick)."""
    kind, value = BASELINES[task]
    if kind == 'constant':
        return value
    if kind == 'majority':
        counts = Counter(normalise(x) for x in labels)
        return sorted(k for k, c in counts.items() if c == max(counts.values()))[0]
    if kind == 'median':
        numbers = [n for n in (to_number(normalise(x)) for x in labels) if n is not None]
        if not numbers:
            raise ValueError(f'{task}: the median baseline needs numeric labels')
        value = statistics.median_low(numbers)
        return str(int(value)) if value.is_integer() else repr(value)
    return None


def baseline_accuracy(task, labels, scoring):
    if not labels:
        return None
    kind, value = BASELINES[task]
    if kind == 'uniform':
        choices = max(2, len({normalise(x) for x in labels})) if value == 'labels' else value
        return 1.0 / choices
    guess = baseline_prediction(task, labels)
    if scoring == 'official':  # the guess as the "answer" of a JSON output, as get_pred reads it
        guess = official_label(guess)
        return _mean(official_match(task, guess, official_label(x)) for x in labels)
    return _mean(is_correct(task, guess, x) for x in labels)


def erp(accuracy, baseline):
    """100 * (Err(B) - Err(M)) / Err(B); None when undefined (the baseline makes no error)."""
    if accuracy is None or baseline is None or baseline >= 1:
        return None
    return 100.0 * ((1 - baseline) - (1 - accuracy)) / (1 - baseline)


# ------------------------------------------------------------------------------------ summary
def _mean(values):
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _pct(x, digits=4):
    return None if x is None else round(100.0 * x, digits)


def _scoring(rows, scoring, tasks):
    acc = {t: _mean(r[scoring] for r in rows if r['task'] == t) for t in tasks}
    base = {t: baseline_accuracy(t, [r['answer'] for r in rows if r['task'] == t], scoring)
            if t in BASELINES else None for t in tasks}
    erps = {t: erp(acc[t], base[t]) for t in tasks}
    overall = _mean(erps.values())
    return {'accuracy': {'Overall': _pct(_mean(acc.values())),
                         'micro': _pct(_mean(r[scoring] for r in rows)),
                         'task': {t: _pct(acc[t]) for t in tasks}},
            'naive_baseline': {'Overall': _pct(_mean(base.values())),
                               'task': {t: _pct(base[t]) for t in tasks}},
            'erp': {'Overall': None if overall is None else round(overall, 4),
                    'task': {t: None if erps[t] is None else round(erps[t], 4) for t in tasks}}}


def summarise(rows, input_mode):
    """The score file from score_item rows (with task and answer): official at the top level,
    lenient under `lenient`, and how many items the two score differently."""
    tasks = [t for t in TASKS if any(r['task'] == t for r in rows)]
    tasks += sorted({r['task'] for r in rows} - set(tasks))
    scored = [r for r in rows if r['kind'] != 'failed']
    official = _scoring(scored, 'official', tasks)
    official['naive_baseline']['prediction'] = {
        t: baseline_prediction(t, [r['answer'] for r in scored if r['task'] == t])
        if any(r['task'] == t for r in scored) else None for t in tasks if t in BASELINES}
    statuses = Counter(r['status'] for r in scored if r['status'] != 'ok')
    return {
        'scoring': 'official', **official, 'lenient': _scoring(scored, 'lenient', tasks),
        'official_vs_lenient': {
            'differ': sum(r['official'] != r['lenient'] for r in scored),
            'lenient_only': sum(r['lenient'] and not r['official'] for r in scored),
            'official_only': sum(r['official'] and not r['lenient'] for r in scored)},
        'input_mode': input_mode, 'unit': 'percent',
        'counts': {'items': len(rows), 'scored': len(scored),
                   'empty': sum(r['kind'] == 'empty' for r in rows),
                   'inference_failures': len(rows) - len(scored),
                   'official_bad_json': sum(r['official_pred'] == BAD_JSON for r in scored),
                   'parse_failures': dict(sorted(statuses.items())),
                   'task': {t: {'items': sum(r['task'] == t for r in rows),
                                'scored': sum(r['task'] == t for r in scored)} for t in tasks}}}


TABLE_HEADER = ['task', 'items scored', 'official accuracy (%)', 'naive baseline (%)', 'ERP (%)',
                'lenient accuracy (%)']


def task_rows(summary):
    """Per task, then Overall: items scored, official accuracy, naive baseline, ERP, lenient."""
    acc, base, erps = summary['accuracy'], summary['naive_baseline'], summary['erp']
    lenient, counts = summary['lenient']['accuracy'], summary['counts']['task']
    rows = [[t, counts[t]['scored'], acc['task'][t], base['task'][t], erps['task'][t],
             lenient['task'][t]] for t in acc['task']]
    return rows + [['Overall', summary['counts']['scored'], acc['Overall'], base['Overall'],
                    erps['Overall'], lenient['Overall']]]


def result_table(summary):
    """What evaluate returns and the kit prints: official (the headline), lenient, naive baseline
    and ERP, by Overall and task, in percent."""
    sources = {'official': summary['accuracy'], 'lenient': summary['lenient']['accuracy'],
               'naive baseline': summary['naive_baseline'], 'ERP': summary['erp']}
    title = f'ReMI ({summary["input_mode"]} input)'
    rows = [{title: name, 'Overall (%)': src['Overall'],
             **{f'{t} (%)': src['task'].get(t) for t in summary['accuracy']['task']}}
            for name, src in sources.items()]
    table = pd.DataFrame(rows).round(1)
    if len(table) >= len(table.columns):  # the kit prints a tall table without its headers
        table = pd.DataFrame([{title: f'{r[title]}: {c}', 'value': r[c]}
                              for r in table.to_dict('records') for c in r if c != title])
    return table.astype(object).where(table.notna(), 'n/a')


def evaluation_files(data, input_mode):
    """What evaluate writes, by file suffix: the score file, the items, the task table."""
    rows = [{'index': r['index'], 'task': r['task'], 'answer': r['answer'],
             **score_item(r['task'], r['prediction'], r['answer'])}
            for r in data.to_dict('records')]
    summary = summarise(rows, input_mode)
    return {'_score.json': summary, '_items.tsv': pd.DataFrame(rows),
            '_tasks.csv': pd.DataFrame(task_rows(summary), columns=TABLE_HEADER)}


def summary_line(summary):
    c = summary['counts']
    return (f"ReMI: items {c['items']}, scored {c['scored']}, empty {c['empty']} (scored "
            f"wrong), inference failures {c['inference_failures']} (excluded), official "
            f"and lenient differ on {summary['official_vs_lenient']['differ']}")
