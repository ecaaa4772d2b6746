"""GRAB prompts and the three scorings (vlmeval_ext/dataset/utils/grab.py), on the real grab.json answers and on
edge cases."""
from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal

import pytest

from vlmeval_ext.dataset.utils import grab as G
from vlmeval_ext.dataset.utils.grab import (NO_ANSWER, Precision, answer_kind, extract_equation, extract_interval,
                                            extract_number, normalized_score, official_correct,
                                            parse_extraction_reply, parse_precision, round_to)


def llm_extracted_correct(extracted, answer):
    """The llm_extracted rule of GRAB's README: the judge's extraction equals the answer text exactly."""
    return extracted is not None and extracted == answer


@pytest.fixture(scope='module')
def grab_items(fixtures_dir):
    with open(fixtures_dir / 'grab' / 'grab.json', encoding='utf-8') as f:
        return list(json.load(f).values())


def _first(items, predicate):
    return next(item for item in items if predicate(item))


# ------------------------------------------------------------------------------------------------ prompts

def test_question_prompt_is_the_official_template():
    text = G.question_prompt('What is the value of the y-intercept of the function? Give your answer as an '
                                  'integer.')
    assert text == ('\nWhat is the value of the y-intercept of the function? Give your answer as an integer.\n'
                    ' Only provide the answer, no reasoning steps.\nIf you are unsure, still provide an answer. '
                    'Answer: \n\n')


def test_question_prompt_keeps_braces_and_rejects_empty():
    assert '{m}x + {c}' in G.question_prompt('form y = {m}x + {c}?')
    with pytest.raises(ValueError):
        G.question_prompt('  ')


def test_extraction_prompt_is_the_official_llama_prompt():
    text = G.extraction_prompt('Q?', 'It is about 5.')
    assert 'A generative model has been asked this question: "Q?" about a plot.\n\n' in text
    assert 'The output from the model answering the question is: "It is about 5."\n\n' in text
    assert text.endswith('If no answer is provided, return "None".\n    ')
    assert "Remove any additional terms like 'approximately'." in text
    # A response that contains a placeholder is inserted as is, not re-formatted.
    assert '"see {question}"' in G.extraction_prompt('Q?', 'see {question}')


# ---------------------------------------------------------------------------------- real answers, all forms

def test_answer_forms_and_precisions_of_the_real_set(grab_items):
    kinds = Counter(answer_kind(item['answer']) for item in grab_items)
    assert kinds == {'number': 2110, 'interval': 30, 'equation': 30}
    precisions = Counter(parse_precision(item['question'], item['answer']) for item in grab_items)
    assert precisions == {Precision(decimals=0): 1575, Precision(decimals=1): 565, Precision(nearest=10): 30}


def test_every_real_answer_scores_itself_under_every_scoring(grab_items):
    for item in grab_items:
        answer, question = item['answer'], item['question']
        assert official_correct(answer, answer)
        for response in (answer, f'  {answer}\n', f'The answer is {answer}.', f'Answer: {answer}',
                         answer.replace('-', '\u2212')):
            result = normalized_score(response, answer, question)
            assert result[0], (item['pid'], response, result)
        assert llm_extracted_correct(parse_extraction_reply(f' {answer}\n'), answer)


def test_every_real_answer_rejects_a_wrong_value(grab_items):
    # Shift the first number of each answer by more than its rounding step: normalized must say wrong.
    import re
    for item in grab_items:
        answer = item['answer']
        step = 20 if 'nearest 10' in item['question'] else 2
        wrong = re.sub(r'-?\d+(?:\.\d+)?', lambda m: str(Decimal(m.group(0)) + step), answer, count=1)
        assert not normalized_score(wrong, answer, item['question'])[0], (item['pid'], wrong)


# ----------------------------------------------------------------------------------------------- official

@pytest.mark.parametrize('response, answer, expected', [
    ('-9', '-9', True),
    ('  -9 is the intercept', '-9', True),     # cut to len(answer)
    ('-95', '-9', True),                        # known flaw, kept for comparability
    ('3.0', '3', True),                          # "3." cut to "3"
    ('3', '3.0', False),                         # known flaw: "3" fails for "3.0"
    ('\u22129', '-9', False),                    # unicode minus is not '-'
    ('The answer is -9', '-9', False),
    ('', '-9', False),
    ('[-10, -3]', '[-10, -3]', True),
    ('[-10,-3]', '[-10, -3]', False),
    ('y = -1x - 3', 'y = -1x - 3', True),
    ('y = -x - 3', 'y = -1x - 3', False),
])
def test_official(response, answer, expected):
    assert official_correct(response, answer) is expected


def test_official_rejects_non_strings():
    with pytest.raises(TypeError):
        official_correct(None, '3')
    with pytest.raises(TypeError):
        official_correct('3', 3)


def test_empty_and_word_responses_are_answers_scored_wrong():
    # An empty answer is an answer (the README rule: ''[:n] != answer); 'nan' / 'None' are words, not missing.
    for response in ('', '   ', 'nan', 'None'):
        assert G.score_response(response, '3', 'Give your answer as an integer.')['official'] == 0
    with pytest.raises(TypeError):
        G.score_response(None, '3', 'Give your answer as an integer.')


# --------------------------------------------------------------------------------------------- normalized

INTEGER_Q = 'What is the value of the y-intercept of the function? Give your answer as an integer.'
DECIMAL_Q = "What is the Pearson's correlation coefficient of the data? Give your answer to 1 decimal place."
NEAREST_Q = 'What is the net area bounded by the function and x-axis? Give your answer to the nearest 10.'
INTERVAL_Q = ('What are the x-values of the two stationary points of the function? Write your answer in the form '
              '[x_coordinate1, x_coordinate2], where x_coordinate1 < x_coordinate2. Give your answer as an integer.')
EQUATION_Q = ('What is the equation of the function? Write your answer in the form y = <m>x + <c>. Each variable '
              'is as an integer.')


@pytest.mark.parametrize('response, answer, question, expected', [
    ('-9', '-9', INTEGER_Q, True),
    ('-95', '-9', INTEGER_Q, False),                       # the official flaw is fixed here
    ('3.0', '3', INTEGER_Q, True),
    ('3', '3.0', DECIMAL_Q, True),
    ('2.96', '3.0', DECIMAL_Q, True),                      # rounded to the asked precision
    ('2.94', '3.0', DECIMAL_Q, False),
    ('-0.25', '-0.3', DECIMAL_Q, True),                    # half away from zero
    ('-0.04', '0.0', DECIMAL_Q, True),                     # -0.0 equals 0.0
    ('2.5', '3', INTEGER_Q, True),
    ('2.49', '3', INTEGER_Q, False),
    ('\u22127', '-7', INTEGER_Q, True),                    # unicode minus
    ('\u20137', '-7', INTEGER_Q, True),                    # en dash used as a sign
    ('negative 7', '-7', INTEGER_Q, True),
    ('The y-intercept is approximately -7.', '-7', INTEGER_Q, True),
    ('Looking at x = 0, the curve crosses at 4, so the answer is 5.', '5', INTEGER_Q, True),
    ('Answer: 12\nThis is because 3 squares...', '12', INTEGER_Q, True),
    ('**Answer:** $-4$', '-4', INTEGER_Q, True),
    ('\\boxed{1,250}', '1250', INTEGER_Q, True),            # thousands separator
    ('1/2', '0.5', DECIMAL_Q, True),                       # fraction
    ('five', '5', INTEGER_Q, True),
    ('123', '120', NEAREST_Q, True),                       # to the nearest 10
    ('-125', '-130', NEAREST_Q, True),
    ('114', '120', NEAREST_Q, False),
    ('x1 = -10 and x2 = -3', '[-10, -3]', INTERVAL_Q, True),
    ('[-10, -3]', '[-10, -3]', INTERVAL_Q, True),
    ('(\u221210,\u22123)', '[-10, -3]', INTERVAL_Q, True),
    ('[-3, -10]', '[-10, -3]', INTERVAL_Q, True),          # order is form, not content
    ('[-10.4, -2.6]', '[-10, -3]', INTERVAL_Q, True),
    ('[-10, -4]', '[-10, -3]', INTERVAL_Q, False),
    ('The stationary points are at -10, -5 and -3', '[-10, -3]', INTERVAL_Q, False),  # three numbers: no pair
    ('y = -x - 3', 'y = -1x - 3', EQUATION_Q, True),       # implicit coefficient
    ('y = \u22121x \u2212 3', 'y = -1x - 3', EQUATION_Q, True),
    ('The equation is y=-1x-3.', 'y = -1x - 3', EQUATION_Q, True),
    ('y = -1x + 3', 'y = -1x - 3', EQUATION_Q, False),
    ('y = -2x^2 + 5x + 2', 'y = 0x^3 - 2x^2 + 5x + 2', EQUATION_Q, True),  # zero term omitted
    ('y = -2x² + 5x + 2', 'y = 0x^3 - 2x^2 + 5x + 2', EQUATION_Q, True),   # superscript powers
    ('y = 5x + 2 - 2x^2', 'y = 0x^3 - 2x^2 + 5x + 2', EQUATION_Q, True),   # term order free
    ('y = 2 sin(-9x + 7) + 6', 'y = 2sin(-9x + 7) + 6', EQUATION_Q, True),
    ('y = 2sin(9x + 7) + 6', 'y = 2sin(-9x + 7) + 6', EQUATION_Q, False),
    ('y = sin(-9x + 7) + 6', 'y = 1sin(-9x + 7) + 6', EQUATION_Q, True),
])
def test_normalized(response, answer, question, expected):
    assert normalized_score(response, answer, question)[0] is expected


@pytest.mark.parametrize('response, answer, question', [
    ('', '-9', INTEGER_Q),
    ('I cannot determine this from the image.', '-9', INTEGER_Q),
    ('', '[-10, -3]', INTERVAL_Q),
    ('The slope is negative.', 'y = -1x - 3', EQUATION_Q),
])
def test_normalized_unparsed_is_wrong_and_marked(response, answer, question):
    correct, parsed = normalized_score(response, answer, question)
    assert correct is False and parsed is None


def test_normalized_very_long_response_is_fast_and_bounded():
    long_text = 'The plot shows many things. ' * 20000 + 'Answer: 7'
    assert normalized_score(long_text, '7', INTEGER_Q)[0]
    assert extract_number('9' * 5000) is None                     # absurd number: no value, no crash
    assert not normalized_score('9' * 5000, '9', INTEGER_Q)[0]


def test_normalized_rejects_none_response():
    with pytest.raises(TypeError):
        normalized_score(None, '3', INTEGER_Q)


def test_extractors_return_values():
    assert extract_number('about \u22123.50 units') == Decimal('-3.50')
    assert extract_interval('[-10, -3]') == (Decimal(-10), Decimal(-3))
    assert extract_equation('y = 2x^4 - 1x^3 - 2x^2 + 6x + 3') == (
        'poly', {4: Decimal(2), 3: Decimal(-1), 2: Decimal(-2), 1: Decimal(6), 0: Decimal(3)})
    assert extract_equation('y = 9sin(-5x - 7) - 2') == ('sin', (Decimal(9), Decimal(-5), Decimal(-7), Decimal(-2)))
    assert extract_equation('no equation here') is None


def test_precision_rounding():
    assert round_to(Decimal('0.05'), Precision(decimals=1)) == Decimal('0.1')
    assert round_to(Decimal('-2.5'), Precision(decimals=0)) == Decimal(-3)
    assert round_to(Decimal('245'), Precision(nearest=10)) == Decimal(250)
    assert parse_precision('Give your answer to 2 decimal places.') == Precision(decimals=2)
    assert parse_precision('No instruction', '1.25') == Precision(decimals=2)


# ------------------------------------------------------------------------------------------ llm_extracted

@pytest.mark.parametrize('reply, answer, expected', [
    ('-9', '-9', True),
    ('  "-9"\n', '-9', True),
    ('`3.0`', '3.0', True),
    ('3', '3.0', False),                # exact: the judge keeps the model's precision
    ('-9.', '-9', False),
    ('[-10, -3]', '[-10, -3]', True),
])
def test_llm_extracted(reply, answer, expected):
    assert llm_extracted_correct(parse_extraction_reply(reply), answer) is expected


@pytest.mark.parametrize('reply', ['None', ' none ', '"None"', ''])
def test_llm_no_answer(reply):
    extracted = parse_extraction_reply(reply)
    assert extracted == NO_ANSWER
    assert llm_extracted_correct(extracted, 'None') is False


def test_llm_reply_must_be_text():
    with pytest.raises(TypeError):
        parse_extraction_reply(None)


# ------------------------------------------------------------------- llm_extracted: one extraction call

class ScriptedJudge:
    """Stands in for a kit judge (only `generate(prompt)` is used): replies by the response the prompt carries."""

    def __init__(self, replies):
        self.replies, self.prompts = replies, []

    def generate(self, prompt_text):
        self.prompts.append(prompt_text)
        return next(reply for response, reply in self.replies.items() if f'"{response}"' in prompt_text)


def test_extract_answer_reads_the_reply_and_fails_on_an_empty_one():
    from vlmeval_ext.dataset.grab import extract_answer
    judge = ScriptedJudge({'It is roughly five.': '5', 'No idea.': 'None', 'About 3.04': '3.04', 'BROKEN': '',
                           'Dunno': 'I cannot help with that'})
    assert extract_answer(judge, INTEGER_Q, 'It is roughly five.')['extracted'] == '5'
    assert extract_answer(judge, INTEGER_Q, 'No idea.')['extracted'] == NO_ANSWER
    assert not llm_extracted_correct(extract_answer(judge, DECIMAL_Q, 'About 3.04')['extracted'], '3.0')
    assert extract_answer(judge, INTEGER_Q, 'BROKEN')['extracted'] is None     # a failure, never a 0
    before = len(judge.prompts)
    assert extract_answer(judge, INTEGER_Q, 'Dunno')['extracted'] is None      # no answer at all: asked 3 times
    assert len(judge.prompts) - before == 3


def test_efficient_shortcut_only_for_exact_responses():
    assert G.settled_without_judge(' -9\n', '-9') == 1
    assert G.settled_without_judge('-9 units', '-9') is None
