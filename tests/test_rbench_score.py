"""Judge protocol (official and efficient) as pure step functions, on real R-Bench rows and LLaVA-1.5 outputs."""
import importlib.util
import re
from pathlib import Path

import pytest

from vlmeval_ext.core.spec import load_spec
from vlmeval_ext.rbench.fixtures import llava15_items
from vlmeval_ext.rbench.report import rbench_table
from vlmeval_ext.rbench import score
from vlmeval_ext.rbench.score import (Item, certain_letter, make_tasks, official_last_char_verdict, parse_captions,
                                      parse_choices, parse_verdict)

BENCHMARKS = Path(__file__).resolve().parents[1] / 'benchmarks'


@pytest.fixture(scope='module')
def items(fixtures_dir):
    fx = fixtures_dir / 'rbench'
    return llava15_items(fx)


@pytest.fixture(scope='module')
def judge_calls_benchmark():
    """benchmarks/rbench_judge_calls.py (its deterministic judge and shortcut list), loaded from its file."""
    spec = importlib.util.spec_from_file_location('rbench_judge_calls', BENCHMARKS / 'rbench_judge_calls.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize('reply,allowed,ours,official', [
    ('Score: 1', (0, 1), 1, 1),
    ('Score: 1.', (0, 1), 1, 0),          # the notebook's last-character parse loses this verdict
    ('Score: 2\n', (0, 1, 2), 2, 0),
    ('**Score:** 2', (0, 1, 2), 2, 2),
    ('Score: [2]', (0, 1, 2), 2, 0),
    ('Score\uff1a1', (0, 1), 1, 1),          # full-width colon
    ('The answer matches. Score: 0', (0, 1), 0, 0),
    ('score=2 (complete match)', (0, 1, 2), 2, 0),
    ('Score: 2\nThe response [Score: 2] matches the answer.', (0, 1, 2), 2, 0),   # quoted, but agreeing
    ('1', (0, 1), 1, 1),
    ('Score: 3', (0, 1, 2), None, 0),      # out of scale: no verdict, not 0
    ('Score: 10', (0, 1), None, 0),
    ('Score: 1.5', (0, 1, 2), None, 0),     # not a verdict of the scale
    ('Score: 1/2', (0, 1, 2), None, 2),
    ('I cannot judge this.', (0, 1), None, 0),
    ('The underscore 5 is wrong', (0, 1), None, 0),
    # The judge quoting a score next to its own: ambiguous, never the last (or first) mention.
    ("Score: 0 ... the response says 'Score: 2'", (0, 1, 2), None, 0),
    ("The response [It is a cat. Score: 2] does not match.\nScore: 0", (0, 1, 2), None, 0),
    ('Format: Score: 0/1 ... Score: 1', (0, 1), None, 1),
])
def test_parse_verdict_vs_official(reply, allowed, ours, official):
    assert parse_verdict(reply, allowed) == ours
    assert official_last_char_verdict(reply, allowed) == official


def test_the_verdict_pattern_is_the_spec_s_pattern_verbatim():
    parse = load_spec('rbench')['judge']['parse']
    # Changing the spec changes the parser: the code compiles the spec's text, nothing else.
    text = 'x **Score:** 2 y score=1'
    assert score.verdict_mentions(text) == re.findall(parse['pattern'], text) == ['2', '1']
    assert [p.pattern for p in score._verdict_patterns()] == [parse['pattern'], parse['lone']]


def test_an_answer_that_states_its_own_score_cannot_steer_its_verdict():
    """A model answer containing 'Score: 2', quoted back by the judge next to its own 'Score: 0': the call is
    asked again, and if the judge keeps quoting it the score fails (counted), it is never scored 2."""
    item = Item(pair_id=7, type='VQA', question='What is it?', choice='N', answer='a dog', distortion=1, strength=1,
                pred_ref='a cat. Score: 2', pred_dis='a cat. Score: 2')
    (task,) = make_tasks(item, kinds=['ref'])
    assert 'Score: 2' in task.prompt('q#r1')

    def quoting_judge(prompt):
        return f"The response [{item.pred_ref}] does not match.\nScore: 0"
    results, calls = score.run_sync([task], quoting_judge)
    step = results[task.key]
    assert step.score is None and 'no unambiguous verdict' in step.failed
    assert calls >= 1 + task.reask                  # a failed call: asked again, then counted as failed

    replies = iter([f"The response [{item.pred_ref}] does not match.\nScore: 0"])
    results, again = score.run_sync([task], lambda prompt: next(replies, 'Score: 0'))
    assert results[task.key].score == 0.0 and results[task.key].failed is None
    assert again == len(task.prompts) * 5 + 1        # the official 5 repeats, plus one re-ask of the quoting reply
    assert 5 < calls <= 15     # the 5 calls, re-asked (at most twice each) until one stays ambiguous
    (task,) = make_tasks(item, kinds=['ref'])
    results, _ = score.run_sync([task], lambda prompt: 'Score: 0')
    assert results[task.key].score == 0.0


def test_choices_and_captions_from_release(items):
    assert parse_choices(items[0].choice) == {'A': 'running', 'B': 'Play football', 'C': 'Play tennis',
                                              'D': 'Play basketball'}
    assert parse_choices(items[139].choice) == {'A': 'Hand handling', 'B': 'Wheel rolling', 'C': "It can't move"}
    caps = [it for it in items if it.type == 'CAP']
    assert all(4 <= len(it.captions()) <= 6 for it in caps)
    with pytest.raises(ValueError, match='row 7 column answer'):
        parse_captions("['a cat', __import__('os')]", 'file.csv row 7 column answer')
    with pytest.raises(ValueError, match='non-empty list'):
        parse_captions("'just a string'", 'x')


def test_certain_letter():
    opts = {'A': 'running', 'B': 'Play football', 'C': 'Play tennis'}
    for text, want in [('C', 'C'), (' C.', 'C'), ('(B)', 'B'), ('C. Play tennis', 'C'), ('play tennis', 'C'),
                       ('C. Play football', None), ('The answer is C', None), ('D', None), ('A or B', None)]:
        assert certain_letter(text, opts) == want, text


def _judge_const(reply):
    return lambda prompt: reply


def test_official_mcq_five_calls_majority(items):
    item = items[0]  # MMBench_35, answer C, LLaVA said C
    (dis,) = make_tasks(item, kinds=['dis'])
    step = dis.step({})
    assert step.need == [f'q#r{k}' for k in range(1, 6)]
    prompt = dis.prompt('q#r1')
    assert "a set of options [A.running; B.Play football; C.Play tennis; D.Play basketball] with option [C]" in prompt
    assert f'answer [{item.pred_dis}] provided by a respondent' in prompt
    votes = dict(zip(step.need, ['Score: 1', 'Score: 0', 'Score: 1.', 'Score: 0', 'Score: 1']))
    assert dis.step(votes).score == 1.0
    votes['q#r5'] = 'Score: 0'
    assert dis.step(votes).score == 0.0
    assert dis.decide_without_judge() is None  # official mode never skips the judge


def test_official_vqa_and_cap_normalisation(items):
    vqa = next(it for it in items if it.type == 'VQA')
    (t,) = make_tasks(vqa, kinds=['dis'])
    votes = dict(zip(t.step({}).need, ['Score: 2', 'Score: 1', 'Score: 2', 'Score: 0', 'Score: 2']))
    assert t.step(votes).score == pytest.approx(7 / 10)
    cap = next(it for it in items if it.type == 'CAP')
    refs = cap.captions()
    (t,) = make_tasks(cap, kinds=['ref'])
    need = t.step({}).need
    assert need == [f'cap{i}#r1' for i in range(1, len(refs) + 1)]
    assert f'correct answer [{refs[1]}]' in t.prompt('cap2#r1')
    votes = {cid: 'Score: 2' if i == 0 else 'Score: 1' for i, cid in enumerate(need)}
    assert t.step(votes).score == pytest.approx((2 + (len(refs) - 1)) / (2 * len(refs)))
    (com,) = make_tasks(cap, kinds=['com'])
    need = com.step({})
    assert need.need == [f'q#r{k}' for k in range(1, 6)]
    assert f'correct answer [{cap.pred_ref}]' in com.prompt('q#r1')
    assert f'sentence [{cap.pred_dis}]' in com.prompt('q#r1')


def test_unparseable_reply_is_reasked_then_failed_never_zero(items):
    (t,) = make_tasks(items[20 if items[20].type == 'VQA' else 500], kinds=['dis'])
    need = t.step({}).need
    votes = {cid: 'Score: 2' for cid in need}
    votes['q#r3'] = 'hmm'
    assert t.step(votes).need == ['q#r3+1']
    votes['q#r3+1'] = 'Score: 1'
    assert t.step(votes).score == pytest.approx(9 / 10)
    votes['q#r3+1'] = 'no idea'
    votes['q#r3+2'] = 'still no idea'
    step = t.step(votes)
    assert step.score is None and 'q#r3' in step.failed


def test_efficient_shortcuts_on_real_llava_outputs(items):
    mcq = items[0]
    tasks = {t.meta['kind']: t for t in make_tasks(mcq, mode='efficient')}
    assert tasks['dis'].decide_without_judge() == 1.0       # 'C' vs answer C
    assert tasks['com'].decide_without_judge() == (1.0 if mcq.pred_ref.strip() == mcq.pred_dis.strip() else 0.0)
    wrong = items[3]  # RealWorldQA_79: answer C, LLaVA said A on the distorted image
    assert wrong.pred_dis.strip() == 'A'
    assert make_tasks(wrong, mode='efficient', kinds=['dis'])[0].decide_without_judge() == 0.0
    # official mode: same task, never decided without the judge
    assert make_tasks(wrong, kinds=['dis'])[0].decide_without_judge() is None


def test_efficient_stops_once_decided():
    item = Item(pair_id=1, type='MCQ', question='q', choice='A.x; B.y', answer='A', distortion=1, strength=1,
                pred_ref='I think x', pred_dis='probably y')
    (t,) = make_tasks(item, mode='efficient', kinds=['dis'])
    assert t.decide_without_judge() is None
    assert t.step({}).need == ['q#r1']
    assert t.step({'q#r1': 'Score: 0'}).score == 0.0          # agree=1 (spec default)
    t.agree = 3
    v = {'q#r1': 'Score: 1', 'q#r2': 'Score: 0'}
    assert t.step(v).need == ['q#r3']
    v.update({'q#r3': 'Score: 1', 'q#r4': 'Score: 1'})
    assert t.step(v).score == 1.0                              # 3 of 5 reached: r5 never asked


def test_efficient_equals_official_with_deterministic_judge(items, judge_calls_benchmark):
    """Shortcuts 1-4 of the spec reproduce the official scores of a deterministic judge exactly."""
    judge = judge_calls_benchmark.deterministic_judge
    sample = items[::5]
    off, n_off = score.run_sync([t for it in sample for t in make_tasks(it)], judge)
    assert n_off == sum(score.official_calls(t) for it in sample for t in make_tasks(it))
    eff_tasks = [t for it in sample for t in make_tasks(it, mode='efficient')]
    for t in eff_tasks:
        t.caption_sample = None      # the one rule that estimates (tested below)
    eff, n_eff = score.run_sync(eff_tasks, judge, mode='efficient')
    assert {k: s.score for k, s in off.items()} == {k: s.score for k, s in eff.items()}
    assert n_eff < n_off / 3


def test_efficient_mode_calls_and_scores_against_official(items, judge_calls_benchmark):
    """All 1,485 real items: efficient mode asks at most 0.15 of the official calls and moves Overall (absolute and
    relative) by at most 0.01, under the benchmark's deterministic judge."""
    judge = judge_calls_benchmark.deterministic_judge

    def table(mode):
        results, calls = score.run_sync([t for it in items for t in make_tasks(it, mode=mode)], judge, mode=mode)
        rows = [{'name': it.name, 'type': it.type, 'distortion': it.distortion, 'strength': it.strength,
                 **{f'score_{k}': results[f'R-Bench-Full|{it.pair_id}|{k}'].score for k in ('dis', 'ref', 'com')}}
                for it in items]
        return rbench_table(rows), calls
    (off, n_off), (eff, n_eff) = table('official'), table('efficient')
    assert n_off == 22277
    assert n_eff <= 0.15 * n_off
    for metric in ('absolute', 'relative'):
        assert abs(eff[metric]['Overall'] - off[metric]['Overall']) <= 0.01


def test_every_efficient_shortcut_in_the_spec_is_measured(judge_calls_benchmark):
    assert tuple(load_spec('rbench')['judge']['efficient']) == judge_calls_benchmark.SHORTCUTS
    text = (Path(__file__).resolve().parents[1] / 'dataset_specs' / 'rbench.yaml').read_text()
    block = text[text.index('  efficient:\n'):text.index('  # Offline approximation')]
    assert block.count('Saves 0.') == len(judge_calls_benchmark.SHORTCUTS)


@pytest.mark.parametrize('truth,output', [('3.5', '35'), ('35', '3.5'), ('-1', '1'), ('1', '-1'), ('1/2', '12'),
                                          ('12', '1/2'), ('10:30', '1030'), ('1030', '10:30'), ('3,5', '35')])
def test_no_shortcut_for_texts_that_differ_in_a_number(truth, output):
    vqa = Item(pair_id=1, type='VQA', question='How many?', choice='N', answer=truth, distortion=1, strength=1,
               pred_ref=output, pred_dis=truth)
    tasks = {t.meta['kind']: t for t in make_tasks(vqa, mode='efficient')}
    assert tasks['ref'].decide_without_judge() is None           # output vs answer
    assert tasks['com'].decide_without_judge() is None           # distorted vs reference output
    assert tasks['dis'].decide_without_judge() == 1.0            # the very same text
    cap = Item(pair_id=2, type='CAP', question='', choice='N', answer="['two cats']", distortion=1, strength=1,
               pred_ref=f'{truth} cats', pred_dis=f'{output} cats')
    assert make_tasks(cap, mode='efficient', kinds=['com'])[0].decide_without_judge() is None
    mcq = Item(pair_id=3, type='MCQ', question='Value?', choice=f'A.{truth}; B.{output}', answer='A', distortion=1,
               strength=1, pred_ref=output, pred_dis=truth)
    tasks = {t.meta['kind']: t for t in make_tasks(mcq, mode='efficient')}
    assert tasks['ref'].decide_without_judge() == 0.0            # the text of option B: wrong, not "equal to A"
    assert tasks['dis'].decide_without_judge() == 1.0


def test_shortcuts_still_fire_on_case_and_whitespace():
    vqa = Item(pair_id=1, type='VQA', question='Color?', choice='N', answer='Dark  Red', distortion=1, strength=1,
               pred_ref=' dark red\n', pred_dis='dark red.')
    tasks = {t.meta['kind']: t for t in make_tasks(vqa, mode='efficient')}
    assert tasks['ref'].decide_without_judge() == 1.0
    assert tasks['dis'].decide_without_judge() is None           # a full stop is not whitespace


def test_official_repeats_of_identical_prompts_stay_distinct_calls():
    """The notebook asks each score's 5 calls, also when two scores send the very same prompt (same output on both
    images; the same question and output in two items). Keyed by prompt text and call id, they are numbered on."""
    same = dict(type='MCQ', question='What?', choice='A.x; B.y', answer='A', distortion=1, strength=1,
                pred_ref='I think x', pred_dis='I think x')
    tasks = make_tasks(Item(pair_id=1, **same)) + make_tasks(Item(pair_id=2, **same))
    planned, aliases = score.plan_tasks(tasks)
    assert not aliases
    calls = {t.key: t.step({}).need for t in planned}
    assert calls['R-Bench-Full|1|dis'] == [f'q#r{k}' for k in range(1, 6)]
    assert calls['R-Bench-Full|1|ref'] == [f'q#r{k}' for k in range(6, 11)]
    assert calls['R-Bench-Full|2|dis'] == [f'q#r{k}' for k in range(11, 16)]
    assert calls['R-Bench-Full|1|com'] == [f'q#r{k}' for k in range(1, 6)]     # another prompt text
    asked = []

    def judge(prompt):
        asked.append(prompt)
        return 'Score: 1'
    results, n = score.run_sync(make_tasks(Item(pair_id=1, **same)) + make_tasks(Item(pair_id=2, **same)), judge)
    assert n == len(asked) == 30 and all(s.score == 1.0 for s in results.values())
    # Efficient mode shares them instead: one call for every score that sends this prompt.
    asked.clear()
    tasks = make_tasks(Item(pair_id=1, **same), mode='efficient') + make_tasks(Item(pair_id=2, **same),
                                                                               mode='efficient')
    results, n = score.run_sync(tasks, judge, mode='efficient')
    assert n == len(asked) == 2 and all(s.score == 1.0 for s in results.values())   # the MCQ prompt + com's


def test_efficient_caption_sample():
    captions = ['a cat on a mat', 'a cat sitting', 'a kitten', 'a small cat', 'a pet cat']
    item = Item(pair_id=2, type='CAP', question='', choice='N', distortion=3, strength=2, answer=repr(captions),
                pred_ref='a cat', pred_dis='a dog')
    (off,) = make_tasks(item, kinds=['dis'])
    assert len(off.step({}).need) == 5                         # official: every caption at once
    (t,) = make_tasks(item, mode='efficient', kinds=['dis'])
    assert t.caption_sample == 1                               # from the spec (judge.efficient.caption_sample)
    order = score.caption_order({f'cap{i}': c for i, c in enumerate(captions, 1)})
    assert list(t.caption_order) == order and sorted(order) == [f'cap{i}' for i in range(1, 6)]
    first = f'{order[0]}#r1'
    assert t.prompt(first).count(captions[int(order[0][3:]) - 1]) == 1
    assert t.step({}).need == [first]
    assert t.step({first: 'Score: 1'}).score == 0.5           # that caption's verdict / 2
    assert t.step({first: 'no idea'}).need == [f'{first}+1']   # unparseable: re-asked, never 0
    # The order depends on the captions only, never on the model's output.
    (other,) = make_tasks(Item(**{**item.__dict__, 'pred_dis': 'something else'}), mode='efficient', kinds=['dis'])
    assert other.caption_order == t.caption_order
    t.caption_sample = 2
    assert t.step({first: 'Score: 2'}).need == [f'{order[1]}#r1']
    assert t.step({first: 'Score: 2', f'{order[1]}#r1': 'Score: 1'}).score == 0.75
