"""RoCOCO-MCQ (after Park et al. 2023, arXiv 2304.10727): caption matching as multiple choice.

Each COCO test image is one question with four captions: its ground truth, the ground truth's
adversarial twin (one word replaced by the RoCOCO attack), and two other images' captions, all
normalised so case and punctuation give nothing away. Accuracy, and how often the twin is
chosen. A reply names its choice by a capital option letter, wherever it states it ("B", "(B) a
dog", "The correct caption is B.", a full-width "Ｂ"), or by quoting exactly one option's text.
Two letters, or a letter and another option's text, is a hedge: counted, never guessed.
Standard library, pandas and exact_io only.
"""
import re
import unicodedata

import pandas as pd

from .exact_io import is_infer_fail

LETTERS = 'ABCDE'
QUESTION = 'Which caption describes this image exactly?'
INSTRUCTION = "Answer with the option's letter from the given choices directly."
ATTACKS = ('same_concept', 'diff_concept', 'rand_voca', 'danger')
_ZERO_WIDTH = dict.fromkeys(map(ord, '\u200b\u200c\u200d\u2060\ufeff'), None)
# A capital letter standing alone ("B", "(B)", "B.", "**B**", "option B"), not inside a word. 'A'
# before a lower-case word is the article ("A man riding ..."), unless that word says it is an
# option ("A is correct", "A or B").
_STANDALONE = re.compile(r"(?<![\w'’])([A-E])(?![\w'’])(\s+([a-z]+))?")
_AFTER_A = {'is', 'or', 'and', 'nor', 'vs', 'versus', 'seems', 'appears', 'matches', 'fits',
            'describes', 'because', 'since', 'as', 'would', 'should', 'could', 'then'}
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def prompt_text(item):
    options = '\n'.join(f'{c}. {item[c]}' for c in LETTERS if isinstance(item.get(c), str)
                        and item[c])
    return f'Question: {item["question"]}\nOptions:\n{options}\n{INSTRUCTION}'


def words(text):
    """Lower-cased words joined by single spaces: how an option's text is found in a reply."""
    return ' '.join(_WORD.findall(text.lower()))


def stated_letters(text, letters):
    """The option letters a text states ('B or C' -> {B, C}); the article 'A' is none."""
    found = set()
    for m in _STANDALONE.finditer(text):
        article = m.group(1) == 'A' and m.group(3) and m.group(3) not in _AFTER_A
        if m.group(1) in letters and not article:
            found.add(m.group(1))
    return found


def parse_choice(reply, options):
    """(letter or None, how): how is 'letter', 'text' (the reply quotes exactly one option),
    'hedge', 'empty' or 'unparsed'; only 'letter' and 'text' name a choice."""
    if not isinstance(reply, str) or not reply.strip():
        return None, 'empty'
    text = unicodedata.normalize('NFKC', reply).translate(_ZERO_WIDTH)
    padded = f' {words(text)} '
    quoted = [c for c, t in options.items() if words(t) and f' {words(t)} ' in padded]
    rest = text
    for c in quoted:  # an option's own words ('A man ...') state no letter
        pattern = r'(?<!\w)' + r'\W+'.join(map(re.escape, words(options[c]).split())) + r'(?!\w)'
        rest = re.sub(pattern, ' ', rest, flags=re.I)
    letters = stated_letters(rest, options)
    if len(letters) > 1 or (letters and quoted and quoted != sorted(letters)):
        return None, 'hedge'
    if letters:
        return letters.pop(), 'letter'
    if len(quoted) == 1:
        return quoted[0], 'text'
    return None, 'hedge' if quoted else 'unparsed'


def score(rows):
    """Percent of answered items: accuracy, twin chosen, and what could not be read."""
    answered = [r for r in rows if r['how'] != 'inference_failed']
    n = len(answered)
    if not n:
        raise ValueError('every prediction is an inference failure: nothing to score')
    hows = pd.Series([r['how'] for r in rows]).value_counts()
    twin = sum(r['choice'] == r['twin'] for r in answered)
    unparsed = sum(r['choice'] is None for r in answered)
    return {'n': n, 'accuracy': 100.0 * sum(r['choice'] == r['answer'] for r in answered) / n,
            'twin_rate': 100.0 * twin / n,
            'twin_rate_of_answered': 100.0 * twin / (n - unparsed) if n > unparsed else None,
            'unparsed': unparsed, 'n_items': len(rows),
            'inference_failed': int(hows.get('inference_failed', 0)),
            'empty': int(hows.get('empty', 0)), 'parsed_by': {k: int(v) for k, v in hows.items()},
            'chance': 100.0 * sum(1.0 / r['n_options'] for r in rows) / len(rows)}


def result_table(dataset, result):
    """What evaluate returns and the kit prints: percent of scored items, and the item counts."""
    row = {'RoCOCO-MCQ': dataset, 'accuracy (%)': result['accuracy'],
           'adversarial twin chosen (%)': result['twin_rate'], 'chance (%)': result['chance'],
           'scored (items)': result['n'], 'unparsed, wrong (items)': result['unparsed'],
           'empty, wrong (items)': result['empty'],
           'inference failed, excluded (items)': result['inference_failed']}
    return pd.DataFrame([row]).round(2)


def evaluation_files(data, eval_file, dataset_name):
    """What evaluate writes, by file suffix: the score file, the accuracy row, the items."""
    letters = [c for c in LETTERS if c in data.columns]
    rows = []
    for row, item in enumerate(data.to_dict('records'), 2):
        options = {c: item[c] for c in letters if item[c]}
        for column in ('answer', 'twin'):
            if item[column] not in options:
                raise ValueError(f'{eval_file}: row {row}, column {column!r}: '
                                 f'{item[column]!r} is not one of the options '
                                 f'{sorted(options)}')
        choice, how = ((None, 'inference_failed') if is_infer_fail(item['prediction'])
                       else parse_choice(item['prediction'], options))
        rows.append({'index': item['index'], 'answer': item['answer'], 'twin': item['twin'],
                     'choice': choice, 'how': how, 'n_options': len(options),
                     'prediction': item['prediction']})
    result = score(rows)
    attack = data['attack'].iloc[0] if 'attack' in data else dataset_name.split('-')[-1]
    counts = {'items': len(rows), 'scored': result['n'], 'empty': result['empty'],
              'inference_failures': result['inference_failed'],
              'unparsed': result['parsed_by'].get('unparsed', 0)
              + result['parsed_by'].get('hedge', 0),
              'hedges': result['parsed_by'].get('hedge', 0)}
    acc = {'attack': attack, 'n': result['n'], 'accuracy': round(result['accuracy'], 2),
           'twin_rate': round(result['twin_rate'], 2), 'chance': round(result['chance'], 2),
           'unparsed': result['unparsed'], 'empty': result['empty'],
           'inference_failed': result['inference_failed']}
    return {'_score.json': {'dataset': dataset_name, 'attack': attack, **result, 'counts': counts,
                            'judge': None,
                            'note': "percent of scored items; empty, hedged and unparsed replies "
                                    "count as wrong, the kit's inference failures are excluded; "
                                    'all are counted'},
            '_acc.csv': pd.DataFrame([acc]), '_items.tsv': pd.DataFrame(rows)}
