"""GRAB scoring (pure): `official` exact match, `normalized` value match, `llm_extracted` exact match.

Answers are strings from grab.json: integers ("-9"), one-decimal numbers ("-1.0"), intervals ("[-10, -3]")
and equations ("y = 0x^3 - 2x^2 + 5x + 2", "y = 2sin(-9x + 7) + 6").
Responses are scored as the text the model wrote (an empty response is an answer, wrong by every rule); whether
a prediction cell is an answer at all is decided by vlmeval_ext.core.predictions, once, by the caller.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Optional

from vlmeval_ext.core.judge import Step
from vlmeval_ext.core.spec import load_spec
from vlmeval_ext.grab.prompt import extraction_prompt

# ----------------------------------------------------------------------------------------------- official


def official_correct(response: str, answer: str) -> bool:
    """GRAB README: response.lstrip()[:len(answer)] == answer. Flaws kept on purpose ("-95" counts for "-9")."""
    _require_str(response, 'response')
    _require_str(answer, 'answer')
    return response.lstrip()[:len(answer)] == answer


def _require_str(value, name: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f'GRAB {name} must be a string, got {type(value).__name__}: {value!r}')


# -------------------------------------------------------------------------------------------- precision


@dataclass(frozen=True)
class Precision:
    """How an answer is rounded: to `decimals` places, or to the nearest multiple of `nearest`."""
    decimals: Optional[int] = None
    nearest: Optional[int] = None

    def round(self, value: Decimal) -> Decimal:
        if self.nearest is not None:
            step = Decimal(self.nearest)
            return (value / step).quantize(Decimal(1), rounding=ROUND_HALF_UP) * step
        if self.decimals is not None:
            return value.quantize(Decimal(1).scaleb(-self.decimals), rounding=ROUND_HALF_UP)
        return value


def parse_precision(question: str, answer: str = '') -> Precision:
    """The precision the question asks for (spec `precision_instructions`, first match wins).

    A question with no instruction (none in GRAB) falls back to the answer's own number of decimals.
    """
    _require_str(question, 'question')
    for rule in load_spec('grab')['precision_instructions']:
        match = re.search(rule['pattern'], question, flags=re.IGNORECASE)
        if not match:
            continue
        if 'nearest' in rule:
            return Precision(nearest=int(match.group(1)) if rule['nearest'] == 'from_match' else rule['nearest'])
        return Precision(decimals=int(match.group(1)) if rule['decimals'] == 'from_match' else rule['decimals'])
    decimals = [len(m) for m in re.findall(r'\.(\d+)', answer)]
    return Precision(decimals=max(decimals) if decimals else 0)


# ------------------------------------------------------------------------------------------ normalizing

# Minus-like characters models emit: U+2212 minus, U+2010/2011 hyphens, U+FE63 small, U+FF0D fullwidth.
_MINUS_CHARS = dict.fromkeys(map(ord, '\u2212\u2010\u2011\ufe63\uff0d'), '-')
_SUPERSCRIPTS = {'\u00b2': '^2', '\u00b3': '^3', '\u2074': '^4', '\u2075': '^5', '\u00b9': '^1'}
_WORD_NUMBERS = {w: i for i, w in enumerate(
    'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen '
    'seventeen eighteen nineteen twenty'.split())}
# A number: optional sign, digits with optional decimals (or .5), optional "/denominator" for fractions.
# The look-behind keeps "x3", "1.2.3" and word-internal digits from being read as numbers.
_NUMBER = r'(?<![\w.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:\s*/\s*\d+(?:\.\d+)?)?'
_NUMBER_RE = re.compile(_NUMBER)
_MARKER_RE = re.compile(r'\b(?:final\s+answer|answer)\b\s*(?:is|:|=)?\s*:?', re.IGNORECASE)
_MAX_DIGITS = 40  # longer numbers cannot equal any GRAB answer; keeps Decimal arithmetic bounded


def normalize_text(text: str) -> str:
    """Unicode minus -> '-', en dash used as a sign -> '-', "negative 3" -> "-3", LaTeX/markdown noise removed."""
    text = text.translate(_MINUS_CHARS)
    # An en/em dash directly before a digit, at the start or after space/bracket/=/comma/colon, is a sign.
    text = re.sub(r'(^|[\s(\[=,:])[\u2013\u2014](?=\d)', r'\1-', text)
    text = re.sub(r'\b(?:negative|minus)\s+(?=\d)', '-', text, flags=re.IGNORECASE)
    for sup, plain in _SUPERSCRIPTS.items():
        text = text.replace(sup, plain)
    text = text.replace('\\left', '').replace('\\right', '').replace('\\(', ' ').replace('\\)', ' ')
    text = text.replace('$', ' ').replace('**', '').replace('`', '')
    return text


def final_answer_region(response: str) -> tuple[str, bool]:
    """(text holding the final answer, whether an explicit marker located it).

    Preference: the last \\boxed{...}; else the text after the last "answer is"/"Answer:" marker that still has
    a digit after it; else the whole response.
    """
    boxed = re.findall(r'\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}', response)
    if boxed:
        return boxed[-1], True
    last_digit = _last_digit_at(response)
    # The last marker that ends before the last digit (one pass: a reply of many markers without a digit after
    # them must not be searched again from each marker).
    best = None
    for marker in _MARKER_RE.finditer(response):
        if marker.end() > last_digit:
            break
        best = marker
    if best is not None:
        return response[best.end():], True
    return response, False


def _last_digit_at(text: str) -> int:
    """Index of the last decimal digit in text (-1 without one), as re's \\d sees digits."""
    m = _LAST_DIGIT_RE.search(text)
    return m.start() if m else -1


_LAST_DIGIT_RE = re.compile(r'\d\D*\Z')    # linear: each try runs only to the next digit


def _to_decimal(token: str) -> Optional[Decimal]:
    token = token.replace(' ', '')
    if len(re.sub(r'\D', '', token)) > _MAX_DIGITS:
        return None
    try:
        if '/' in token:
            num, den = token.split('/')
            return Decimal(num) / Decimal(den) if Decimal(den) != 0 else None
        return Decimal(token.rstrip('.'))
    except InvalidOperation:
        return None


def _numbers(text: str) -> list[str]:
    # Thousands separators ("1,234") would split a number in two.
    text = re.sub(r'(?<=\d),(?=\d{3}(?!\d))', '', text)
    return _NUMBER_RE.findall(text)


def extract_number(response: str) -> Optional[Decimal]:
    """The final numeric answer in a response, or None when it holds none."""
    text = normalize_text(response)
    region, marked = final_answer_region(text)
    tokens = _numbers(region)
    if tokens:
        # After a marker the answer comes first; without one, a response that starts with a number is
        # answering (the prompt asks for the answer only), otherwise the conclusion comes last.
        starts_with_number = bool(re.match(r'\s*' + _NUMBER, region))
        token = tokens[0] if marked or starts_with_number else tokens[-1]
        return _to_decimal(token)
    words = re.findall(r'\b(' + '|'.join(_WORD_NUMBERS) + r')\b', region.lower())
    return Decimal(_WORD_NUMBERS[words[-1]]) if words else None


def extract_interval(response: str) -> Optional[tuple[Decimal, Decimal]]:
    """Two numbers of an interval answer: the last "[a, b]"/"(a, b)", else the region's two numbers."""
    text = normalize_text(response)
    pairs = re.findall(r'[\[(]\s*(' + _NUMBER + r')\s*[,;]\s*(' + _NUMBER + r')\s*[\])]', text)
    if pairs:
        tokens = list(pairs[-1])
    else:
        region, marked = final_answer_region(text)
        tokens = _NUMBER_RE.findall(region)
        if not (len(tokens) == 2 or (marked and len(tokens) >= 2)):
            return None
        tokens = tokens[:2]
    values = [_to_decimal(t) for t in tokens]
    return None if None in values else (values[0], values[1])


# Equations: "y = <poly in x>" or "y = A sin(Bx + C) + D". Parsed to comparable coefficient structures.
_EQUATION_START = re.compile(r'(?:\by|f\s*\(\s*x\s*\))\s*=', re.IGNORECASE)
_EQUATION_CHARS = re.compile(r'[0-9x^+\-.()\s*·sinSIN]*')
_SIGNED = r'[+-]?(?:\d+(?:\.\d+)?)?'
_SIN_RE = re.compile(r'(' + _SIGNED + r')sin\((' + _SIGNED + r')x([+-]\d+(?:\.\d+)?)?\)([+-]\d+(?:\.\d+)?)?')
_TERM_RE = re.compile(r'([+-]?)(\d+(?:\.\d+)?)?(x(?:\^(\d+))?)?')


def _coefficient(text: str) -> Decimal:
    """Coefficient written before x or sin: '' -> 1, '-' -> -1, '+' -> 1."""
    if text in ('', '+'):
        return Decimal(1)
    if text == '-':
        return Decimal(-1)
    return Decimal(text)


def parse_equation(text: str):
    """('sin', (A, B, C, D)) or ('poly', {power: coefficient}) for the right-hand side of y = ..., or None."""
    rhs = re.sub(r'[\s*·]', '', text).lower()
    while any(pair in rhs for pair in ('+-', '-+', '--', '++')):
        rhs = rhs.replace('+-', '-').replace('-+', '-').replace('--', '+').replace('++', '+')
    rhs = rhs.rstrip('.')
    if not rhs:
        return None
    sin = _SIN_RE.fullmatch(rhs)
    if sin:
        amp, freq, phase, shift = sin.groups()
        return 'sin', (_coefficient(amp), _coefficient(freq), Decimal(phase or 0), Decimal(shift or 0))
    if 'sin' in rhs:
        return None
    powers: dict[int, Decimal] = {}
    for term in re.findall(r'[+-]?[^+-]+', rhs):
        match = _TERM_RE.fullmatch(term)
        if not match or (match.group(2) is None and match.group(3) is None):
            return None
        sign, number, has_x, power = match.groups()
        coefficient = _coefficient(sign + (number or '')) if has_x else Decimal(sign + number)
        exponent = (int(power) if power else 1) if has_x else 0
        powers[exponent] = powers.get(exponent, Decimal(0)) + coefficient
    return 'poly', powers


MAX_EQUATION_CHARS = 200   # the longest GRAB equation answer is under 40 characters


def extract_equation(response: str):
    """Parsed equation after the last "y =" (or "f(x) =") in the response, or None."""
    text = normalize_text(response).replace('**', '^')
    starts = list(_EQUATION_START.finditer(text))
    if not starts:
        return None
    # Capped: GRAB equations are short, and each trimming step below re-parses the whole text (a reply of
    # 1 MB after "y =" would take hours).
    rhs = _EQUATION_CHARS.match(text, starts[-1].end()).group(0)[:MAX_EQUATION_CHARS]
    # Trailing prose may leave an unmatched fragment ("... + 3. So"): trim from the right until it parses.
    rhs = rhs.strip()
    while rhs:
        parsed = parse_equation(rhs)
        if parsed is not None:
            return parsed
        rhs = rhs[:-1].rstrip()
    return None


def _round_equation(parsed, precision: Precision):
    kind, values = parsed
    if kind == 'sin':
        return kind, tuple(precision.round(v) for v in values)
    rounded = {p: precision.round(c) for p, c in values.items()}
    return kind, {p: c for p, c in rounded.items() if c != 0}


# ----------------------------------------------------------------------------------------------- normalized


def answer_kind(answer: str) -> str:
    """'interval', 'equation' or 'number' (the four answer forms of grab.json, integers and decimals as number)."""
    _require_str(answer, 'answer')
    stripped = answer.strip()
    if stripped.startswith('['):
        return 'interval'
    if stripped.startswith('y'):
        return 'equation'
    return 'number'


@dataclass(frozen=True)
class NormalizedResult:
    correct: bool
    parsed: Optional[str]  # what was read from the response, as text; None = no answer found (unparsed)


def _same(a: Decimal, b: Decimal, precision: Precision) -> bool:
    return precision.round(a) == precision.round(b)


def normalized_score(response: str, answer: str, question: str) -> NormalizedResult:
    """Read the final answer, round it to the question's precision and compare by value."""
    _require_str(response, 'response')
    kind = answer_kind(answer)
    precision = parse_precision(question, answer)
    if kind == 'number':
        truth = _to_decimal(answer.strip())
        if truth is None:
            raise ValueError(f'GRAB answer {answer!r} is not a number')
        value = extract_number(response)
        if value is None:
            return NormalizedResult(False, None)
        return NormalizedResult(_same(value, truth, precision), str(value))
    if kind == 'interval':
        truth = extract_interval(answer)
        if truth is None:
            raise ValueError(f'GRAB interval answer {answer!r} is not "[a, b]"')
        pair = extract_interval(response)
        if pair is None:
            return NormalizedResult(False, None)
        # The form asks for x1 < x2; the content is the pair of x-values, so order is not scored.
        rounded_pred = sorted(precision.round(v) for v in pair)
        rounded_true = sorted(precision.round(v) for v in truth)
        return NormalizedResult(rounded_pred == rounded_true, f'[{pair[0]}, {pair[1]}]')
    truth_eq = extract_equation(answer)
    if truth_eq is None:
        raise ValueError(f'GRAB equation answer {answer!r} does not parse')
    parsed = extract_equation(response)
    if parsed is None:
        return NormalizedResult(False, None)
    same = _round_equation(parsed, precision) == _round_equation(truth_eq, precision)
    return NormalizedResult(same, repr(parsed))


# -------------------------------------------------------------------------------------------- llm_extracted

NO_ANSWER = object()  # the judge said the response holds no answer ("None")


def parse_extraction_reply(reply: str):
    """The judge's extracted answer as text, or NO_ANSWER when it replied "None".

    Only whitespace and one pair of surrounding quotes/backticks are removed: the comparison stays exact.
    """
    _require_str(reply, 'extraction reply')
    text = reply.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in '"\'`':
        text = text[1:-1].strip()
    if text == '' or text.lower() == 'none':
        return NO_ANSWER
    return text


def usable_extraction(extracted) -> bool:
    """A judge reply that can be a verdict: "None", or text holding a digit (every GRAB answer has one).

    Anything else (an error page, a refusal, random symbols) says nothing about the model's answer.
    """
    return extracted is NO_ANSWER or bool(re.search(r'\d', extracted))


def llm_extracted_correct(extracted, answer: str) -> bool:
    """Exact comparison of the extracted answer with the ground truth (NO_ANSWER is wrong)."""
    _require_str(answer, 'answer')
    return extracted is not NO_ANSWER and extracted == answer


class ExtractionTask:
    """One item's `llm_extracted` score as a vlmeval_ext.core.judge JudgeTask: one extraction call, exact compare.

    After the run, `extracted` holds the judge's answer (text, NO_ANSWER, or None when never obtained).
    """
    CALL = 'extract'

    def __init__(self, key: str, question: str, response: str, answer: str):
        _require_str(response, 'response')
        _require_str(answer, 'answer')
        self.key, self.question, self.response, self.answer = key, question, response, answer
        self.extracted = None

    def prompt(self, call_id: str) -> str:
        return extraction_prompt(self.question, self.response)

    MAX_ASKS = 3   # a reply that is not an answer (see usable_extraction) is asked again, then counted failed

    def _call_id(self, attempt: int) -> str:
        return self.CALL if attempt == 0 else f'{self.CALL}#{attempt + 1}'

    def step(self, verdicts: dict):
        for attempt in range(self.MAX_ASKS):
            call_id = self._call_id(attempt)
            if call_id not in verdicts:
                return Step(need=[call_id])
            extracted = parse_extraction_reply(verdicts[call_id])
            if usable_extraction(extracted):
                self.extracted = extracted
                return Step(score=float(llm_extracted_correct(extracted, self.answer)))
        # Garbage (an API error page, random text) is a failed call, never a wrong answer.
        return Step(failed=f'the judge replied {self.MAX_ASKS} times without an answer or "None": '
                           f'{verdicts[self._call_id(self.MAX_ASKS - 1)][:60]!r}')

    def decide_without_judge(self):
        # Efficient mode only: a response that already is exactly the answer needs no extraction.
        return 1.0 if self.response.strip() == self.answer else None


# ------------------------------------------------------------------------------------------------- per item


def answer_text(value, question: str) -> str:
    """The answer cell as the exact string grab.json holds ("3", "3.0", "[-10, -3]"); anything else is an error.

    Predictions files are read as text (vlmeval_ext.core.io.read_table), so the answer is never re-formatted.
    Every numeric GRAB answer is written at the precision its question asks for ("3.0" for "to 1 decimal place"):
    an answer that is not (e.g. "-1" for "-1.0", from a spreadsheet cell stored as a number) is refused, because the
    official rule compares answer strings.
    """
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f'GRAB answer must be non-empty text, got {value!r}')
    if answer_kind(value) == 'number':
        wanted = parse_precision(question, value).decimals or 0
        decimals = len(value.strip().split('.')[1]) if '.' in value else 0
        if decimals != wanted:
            raise ValueError(f'GRAB answer {value!r} has {decimals} decimal(s) but its question asks for {wanted}; '
                             'the answer must be the exact text of grab.json (a cell stored as a number loses it)')
    return value


def score_response(response: str, answer: str, question: str) -> dict:
    """The rule-based scorings of one answer: official, normalized (1/0) and what normalized read.

    `response` is the model's text exactly as written ('' for an empty answer: wrong by both rules). Inference
    failures never reach this function (vlmeval_ext.core.predictions decides them).
    """
    _require_str(response, 'response')
    result = normalized_score(response, answer, question)
    return {'official': int(official_correct(response, answer)), 'normalized': int(result.correct),
            'parsed': result.parsed}


def naive_answer(question: str) -> str:
    """The naive baseline: zero in the form and precision the question asks for ("0", "0.0", "[0, 0]", "y = 0x + 0")."""
    template = re.search(r'in the form (.+?)(?:, where|\. )', question)
    if template and '<' in template.group(1):
        return re.sub(r'<[^>]+>', '0', template.group(1)).rstrip('.')
    if template and template.group(1).startswith('['):
        return '[0, 0]'
    precision = parse_precision(question)
    return f'{Decimal(0):.{precision.decimals}f}' if precision.decimals else '0'
