"""GRAB prompts and the three scorings, on the real grab.json answers and on edge cases (no kit import)."""
from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal

import pytest

from vlmeval_ext.grab import prompt, score
from vlmeval_ext.grab.score import (NO_ANSWER, Precision, answer_kind, extract_equation, extract_interval,
                                    extract_number, llm_extracted_correct, normalized_score, official_correct,
                                    parse_extraction_reply, parse_precision)


@pytest.fixture(scope='module')
def grab_items(fixtures_dir):
    with open(fixtures_dir / 'grab' / 'grab.json', encoding='utf-8') as f:
        return list(json.load(f).values())


def _first(items, predicate):
    return next(item for item in items if predicate(item))


# ------------------------------------------------------------------------------------------------ prompts

def test_question_prompt_is_the_official_template():
    text = prompt.question_prompt('What is the value of the y-intercept of the function? Give your answer as an '
                                  'integer.')
    assert text == ('\nWhat is the value of the y-intercept of the function? Give your answer as an integer.\n'
                    ' Only provide the answer, no reasoning steps.\nIf you are unsure, still provide an answer. '
                    'Answer: \n\n')


def test_question_prompt_keeps_braces_and_rejects_empty():
    assert '{m}x + {c}' in prompt.question_prompt('form y = {m}x + {c}?')
    with pytest.raises(ValueError):
        prompt.question_prompt('  ')


def test_extraction_prompt_is_the_official_llama_prompt():
    text = prompt.extraction_prompt('Q?', 'It is about 5.')
    assert 'A generative model has been asked this question: "Q?" about a plot.\n\n' in text
    assert 'The output from the model answering the question is: "It is about 5."\n\n' in text
    assert text.endswith('If no answer is provided, return "None".\n    ')
    assert "Remove any additional terms like 'approximately'." in text
    # A response that contains a placeholder is inserted as is, not re-formatted.
    assert '"see {question}"' in prompt.extraction_prompt('Q?', 'see {question}')


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
            assert result.correct, (item['pid'], response, result)
        assert llm_extracted_correct(parse_extraction_reply(f' {answer}\n'), answer)


def test_every_real_answer_rejects_a_wrong_value(grab_items):
    # Shift the first number of each answer by more than its rounding step: normalized must say wrong.
    import re
    for item in grab_items:
        answer = item['answer']
        step = 20 if 'nearest 10' in item['question'] else 2
        wrong = re.sub(r'-?\d+(?:\.\d+)?', lambda m: str(Decimal(m.group(0)) + step), answer, count=1)
        assert not normalized_score(wrong, answer, item['question']).correct, (item['pid'], wrong)


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
        assert score.score_response(response, '3', 'Give your answer as an integer.')['official'] == 0
    with pytest.raises(TypeError):
        score.score_response(None, '3', 'Give your answer as an integer.')


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
    assert normalized_score(response, answer, question).correct is expected


@pytest.mark.parametrize('response, answer, question', [
    ('', '-9', INTEGER_Q),
    ('I cannot determine this from the image.', '-9', INTEGER_Q),
    ('', '[-10, -3]', INTERVAL_Q),
    ('The slope is negative.', 'y = -1x - 3', EQUATION_Q),
])
def test_normalized_unparsed_is_wrong_and_marked(response, answer, question):
    result = normalized_score(response, answer, question)
    assert result.correct is False and result.parsed is None


def test_normalized_very_long_response_is_fast_and_bounded():
    long_text = 'The plot shows many things. ' * 20000 + 'Answer: 7'
    assert normalized_score(long_text, '7', INTEGER_Q).correct
    assert extract_number('9' * 5000) is None                     # absurd number: no value, no crash
    assert not normalized_score('9' * 5000, '9', INTEGER_Q).correct


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
    assert Precision(decimals=1).round(Decimal('0.05')) == Decimal('0.1')
    assert Precision(decimals=0).round(Decimal('-2.5')) == Decimal(-3)
    assert Precision(nearest=10).round(Decimal('245')) == Decimal(250)
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
    assert extracted is NO_ANSWER
    assert llm_extracted_correct(extracted, 'None') is False


def test_llm_reply_must_be_text():
    with pytest.raises(TypeError):
        parse_extraction_reply(None)


# ------------------------------------------------------------------------- llm_extracted through the runner

def test_extraction_tasks_through_the_judge_runner(tmp_path):
    from vlmeval_ext.core.judge import VerdictCache, run_tasks
    from vlmeval_ext.grab.score import ExtractionTask

    replies = {'It is roughly five.': '5', 'No idea.': 'None', 'About 3.04': '3.04', 'BROKEN': ''}
    tasks = [ExtractionTask('1', INTEGER_Q, 'It is roughly five.', '5'),
             ExtractionTask('2', INTEGER_Q, 'No idea.', '5'),
             ExtractionTask('3', DECIMAL_Q, 'About 3.04', '3.0'),
             ExtractionTask('4', INTEGER_Q, 'BROKEN', '5')]

    def judge(prompt_text):
        # The prompt carries the response verbatim; answer as the judge would.
        return next(reply for response, reply in replies.items() if f'"{response}"' in prompt_text)

    results, stats = run_tasks(tasks, judge, VerdictCache(str(tmp_path / 'cache.jsonl'), 'fake'), retries=1,
                               backoff=0)
    assert results['1'].score == 1.0 and tasks[0].extracted == '5'
    assert results['2'].score == 0.0 and tasks[1].extracted is NO_ANSWER
    assert results['3'].score == 0.0                    # exact compare: '3.04' != '3.0'
    assert results['4'].score is None and results['4'].failed  # empty judge reply: a failure, not a 0
    assert stats.failed_tasks == 1 and tasks[3].extracted is None


def test_extraction_task_efficient_shortcut_only_for_exact_responses():
    from vlmeval_ext.grab.score import ExtractionTask
    assert ExtractionTask('k', INTEGER_Q, ' -9\n', '-9').decide_without_judge() == 1.0
    assert ExtractionTask('k', INTEGER_Q, '-9 units', '-9').decide_without_judge() is None
