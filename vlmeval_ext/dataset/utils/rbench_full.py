"""R-Bench (Li et al. 2024, arXiv 2410.05474): prompts, judge protocol and robustness tables.

Every item is asked on its reference and on its distorted image. Three scores per item, in [0, 1]:
    dis  the ground truth vs the output on the distorted image      absolute = mean(dis)
    ref  the ground truth vs the output on the reference image      relative = mean(com x ref)
    com  the reference output taken as correct vs the distorted output
The official protocol (Q-Future/R-Bench, R-Bench-Script.ipynb at 84d93bb) asks the judge MCQ 5
times and takes the majority; VQA 5 times for 0/1/2 and sums over 10; CAP once per reference
caption and sums over 2n; com 5 times. `plan_score` says which prompts a score needs, `ask` asks
one prompt as often as its scores need, `combine` reduces the verdicts: repeat and reduce.
Efficient mode judges one reference caption per CAP score (taken in a fixed pseudo-random order)
and stops asking a prompt once its score is settled: a 0/1/2 score at its first verdict, an MCQ
majority once it is decided. Both keep the official expected score for any judge, also one that
disagrees with itself. Standard library and pandas only.
"""
import ast
import hashlib
import json
import re
from collections import namedtuple
from urllib.parse import urlsplit

import pandas as pd

from .exact_io import FAIL_MSG, fill, is_infer_fail

TASKS = ('MCQ', 'VQA', 'CAP')
KINDS = ('dis', 'ref', 'com')
STRENGTHS = {1: 'low', 2: 'mid', 3: 'high'}
# The 33 distortions: (name, step from capture to reception, low-level group).
DISTORTIONS = {
    1: ('motion blur', 'Environment', 'Blur'),
    2: ('bright illumination', 'Environment', 'Wild'),
    3: ('dark illumination', 'Environment', 'Wild'),
    4: ('blocking obstacle', 'Environment', 'Wild'),
    5: ('lens blur', 'Camera', 'Blur'),
    6: ('resolution limit', 'Camera', 'Spatial'),
    7: ('lens obstacle', 'Camera', 'Wild'),
    8: ('lens shaking', 'Camera', 'Wild'),
    9: ('white noise', 'Analog', 'Noise'),
    10: ('color noise', 'Analog', 'Noise'),
    11: ('impulse noise', 'Analog', 'Noise'),
    12: ('multiplicative noise', 'Analog', 'Noise'),
    13: ('clock jittering', 'Analog', 'Spatial'),
    14: ('color quantization', 'Source', 'Chrominance'),
    15: ('JPEG2000', 'Source', 'Compression'),
    16: ('JPEG', 'Source', 'Compression'),
    17: ('WEBP', 'Source', 'Compression'),
    18: ('grayscale quantization', 'Source', 'Spatial'),
    19: ('block exchange', 'Channel', 'Spatial'),
    20: ('block repeat', 'Channel', 'Spatial'),
    21: ('block lost', 'Channel', 'Spatial'),
    22: ('block interpolation', 'Channel', 'Spatial'),
    23: ('HSV saturation', 'Receive', 'Chrominance'),
    24: ('LAB saturation', 'Receive', 'Chrominance'),
    25: ('maximum brighten', 'Receive', 'Luminance'),
    26: ('minimum darken', 'Receive', 'Luminance'),
    27: ('mean shift', 'Receive', 'Luminance'),
    28: ('Gaussian filter', 'Enhance', 'Blur'),
    29: ('color diffusion', 'Enhance', 'Chrominance'),
    30: ('color shift', 'Enhance', 'Chrominance'),
    31: ('CNN denoise', 'Enhance', 'Noise'),
    32: ('sharpness change', 'Enhance', 'Chrominance'),
    33: ('contrast change', 'Enhance', 'Chrominance'),
}
STEPS = ('Environment', 'Camera', 'Analog', 'Source', 'Channel', 'Receive', 'Enhance')
GROUPS = ('Blur', 'Luminance', 'Chrominance', 'Spatial', 'Noise', 'Compression', 'Wild')

# The notebook's inference() prompts, verbatim.
MODEL_PROMPTS = {
    'MCQ': "{question}\n{choice}\nAnswer with the option's letter from the given choices "
           'directly.',
    'VQA': '{question}. Please answer no more than 10 words',
    'CAP': 'Please describe this image in general. Directly provide the description, do not '
           "include prefix like 'This image depicts'"}
# The notebook's judge prompts, verbatim as its f-strings send them (12-space indents and trailing
# spaces included). {correct_ans} / {correct}: the ground truth, or the reference output for com.
JUDGE_PROMPTS = {
    'MCQ': (
        'You will now be provided with a question [{question}] and a set of options '
        '[{answers}] with option [{correct_ans}] being the correct answer.\n'
        '            Additionally, there will be an answer [{answer}] provided by a '
        "respondent. Please determine whether the respondent's answer is correct "
        'considering the context of the question.\n'
        '            Even if the word choice is not completely the same, you can '
        'decide based on the given options and see whether the one in the answer is '
        'close enough to the given correct answer\n'
        '            The result is 1 if the answer is correct and else the result is '
        '0. Please only provide the result in the following format: Score:'),
    'VQA': (
        'Given the question [{question}], evaluate whether the response [{answer}] '
        'completely matches the correct answer [{correct_ans}]. \n'
        '            First, check the response and please rate score 0 if the response '
        'is not a valid answer.\n'
        '            Please rate score 2 if the response completely or almost '
        'completely matches the correct answer on completeness, accuracy, and relevance. \n'
        '            Please rate score 1 if the response partly matches the correct '
        'answer on completeness, accuracy, and relevance.\n'
        "            Please rate score 0 if the response doesn't match the correct "
        'answer on completeness, accuracy, and relevance at all.\n'
        '            Please only provide the result in the following format: Score:'),
    'CAP': (
        'Evaluate whether the sentence [{answer}] completely matches the correct '
        'answer [{correct}]. \n'
        '            First, check the response and please rate score 0 if the response '
        'is not a valid answer.\n'
        '            Please rate score 2 if the response completely or almost '
        'completely matches the correct answer on completeness, accuracy, and relevance. \n'
        '            Please rate score 1 if the response partly matches the correct '
        'answer on completeness, accuracy, and relevance.\n'
        "            Please rate score 0 if the response doesn't match the correct "
        'answer on completeness, accuracy, and relevance at all.\n'
        '            Please only provide the result in the following format: Score:')}
DEFAULT_JUDGE = 'chatgpt-0125'  # the paper's judge, GPT-3.5-turbo
REPEATS, REASK = 5, 2
SCALE = {'MCQ': (0, 1), 'VQA': (0, 1, 2), 'CAP': (0, 1, 2)}
# "Score: 2", "**Score:** 1", "score=0", "Score: [2]", "Score：1", "Score: 2.0". Each run of
# separators is taken whole, as a possessive quantifier would (`(?=(X))\1` is the atomic-group form
# every Python 3 has): linear time on a hostile reply, and the same matches.
_STATED = re.compile(r'(?i)\bscore(?=(\s*))\1(?=(\**))\2(?=(\s*))\3(?=([:=\uff1a]?))\4(?=(\s*))\5'
                     r'(?=(\**))\6(?=(\s*))\7(?=(\[?))\8(?=(\s*))\9(?P<value>\d+(?:[./]\d+)?)')
_LONE = re.compile(r'^\W*(\d)\W*$')
_ZERO_WIDTH = dict.fromkeys(map(ord, '\u200b\u200c\u200d\u2060\ufeff'), None)


def model_prompt(task, question='', choice=''):
    if task not in MODEL_PROMPTS:
        raise ValueError(f'R-Bench task {task!r} is not one of {TASKS}')
    return fill(MODEL_PROMPTS[task], question=question, choice=choice)


def parse_verdict(reply, allowed):
    """The verdict the reply states, in `allowed`; None when it states none or two different ones
    (the judge quoting an answer that holds "Score: 2"): such a call is asked again, never 0."""
    text = str(reply).translate(_ZERO_WIDTH)
    stated = [float(s) if '/' not in s else None
              for s in (m.group('value') for m in _STATED.finditer(text))]
    if not stated:
        lone = _LONE.match(text)
        return int(lone.group(1)) if lone and int(lone.group(1)) in allowed else None
    if None in stated or len(set(stated)) != 1 or not stated[0].is_integer():
        return None
    return int(stated[0]) if int(stated[0]) in allowed else None


def parse_captions(text):
    """A CAP answer cell ("['a cat ...', 'a dog ...']") as its list of captions (never eval)."""
    for parser in (ast.literal_eval, json.loads):
        try:
            value = parser(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, (list, tuple)) and value and all(
                isinstance(c, str) and c.strip() for c in value):
            return list(value)
    raise ValueError(f'not a non-empty list of reference captions: {str(text)[:120]!r}')


def caption_pick(captions, seed, key):
    """The one reference caption efficient mode judges for a CAP score: drawn uniformly, per
    score, from the run's caption seed (SHA-256 of the seed and the score's key). Over the draw of
    the seed its expected score is the mean over all captions, i.e. official mode's, whatever the
    judge (a caption fixed once for all runs would keep its own offset from that mean)."""
    digest = hashlib.sha256(f'{int(seed)}|{key}'.encode('utf-8')).digest()
    return captions[int.from_bytes(digest[:8], 'big') % len(captions)]


# --------------------------------------------------------------------------------- protocol
Score = namedtuple('Score', 'key prompts repeats rule scale')


def plan_score(item, kind, mode='official', caption_seed=None):
    """One judged score of one item: the prompts it asks, how often the official protocol asks
    each, and how the verdicts combine. Efficient mode needs the run's `caption_seed` (an int)."""
    task = item['type']
    judged = item['pred_dis'] if kind in ('dis', 'com') else item['pred_ref']
    truth = item['pred_ref'] if kind == 'com' else item['answer']
    template = JUDGE_PROMPTS[task]
    if task == 'MCQ':
        prompts = [fill(template, question=item['question'], answers=item['choice'],
                        correct_ans=truth, answer=judged)]
    elif task == 'VQA':
        prompts = [fill(template, question=item['question'], answer=judged, correct_ans=truth)]
    else:
        refs = [truth] if kind == 'com' else parse_captions(truth)
        if mode == 'efficient' and kind != 'com':
            if caption_seed is None:
                raise ValueError('efficient mode needs the run\'s caption_seed')
            refs = [caption_pick(refs, caption_seed, f"{item['pair_id']}|{kind}")]
        prompts = [fill(template, answer=judged, correct=ref) for ref in refs]
    repeats = 1 if task == 'CAP' and kind != 'com' else REPEATS
    rule = 'majority' if task == 'MCQ' else 'sum_over_2n'
    return Score(f"{item['pair_id']}|{kind}", prompts, repeats, rule, SCALE[task])


def still_needed(score, verdicts, mode):
    """How many more verdicts of one prompt the score needs (0: settled). Efficient mode asks the
    repeats one at a time: a 0/1/2 score stops at the first verdict (its expected value is the
    mean's), an MCQ majority once it is decided (3 equal verdicts: what the 5 would give)."""
    if mode == 'official' or score.repeats == 1:
        return max(0, score.repeats - len(verdicts))
    if score.rule == 'majority':
        decided = max(verdicts.count(v) for v in score.scale) * 2 > score.repeats
        return 0 if decided else 1
    return 0 if verdicts else 1


def combine(score, verdicts, mode):
    """The score from its verdicts, one list per prompt."""
    if score.rule == 'majority':
        flat = [v for vs in verdicts for v in vs]
        return 1.0 if sum(flat) * 2 > len(flat) else 0.0
    if mode == 'efficient' and score.repeats > 1:
        verdicts = [vs[:1] * score.repeats for vs in verdicts]
    flat = [v for vs in verdicts for v in vs]
    return sum(flat) / (2.0 * len(flat))


def ask(judge, prompt, scale, needs):
    """Ask one prompt for each of the scores that send it, in turn: for the k-th score until
    `needs[k](its verdicts)` is 0, so the same prompt text gets the same calls in the same order
    in every run (the n-th call of a text always serves the same score). An unreadable reply is
    asked again (twice). Returns {'verdicts': one list per score, 'calls', 'failed'}: a failed
    call fails the prompt, it is never a 0."""
    out, calls = [], 0
    for need in needs:
        verdicts = []
        while need(verdicts):
            for _ in range(1 + REASK):
                reply, calls = judge.generate(prompt), calls + 1
                if not isinstance(reply, str) or FAIL_MSG in reply or not reply.strip():
                    return dict(verdicts=out, calls=calls, failed='the judge call failed')
                verdict = parse_verdict(reply, scale)
                if verdict is not None:
                    verdicts.append(verdict)
                    break
            else:
                return dict(verdicts=out, calls=calls,
                            failed=f'no verdict in {scale} in {1 + REASK} replies: {reply[:60]!r}')
        out.append(verdicts)
    return dict(verdicts=out, calls=calls, failed=None)


def prompt_demands(scores, mode):
    """{prompt: (scale, needs, users)}: each distinct prompt text once, with the scores that send
    it (users: (score, position of the prompt in it)) and how many verdicts each needs. Every
    score gets verdicts of its own, also when two scores send the very same prompt (ref and com of
    an item the model got right in the same words on both images): shared verdicts would tie the
    two scores together and bias their product (relative robustness)."""
    users = {}
    for score in sorted(scores, key=lambda s: s.key):
        for i, prompt in enumerate(score.prompts):
            users.setdefault(prompt, []).append((score, i))
    return {p: (u[0][0].scale, [lambda v, s=s: still_needed(s, v, mode) for s, _ in u], u)
            for p, u in users.items()}


def judge_requests(items, mode, seed, done, who, path):
    """What judging these items asks: (plans, demands, key, todo). `key[prompt]` names its result
    in the progress file `done` (by judge `who` and mode); `todo` lists the prompts whose result
    there is missing, failed or short of verdicts. A bad reference answer is a ValueError naming
    the row of `path`."""
    plans = []
    for item in items:
        for kind in scorable(item):
            try:
                plans.append(plan_score(item, kind, mode, seed))
            except ValueError as err:
                row = min(item['rows'].values())
                raise ValueError(f"{path}: row {row}, column 'answer': {err}") from None
    demands = prompt_demands(plans, mode)
    key = {p: f'{who}|{mode}|{hashlib.sha256(p.encode()).hexdigest()}' for p in demands}

    def settled(p):
        got = done.get(key[p])
        return got is not None and got['failed'] is None and len(got['verdicts']) == len(
            demands[p][1]) and not any(n(v) for n, v in zip(demands[p][1], got['verdicts']))
    return plans, demands, key, [p for p in demands if not settled(p)]


def calls_of(demands, prompt):
    """The judge calls one prompt takes (official mode; efficient mode asks up to this many)."""
    return sum(score.repeats for score, _ in demands[prompt][2])


def assign(demands, answers):
    """{score key: list of verdicts per prompt}, or the failure text of a failed prompt."""
    out = {}
    for prompt, (_, _, users) in demands.items():
        got = answers[prompt]
        for k, (score, i) in enumerate(users):
            mine = out.setdefault(score.key, [None] * len(score.prompts))
            if isinstance(mine, str):
                continue
            if got['failed']:
                out[score.key] = got['failed']
            else:
                mine[i] = got['verdicts'][k]
    return out


# ---------------------------------------------------------------------------------- tables
def dimensions_of(row, task_field='type'):
    """Every dimension an item counts in: Overall, strength, step, group, task, task-strength."""
    name, step, group = DISTORTIONS[int(row['distortion'])]
    level = STRENGTHS[int(row['strength'])]
    dims = ['Overall', level, step, group]
    if task_field:
        dims += [row[task_field], f'{row[task_field]}-{level}']
    return dims


def dimension_order(tasks=TASKS):
    strengths = list(STRENGTHS.values())
    return ['Overall', *tasks, *strengths, *STEPS, *GROUPS,
            *(f'{t}-{s}' for t in tasks for s in strengths)]


def robustness_table(rows, metrics, tasks=TASKS, task_field='type'):
    """{metric: {dimension: mean}}; an item whose value is None (failed) is left out of a mean,
    a dimension without values is None."""
    out = {}
    for metric, value in metrics.items():
        sums = {}
        for row in rows:
            v = value(row)
            if v is None:
                continue
            for dim in dimensions_of(row, task_field):
                total, n = sums.get(dim, (0.0, 0))
                sums[dim] = (total + v, n + 1)
        order = dimension_order(tasks if task_field else ())
        out[metric] = {d: sums[d][0] / sums[d][1] if d in sums else None for d in order}
    return out


def absolute(row):
    return row['score_dis']


def relative(row):
    com, ref = row['score_com'], row['score_ref']
    return None if com is None or ref is None else com * ref


def rbench_table(rows):
    tasks = [t for t in TASKS if any(r['type'] == t for r in rows)] or TASKS
    return robustness_table(rows, {'absolute': absolute, 'relative': relative}, tasks)


def result_table(table, rows):
    """What evaluate returns and the kit prints: the paper's Table 3 layout on its 0-1 scale, and
    how many items each row's Overall is the mean of (a failed score leaves its item out)."""
    cols = ['Overall'] + [f'{t}-{s}' for t in TASKS for s in STRENGTHS.values()]
    metrics = {'absolute': absolute, 'relative': relative}
    out = [{'R-Bench': m, **{f'{c.replace("-", " ")} (0-1)': table[m].get(c) for c in cols},
            'scored (items)': sum(metrics[m](r) is not None for r in rows)}
           for m in ('absolute', 'relative')]
    out = pd.DataFrame(out).round(4)
    return out.astype(object).where(out.notna(), 'n/a')


NEEDS = {'dis': ('pred_dis',), 'ref': ('pred_ref',), 'com': ('pred_ref', 'pred_dis')}


def _int(value, where, lo, hi):
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = None
    if number is None or not number.is_integer() or not lo <= number <= hi:
        raise ValueError(f'{where}: {value!r} is not an integer in {lo}-{hi}')
    return int(number)


def pair_rows(data, path):
    """One item per pair_id with its two outputs (None where the row is missing or is the kit's
    failure text); errors name the file, row and column."""
    pairs, counts = {}, dict(rows=len(data), inference_failures=0, empty=0, missing_partner=0)
    failed_rows = []
    for row, rec in enumerate(data.to_dict('records'), 2):
        where = f'{path}: row {row}'
        if rec['variant'] not in ('ref', 'dis'):
            raise ValueError(f"{where}, column 'variant': {rec['variant']!r} is not ref or dis")
        if rec['type'] not in TASKS:
            raise ValueError(f"{where}, column 'type': {rec['type']!r} is not one of {TASKS}")
        pair = _int(rec['pair_id'], f"{where}, column 'pair_id'", 0, 10 ** 9)
        fields = dict(type=rec['type'], question=rec['question'], choice=rec['choice'],
                      answer=rec['answer'],
                      distortion=_int(rec['distortion'], f"{where}, column 'distortion'", 1, 33),
                      strength=_int(rec['strength'], f"{where}, column 'strength'", 1, 3))
        item = pairs.setdefault(pair, dict(pair_id=pair, name=rec.get('name', ''), pred_ref=None,
                                           pred_dis=None, rows={}, **fields))
        if rec['variant'] in item['rows']:
            raise ValueError(f"{where}: pair_id {pair} has a second {rec['variant']!r} row "
                             f"(first at row {item['rows'][rec['variant']]})")
        for column, value in fields.items():
            if item[column] != value:
                raise ValueError(f'{where}, column {column!r}: {rec[column]!r} differs from its '
                                 f'partner row of pair_id {pair}')
        item['rows'][rec['variant']] = row
        if is_infer_fail(rec['prediction']):
            counts['inference_failures'] += 1
            failed_rows.append([rec['index'], 'inference failed'])
            continue
        counts['empty'] += not rec['prediction'].strip()
        item[f"pred_{rec['variant']}"] = rec['prediction']
    for pair, item in sorted(pairs.items()):
        if len(item['rows']) < 2:
            counts['missing_partner'] += 1
            lost = 'dis' if 'ref' in item['rows'] else 'ref'
            failed_rows.append([pair, f'pair_id {pair}: no {lost} row'])
    return [pairs[k] for k in sorted(pairs)], counts, failed_rows


def scorable(item):
    return [k for k in KINDS if all(item[a] is not None for a in NEEDS[k])]


def judge_protocol(judge_kwargs, default_judge=DEFAULT_JUDGE):
    """(judge name, protocol arguments of the scoring), popped from `judge_kwargs`: what is left
    is for build_judge."""
    name = judge_kwargs.pop('model', None) or default_judge
    mode = judge_kwargs.pop('judge_mode', 'official')
    if mode not in ('official', 'efficient'):
        raise ValueError(f'judge_mode must be official or efficient, not {mode!r}')
    if name == 'exact_matching':
        raise ValueError('R-Bench needs an LLM judge (pass --judge MODEL)')
    return name, dict(mode=mode, nproc=judge_kwargs.pop('nproc', 4),
                      caption_seed=judge_kwargs.pop('caption_seed', None))


def read_pairs(data, eval_file):
    """(items, row counts, failed rows) of a predictions table; no items is an error."""
    items, counts, failed_rows = pair_rows(data, eval_file)
    if not items:
        raise ValueError(f'{eval_file}: no predictions')
    return items, counts, failed_rows


def scored_rows(items, plans, demands, key, todo, done, judge, name, mode, caption_seed):
    """(per-item rows with score_dis / score_ref / score_com, the judge block), once `done` holds
    the judged result of every prompt (`todo`: those judged by this evaluation)."""
    answers = {p: done[key[p]] for p in demands}
    by_key = {p.key: p for p in plans}
    got = assign(demands, answers)
    rows = []
    for item in items:
        row = {c: item[c] for c in ('pair_id', 'name', 'type', 'distortion', 'strength')}
        for kind in KINDS:
            k = f"{item['pair_id']}|{kind}"
            verdicts = got.get(k)
            if isinstance(verdicts, list):
                score = combine(by_key[k], verdicts, mode)
                text = ';'.join(','.join(map(str, v)) for v in verdicts)
            else:  # a failed judge call (its reason), or an output the kit failed to get
                score, text = None, verdicts or ''
            row[f'score_{kind}'], row[f'verdicts_{kind}'] = score, text
        rows.append(row)
    failed = sorted(k for k, v in got.items() if isinstance(v, str))
    asked = sum(answers[p]['calls'] for p in todo)
    calls = sum(a['calls'] for a in answers.values())
    block = dict(model=name, name=name, mode=mode, label=f'judge {name} ({mode} mode)',
                 endpoint_host=urlsplit(str(getattr(judge, 'api_base', ''))).hostname,
                 calls=calls, calls_made=asked, calls_cached=calls - asked,
                 calls_per_item=round(calls / len(items), 4),
                 call_failures=sum(answers[p]['failed'] is not None for p in todo),
                 failed_keys=failed[:50], failures=dict(judge_failed_scores=len(failed)),
                 items=len(items))
    if mode == 'efficient':
        block['caption_seed'] = caption_seed
    return rows, block


SCORE_COLUMNS = ['pair_id', 'name', 'type', 'distortion', 'strength', 'score_ref', 'score_dis',
                 'score_com', 'verdicts_ref', 'verdicts_dis', 'verdicts_com']


def evaluation_files(counts, failed_rows, rows, judge, mode='official'):
    """What evaluate writes, by file suffix (those of efficient mode as _efficient_*): the
    per-item scores, the robustness table and the score file; and the robustness table
    evaluate returns. Adds the failure counts to the judge block."""
    tag = '_efficient' if mode == 'efficient' else ''
    complete = sum(all(r[f'score_{k}'] is not None for k in KINDS) for r in rows)
    counts = dict(items=len(rows), rows=counts['rows'], scored=complete,
                  empty=counts['empty'], inference_failures=counts['inference_failures'],
                  missing_partner=counts['missing_partner'],
                  judge_failures=judge['failures']['judge_failed_scores'])
    excluded = {f'score_{k}': sum(r[f'score_{k}'] is None for r in rows)
                for k in ('ref', 'dis', 'com')}
    judge['failures'].update(inference_failed_rows=counts['inference_failures'],
                             missing_partner_items=counts['missing_partner'],
                             excluded_scores=excluded, failed_rows=failed_rows)
    table = rbench_table(rows)
    robustness = [{'dimension': d, 'absolute (0-1)': table['absolute'][d],
                   'relative (0-1)': table['relative'][d]} for d in table['absolute']]
    files = {f'{tag}_scores.csv': pd.DataFrame(rows, columns=SCORE_COLUMNS),
             f'{tag}_robustness.csv': pd.DataFrame(robustness),
             f'{tag}_score.json': dict(absolute=table['absolute'], relative=table['relative'],
                                       judge=judge, failed=excluded, items=len(rows),
                                       counts=counts)}
    return files, result_table(table, rows)
