"""GRAB (Roberts et al. 2024, arXiv 2408.11817): prompts and the three scorings.

official       the GRAB README rule: response.lstrip()[:len(answer)] == answer (its known
               flaws kept: "-95" counts for "-9", "3" fails for "3.0"); the headline.
normalized     the final answer read from the response, rounded to the precision the question asks
               for and compared by value; intervals and equations by their numbers. A hedge ("-9 or
               4", a list of values, "-9. Actually -3.") is no answer.
llm_extracted  the README's Llama-3.1 extraction prompt, then an exact comparison.

Standard library and pandas only.
"""
import hashlib
import math
import re
from collections import namedtuple
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

import pandas as pd

from .exact_io import fill, is_infer_fail

# The GRAB README prompt (LLaVA-1.5 example), verbatim.
QUESTION_PROMPT = ('\n{question}\n Only provide the answer, no reasoning steps.\n'
                   'If you are unsure, still provide an answer. Answer: \n\n')
# The README's extraction prompt for Llama-3.1-8B-Instruct (greedy, 100 new tokens), verbatim.
EXTRACTION_PROMPT = (
    '    \n    A generative model has been asked this question: "{question}" about a plot.\n\n'
    '    The output from the model answering the question is: "{output}"\n\n'
    '    Extract just the answer from the generative model output. Maintain the same precision '
    'given by the model. \n    Convert any numbers to digits (e.g., "one" to "1"). Remove any '
    "additional terms like 'approximately'.\n    Return only the extracted numeric answer, "
    'without any additional text or explanation. If no answer is provided, return "None".\n    ')

SCORINGS = ('official', 'normalized', 'llm_extracted')
TASKS = ('properties', 'function', 'series', 'transform')
CATEGORIES = ('Measures of Spread', 'Extrema', 'Range', 'Intercepts and Gradients',
              'Trigonometric', 'Stationary Points', 'Area Bounded', 'Correlation', 'Counting',
              'Functions')


def question_prompt(question):
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f'GRAB question must be a non-empty string, got {question!r}')
    return fill(QUESTION_PROMPT, question=question)


def extraction_prompt(question, response):
    return fill(EXTRACTION_PROMPT, question=question, output=response)


# ---------------------------------------------------------------------------------- official
def official_correct(response, answer):
    """GRAB README: response.lstrip()[:len(answer)] == answer."""
    if not isinstance(response, str) or not isinstance(answer, str):
        raise TypeError(f'GRAB response and answer must be strings: {response!r}, {answer!r}')
    return response.lstrip()[:len(answer)] == answer


# ---------------------------------------------------------------------------------- precision
Precision = namedtuple('Precision', 'decimals nearest', defaults=(None, None))
PRECISIONS = ((r'as an integer', 0, None), (r'to (\d+) decimal places?', 'match', None),
              (r'to the nearest (\d+)', None, 'match'),
              (r'Each variable is as an integer', 0, None))


def parse_precision(question, answer=''):
    """The rounding the question asks for; without an instruction, the answer's own decimals."""
    for pattern, decimals, nearest in PRECISIONS:
        m = re.search(pattern, question, flags=re.IGNORECASE)
        if m:
            return Precision(int(m.group(1)) if decimals == 'match' else decimals,
                             int(m.group(1)) if nearest == 'match' else nearest)
    decimals = [len(d) for d in re.findall(r'\.(\d+)', answer)]
    return Precision(decimals=max(decimals) if decimals else 0)


def round_to(value, precision):
    """Half away from zero, to the precision; None for a value that cannot be rounded (1e309)."""
    try:
        if precision.nearest is not None:
            step = Decimal(precision.nearest)
            return (value / step).quantize(Decimal(1), rounding=ROUND_HALF_UP) * step
        if precision.decimals is not None:
            return value.quantize(Decimal(1).scaleb(-precision.decimals), rounding=ROUND_HALF_UP)
        return value
    except InvalidOperation:
        return None


# ------------------------------------------------------------------------------ reading values
_ZERO_WIDTH = dict.fromkeys(map(ord, '\u200b\u200c\u200d\u2060\ufeff'), None)
_MINUS = dict.fromkeys(map(ord, '\u2212\u2010\u2011\ufe63\uff0d'), '-')
_SUPER = str.maketrans('\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079\u207b',
                       '0123456789-')
_WORDS = {w: i for i, w in enumerate(
    'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen '
    'fifteen sixteen seventeen eighteen nineteen twenty'.split())}
# A number: sign, digits (or .5), an exponent, a "/denominator"; not inside a word ("x3", "1.2.3").
_NUMBER = (r'(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?'
           r'(?:\^-?\d+)?')
_NUMBER_RE = re.compile(_NUMBER)
_MARKER_RE = re.compile(r'\b(?:final\s+answer|answer)\b\s*(?:is|:|=)?\s*:?', re.IGNORECASE)
_LIST_RE = re.compile(r'\s*(?:,|;|\bor\b|\band\b)\s*(' + _NUMBER + ')', re.IGNORECASE)
_REVISION_RE = re.compile(r'\b(?:actually|wait|correction|rather|instead|or)\b[^\d\n]{0,24}?('
                          + _NUMBER + ')', re.IGNORECASE)
_MAX_DIGITS = 40  # longer numbers equal no GRAB answer; keeps Decimal arithmetic bounded


def normalize_text(text):
    """Minus signs, superscript powers, sign words, zero-width characters, LaTeX/markdown noise."""
    text = text.translate(_ZERO_WIDTH).translate(_MINUS)
    text = re.sub(r'[\u2070\u00b9\u00b2\u00b3\u2074-\u2079\u207b]+',
                  lambda m: '^' + m.group(0).translate(_SUPER), text)
    text = re.sub(r'(^|[\s(\[=,:])[\u2013\u2014](?=\d)', r'\1-', text)
    text = re.sub(r'\b(?:negative|minus)\s+(?=\d)', '-', text, flags=re.IGNORECASE)
    text = re.sub(r'\b(?:negative|minus)\s+(' + '|'.join(_WORDS) + r')\b',
                  lambda m: str(-_WORDS[m.group(1).lower()]), text, flags=re.IGNORECASE)
    for noise, space in (('\\left', ''), ('\\right', ''), ('\\(', ' '), ('\\)', ' '), ('$', ' '),
                         ('**', ''), ('`', '')):
        text = text.replace(noise, space)
    return text


def final_answer_region(text):
    """(text holding the final answer, whether a marker located it): the last \\boxed{}; else the
    text after the last "answer is"/"Answer:" that has a digit after it; else the whole text."""
    boxed = re.findall(r'\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}', text)
    if boxed:
        return boxed[-1], True
    last = re.search(r'\d\D*\Z', text)
    best = None
    for marker in _MARKER_RE.finditer(text):
        if last is None or marker.end() > last.start():
            break
        best = marker
    return (text[best.end():], True) if best is not None else (text, False)


def to_decimal(token):
    token = token.replace(' ', '')
    if len(re.sub(r'\D', '', token)) > _MAX_DIGITS:
        return None
    try:
        base, _, power = token.partition('^')
        if '/' in base:
            num, den = base.split('/')
            value = Decimal(num) / Decimal(den) if Decimal(den) != 0 else None
        else:
            value = Decimal(base.rstrip('.'))
        if value is not None and power:
            value = value ** int(power) if abs(int(power)) <= 30 else None
        return value if value is None or value.is_finite() else None
    except (InvalidOperation, ValueError, ZeroDivisionError, OverflowError):
        return None


def _without_separators(text):
    return re.sub(r'(?<=\d),(?=\d{3}(?!\d))', '', text)  # "1,250": one number


def _hedged(region, match, value):
    """A different value listed beside the chosen one, or given after a correction word."""
    rivals = [m.group(1) for m in (_LIST_RE.match(region, match.end()),) if m]
    rivals += [m.group(1) for m in _REVISION_RE.finditer(region, match.end())]
    before = re.search('(' + _NUMBER + r')\s*(?:,|;|\bor\b)\s*\Z', region[:match.start()],
                       re.IGNORECASE)
    rivals += [before.group(1)] if before else []
    return any(to_decimal(r) != value for r in rivals)


def extract_number(response):
    """The final numeric answer in a response; None when it holds none or hedges between values."""
    region, marked = final_answer_region(normalize_text(response))
    region = _without_separators(region)
    tokens = list(_NUMBER_RE.finditer(region))
    if tokens:
        # After a marker the answer comes first; a response that starts with a number answers with
        # it (the prompt asks for the answer only); otherwise the conclusion comes last.
        first = marked or re.match(r'\s*' + _NUMBER, region)
        match = tokens[0] if first else tokens[-1]
        value = to_decimal(match.group(0))
        return None if value is None or _hedged(region, match, value) else value
    words = re.findall(r'\b(' + '|'.join(_WORDS) + r')\b', region.lower())
    return Decimal(_WORDS[words[-1]]) if words else None


def extract_interval(response):
    """The two numbers of an interval answer: the last "[a, b]"/"(a, b)", else the region's two."""
    text = normalize_text(response)
    pairs = re.findall(r'[\[(]\s*(' + _NUMBER + r')\s*[,;]\s*(' + _NUMBER + r')\s*[\])]', text)
    if pairs:
        tokens = list(pairs[-1])
    else:
        region, marked = final_answer_region(text)
        tokens = [m.group(0) for m in _NUMBER_RE.finditer(region)]
        if not (len(tokens) == 2 or (marked and len(tokens) >= 2)):
            return None
        tokens = tokens[:2]
    values = [to_decimal(t) for t in tokens]
    return None if None in values else (values[0], values[1])


# Equations: "y = <polynomial in x>" or "y = A sin(Bx + C) + D", read into coefficients.
_EQUATION_START = re.compile(r'(?:\by|f\s*\(\s*x\s*\))\s*=', re.IGNORECASE)
_EQUATION_CHARS = re.compile(r'[0-9x^+\-.()\s*·sinSIN]*')
_SIGNED = r'[+-]?(?:\d+(?:\.\d+)?)?'
_SIN_RE = re.compile(r'(' + _SIGNED + r')sin\((' + _SIGNED + r')x([+-]\d+(?:\.\d+)?)?\)'
                     r'([+-]\d+(?:\.\d+)?)?')
_TERM_RE = re.compile(r'([+-]?)(\d+(?:\.\d+)?)?(x(?:\^(\d+))?)?')


def _coefficient(text):
    return {'': Decimal(1), '+': Decimal(1), '-': Decimal(-1)}.get(text) or Decimal(text)


def parse_equation(text):
    """('sin', (A, B, C, D)) or ('poly', {power: coefficient}) for the right-hand side, or None."""
    rhs = re.sub(r'[\s*·]', '', text).lower()
    while any(pair in rhs for pair in ('+-', '-+', '--', '++')):
        rhs = rhs.replace('+-', '-').replace('-+', '-').replace('--', '+').replace('++', '+')
    rhs = rhs.rstrip('.')
    sin = _SIN_RE.fullmatch(rhs)
    if sin:
        amp, freq, phase, shift = sin.groups()
        return 'sin', (_coefficient(amp), _coefficient(freq), Decimal(phase or 0),
                       Decimal(shift or 0))
    if not rhs or 'sin' in rhs:
        return None
    powers = {}
    for term in re.findall(r'[+-]?[^+-]+', rhs):
        m = _TERM_RE.fullmatch(term)
        if not m or (m.group(2) is None and m.group(3) is None):
            return None
        sign, number, has_x, power = m.groups()
        value = _coefficient(sign + (number or '')) if has_x else Decimal(sign + number)
        exponent = (int(power) if power else 1) if has_x else 0
        powers[exponent] = powers.get(exponent, Decimal(0)) + value
    return 'poly', powers


def extract_equation(response):
    """The equation after the last "y =" (or "f(x) =") in the response, or None."""
    text = normalize_text(response).replace('**', '^')
    starts = list(_EQUATION_START.finditer(text))
    if not starts:
        return None
    # GRAB equations are short: capped, since each trim below parses the rest again.
    rhs = _EQUATION_CHARS.match(text, starts[-1].end()).group(0)[:200].strip()
    while rhs:  # trailing prose ("... + 3. So"): trim from the right until it parses
        parsed = parse_equation(rhs)
        if parsed is not None:
            return parsed
        rhs = rhs[:-1].rstrip()
    return None


def _round_equation(parsed, precision):
    kind, values = parsed
    if kind == 'sin':
        return kind, tuple(round_to(v, precision) for v in values)
    rounded = {p: round_to(c, precision) for p, c in values.items()}
    return kind, {p: c for p, c in rounded.items() if c != 0}


# ---------------------------------------------------------------------------------- normalized
def answer_kind(answer):
    stripped = answer.strip()
    return 'interval' if stripped.startswith('[') else (
        'equation' if stripped.startswith('y') else 'number')


def normalized_score(response, answer, question):
    """(correct, what was read as text or None when no answer was found)."""
    if not isinstance(response, str):
        raise TypeError(f'GRAB response must be a string, got {response!r}')
    kind, precision = answer_kind(answer), parse_precision(question, answer)
    if kind == 'number':
        truth, value = to_decimal(answer.strip()), extract_number(response)
        if value is None:
            return False, None
        ours = round_to(value, precision)
        return ours is not None and ours == round_to(truth, precision), str(value)
    if kind == 'interval':
        truth, pair = extract_interval(answer), extract_interval(response)
        if pair is None:
            return False, None
        ours = [round_to(v, precision) for v in pair]
        same = None not in ours and sorted(ours) == sorted(round_to(v, precision) for v in truth)
        return same, f'[{pair[0]}, {pair[1]}]'
    parsed = extract_equation(response)
    if parsed is None:
        return False, None
    truth = _round_equation(extract_equation(answer), precision)
    same = _round_equation(parsed, precision) == truth
    return same, repr(parsed)


def answer_text(value, question):
    """The answer cell as grab.json holds it: a numeric answer has the decimals its question asks
    for ("3.0"), so a cell a spreadsheet turned into a number ("3") is refused, not scored."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f'GRAB answer must be non-empty text, got {value!r}')
    if answer_kind(value) == 'number':
        wanted = parse_precision(question, value).decimals or 0
        decimals = len(value.strip().split('.')[1]) if '.' in value else 0
        if decimals != wanted:
            raise ValueError(f'answer {value!r} has {decimals} decimal(s) but its question asks '
                             f'for {wanted}: it is not the text of grab.json')
    parse = {'number': lambda v: to_decimal(v.strip()), 'interval': extract_interval,
             'equation': extract_equation}[answer_kind(value)]
    if parse(value) is None:
        raise ValueError(f'answer {value!r} is not a GRAB number, interval or equation')
    return value


def score_response(response, answer, question):
    correct, parsed = normalized_score(response, answer, question)
    return {'official': int(official_correct(response, answer)), 'normalized': int(correct),
            'parsed': parsed}


# ------------------------------------------------------------------------------- llm_extracted
NO_ANSWER = '<None>'  # the judge found no answer in the response


def parse_extraction_reply(reply):
    """The extracted answer ('<None>' when the judge says None), or None for a reply that is no
    answer at all (an error page, a refusal): such a reply is asked again, never scored."""
    if not isinstance(reply, str):
        raise TypeError(f'judge reply must be text, got {reply!r}')
    text = reply.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in '"\'`':
        text = text[1:-1].strip()
    if text == '' or text.lower() == 'none':
        return NO_ANSWER
    return text if re.search(r'\d', text) else None


def settled_without_judge(prediction, answer):
    """Efficient mode: a reply that is exactly the answer needs no extraction (1); else None."""
    return 1 if prediction.strip() == answer else None


def extraction_requests(rows, done, who, mode):
    """({row index: progress key} of the rows llm_extracted asks the judge about, {key: (question,
    prediction)} of those whose extraction the progress file `done` lacks). Inference failures are
    not asked, nor (efficient mode) replies that are exactly the answer."""
    keys, todo = {}, {}
    for row in rows:
        if row['failed'] is not None or (
                mode == 'efficient' and settled_without_judge(row['prediction'], row['answer'])):
            continue
        prompt = extraction_prompt(row['question'], row['prediction'])
        key = f"{who}|{hashlib.sha1(prompt.encode()).hexdigest()}"
        keys[row['index']] = key
        if done.get(key, {}).get('extracted') is None:
            todo[key] = (row['question'], row['prediction'])
    return keys, todo


# ---------------------------------------------------------------------------------- aggregation
def _pct(hits):
    return round(100.0 * sum(hits) / len(hits), 4) if hits else None


def _order(rows, dim):
    if dim == 'complexity':
        return sorted(rows, key=lambda r: int(r['complexity']))
    order = {name: i for i, name in enumerate(TASKS if dim == 'task' else CATEGORIES)}
    return sorted(rows, key=lambda r: order.get(r[dim], len(order)))


def _groups(rows, key):
    groups = {}
    for row in rows:
        groups.setdefault(str(key(row)), []).append(row)
    return groups


def _scored(rows, scoring):
    return [r[scoring] for r in rows if r.get(scoring) is not None and not (
        isinstance(r[scoring], float) and math.isnan(r[scoring]))]


def summarize(rows, scoring):
    """Percent accuracy of one scoring: Overall (item-weighted), by task, category, complexity and
    task x complexity; items not scored (None) are left out and counted."""
    if scoring not in SCORINGS:
        raise ValueError(f'unknown GRAB scoring {scoring!r}: one of {", ".join(SCORINGS)}')
    out = {'Overall': _pct(_scored(rows, scoring))}
    for dim in ('task', 'category', 'complexity'):
        out[dim] = {g: _pct(_scored(m, scoring))
                    for g, m in _groups(_order(rows, dim), lambda r: r[dim]).items()}
    by_task = _groups(sorted(_order(rows, 'task'), key=lambda r: int(r['complexity'])),
                      lambda r: r['task'])
    out['task x complexity'] = {
        t: {c: _pct(_scored(m, scoring))
            for c, m in _groups(tr, lambda r: r['complexity']).items()}
        for t, tr in by_task.items()}
    scored = len(_scored(rows, scoring))
    out['counts'] = {'items': len(rows), 'scored': scored, 'not_scored': len(rows) - scored}
    return out


def acc_table(rows):
    """The kit's _acc layout: a line per scoring x dimension x group with tot, hit and acc (%)."""
    lines = []
    for scoring in [s for s in SCORINGS if rows and s in rows[0]]:
        groups = [('Overall', 'Overall', list(rows))]
        for dim in ('task', 'category', 'complexity'):
            by_dim = _groups(_order(rows, dim), lambda r: r[dim])
            groups += [(dim, g, m) for g, m in by_dim.items()]
        by = _groups(_order(_order(rows, 'complexity'), 'task'),
                     lambda r: f'{r["task"]} / {r["complexity"]}')
        groups += [('task x complexity', g, m) for g, m in by.items()]
        for dim, group, members in groups:
            hits = _scored(members, scoring)
            lines.append({'scoring': scoring, 'dimension': dim, 'group': group,
                          'tot': len(members), 'not_scored': len(members) - len(hits),
                          'hit': int(sum(hits)), 'acc': _pct(hits)})
    return lines


NOT_JUDGED_NOTE = 'llm_extracted: not run (no --judge); official and normalized need no judge'


def item_rows(data, eval_file):
    """One row per prediction: its official and normalized scores, and what the reply is (an
    answer, empty, or the kit's inference failure, which is never scored)."""
    rows = []
    for row, item in enumerate(data.to_dict('records'), 2):
        try:
            answer = answer_text(item['answer'], item['question'])
        except ValueError as err:
            raise ValueError(f"{eval_file}: row {row}, column 'answer': {err}") from None
        failed = is_infer_fail(item['prediction'])
        kind = 'failed' if failed else (
            'empty' if not item['prediction'].strip() else 'answer')
        scores = ({'official': None, 'normalized': None, 'parsed': None} if failed
                  else score_response(item['prediction'], answer, item['question']))
        rows.append({'index': item['index'], 'pid': item.get('pid', item['index']),
                     'task': item['task'], 'category': item['category'],
                     'complexity': int(item['complexity']), 'question': item['question'],
                     'answer': answer, 'prediction': item['prediction'],
                     'prediction_kind': kind, **scores,
                     'failed': "inference failed (the kit's failure text)" if failed
                     else None})
    return rows


def evaluation_files(rows, counts, judge, notes):
    """What evaluate writes, by file suffix: the score file, the accuracy table, the items.
    `counts` and `judge` are llm_extracted's ({} and None when it did not run)."""
    n_failed = sum(r['failed'] is not None for r in rows)
    score_rows = [{k: r[k] for k in ('task', 'category', 'complexity', 'official',
                                     'normalized', 'llm_extracted') if k in r} for r in rows]
    scores = {s: summarize(score_rows, s) for s in ('official', 'normalized')}
    scores['official']['counts']['inference_failures'] = n_failed
    scores['normalized']['counts'].update(inference_failures=n_failed, unparsed=sum(
        r['failed'] is None and r['parsed'] is None for r in rows))
    if counts:
        scores['llm_extracted'] = summarize(score_rows, 'llm_extracted')
        scores['llm_extracted']['counts'].update(counts)
    scores['counts'] = {'items': len(rows), 'scored': len(rows) - n_failed,
                        'empty': sum(r['prediction_kind'] == 'empty' for r in rows),
                        'inference_failures': n_failed,
                        'judge_failures': counts.get('judge_failures', 0)}
    scores.update(judge=judge, notes=notes)
    return {'_score.json': scores, '_acc.csv': pd.DataFrame(acc_table(score_rows)),
            '_items.tsv': pd.DataFrame(rows)}


def summary_line(scores):
    c = scores['counts']
    return (f"GRAB: items {c['items']}, scored {c['scored']}, empty answers {c['empty']} "
            f"(scored wrong), inference failures {c['inference_failures']} (excluded)")


def result_table(scores):
    """What evaluate returns and the kit prints: one row per scoring, accuracy (%) per task and
    Overall, and the items scored."""
    rows = []
    for scoring in [s for s in SCORINGS if isinstance(scores.get(s), dict)]:
        summary = scores[scoring]
        row = {'GRAB scoring': scoring, 'Overall (%)': summary['Overall']}
        row.update({f'{t} (%)': summary['task'].get(t) for t in TASKS})
        row['scored (items)'] = summary['counts']['scored']
        rows.append(row)
    table = pd.DataFrame(rows).round(1)
    return table.fillna('n/a') if len(table) else table
