"""RoCOCO-MCQ recast: options from the real attack files, determinism, letter reading, twin rate, and the demo
through run.py."""
from __future__ import annotations

import collections

import pytest

from vlmeval_ext.dataset.utils import rococo_mcq as Q
from vlmeval_ext.prepare import rococo as P


def parse_letter(reply, letters):
    """The one option letter a reply states, else None."""
    found = Q.stated_letters(reply, letters) if isinstance(reply, str) else set()
    return found.pop() if len(found) == 1 else None


@pytest.fixture(scope='module')
def same_concept(fixtures_dir):
    return P.load_annotation(fixtures_dir / 'rococo' / 'same_concept.json')


def test_items_from_real_file(same_concept):
    ann = same_concept
    eleven = [i for i, g in enumerate(ann.ground_truth) if len(g) == 6][:2]
    items = P.build_items(ann, 'same_concept', rows=list(range(200)) + eleven)
    assert len(items) == 202
    for it in items:
        opts = [it[c] for c in 'ABCD']
        assert len(set(opts)) == 4 or opts.count(it[it['answer']]) == 1
        assert it[it['answer']] == ann.texts[ann.ground_truth[it['index']][0]]
        assert ann.twin_of[it['twin_text_row']] == it['answer_text_row'] and it['twin'] != it['answer']
        assert it[it['answer']] == it[it['answer']].lower()            # normalised: no case/punctuation cue
    # the correct letter is spread over the options, not always first
    counts = collections.Counter(it['answer'] for it in items)
    assert set(counts) == set('ABCD') and max(counts.values()) < 0.4 * len(items)
    again = P.build_items(ann, 'same_concept', rows=[5, 150])
    assert again == [items[5], items[150]]                             # an item does not depend on the others
    assert P.build_items(ann, 'same_concept', seed=7, rows=[5]) != [items[5]]
    text = Q.prompt_text(items[0])
    assert text.count('\n') == 6 and f'A. {items[0]["A"]}' in text


def test_clean_file_is_refused(fixtures_dir):
    clean = P.load_annotation(fixtures_dir / 'rococo' / 'coco_karpathy_test.json')
    with pytest.raises(ValueError, match='needs an attack file'):
        P.build_items(clean, 'clean', rows=[0])


@pytest.mark.parametrize('reply,letter', [('B', 'B'), ('(C) a dog', 'C'), ('Answer: D', 'D'), ('B.', 'B'),
                                          ('answer is A', 'A'), ('The answer is (B) because ...', 'B'),
                                          ('**C**', 'C'), ('E', None), ('I think so', None), ('Dog', None),
                                          (None, None), ('b.', None), ('a man riding a horse', None),
                                          ('A man riding a horse', None), ('Answer: A man riding', None)])
def test_parse_letter(reply, letter):
    """Only a standalone capital option is a letter: the article 'a' / 'A' before a word is not option A."""
    assert parse_letter(reply, 'ABCD') == letter


OPTIONS = {'A': 'a man with a red helmet on a small moped on a dirt road', 'B': 'a wall with graffiti on it',
           'C': 'a sink in a corner of a room', 'D': 'a catchers with a red helmet on a small moped on a dirt road'}


@pytest.mark.parametrize('reply,expected', [
    ('B', ('B', 'letter')), ('(B)', ('B', 'letter')), ('Answer: B', ('B', 'letter')),
    ('a catchers with a red helmet on a small moped on a dirt road', ('D', 'text')),          # the twin, by text
    ('A catchers with a red helmet on a small moped on a dirt road.', ('D', 'text')),         # capitalised article
    ('A man with a red helmet on a small moped on a dirt road.', ('A', 'text')),
    ('(D) a catchers with a red helmet on a small moped on a dirt road', ('D', 'letter')),
    ('(A) a catchers with a red helmet on a small moped on a dirt road', (None, 'hedge')),    # letter vs text
    ('B or C', (None, 'hedge')), ('A B C D', (None, 'hedge')), ('Answer: B or C', (None, 'hedge')),
    ('B/C', (None, 'hedge')), ('A man on a moped', (None, 'unparsed')), ('b', (None, 'unparsed')),
    ('   ', (None, 'empty'))])
def test_parse_choice_reads_letters_and_option_text_never_guesses(reply, expected):
    assert Q.parse_choice(reply, OPTIONS) == expected


def test_score_counts_twin_and_unparsed():
    rows = [{'answer': 'A', 'twin': 'B', 'choice': 'A', 'how': 'letter'},
            {'answer': 'C', 'twin': 'D', 'choice': 'D', 'how': 'text'},
            {'answer': 'B', 'twin': 'A', 'choice': None, 'how': 'unparsed'},
            {'answer': 'D', 'twin': 'C', 'choice': 'A', 'how': 'letter'},
            {'answer': 'D', 'twin': 'C', 'choice': None, 'how': 'inference_failed'}]
    for row in rows:
        row['n_options'] = 4
    result = Q.score(rows)
    assert {k: result[k] for k in ('n', 'accuracy', 'twin_rate', 'twin_rate_of_answered', 'unparsed')} == {
        'n': 4, 'accuracy': 25.0, 'twin_rate': 25.0, 'twin_rate_of_answered': 100 / 3, 'unparsed': 1}
    assert result['inference_failed'] == 1 and result['n_items'] == 5 and result['chance'] == 25.0
    assert result['parsed_by'] == {'letter': 2, 'text': 1, 'unparsed': 1, 'inference_failed': 1}
    with pytest.raises(ValueError):
        Q.score([])


def test_mcq_demo_through_run_py_with_loopback_model(tmp_path, loopback, kit_env):
    """The shipped demo through the kit's run.py, the loopback server answering each item in a scripted way:
    letters in several formats, the option text, the twin, a distractor, and a refusal."""
    import json
    import re

    from vlmeval_ext.io import read_table
    from vlmeval_ext.prepare.demos import ROCOCO_DEMO_NAME as DEMO_NAME, ROCOCO_DEMO_TSV as DEMO_TSV
    from helpers.kit_run import loopback_model_config, run_kit, write_config

    demo = read_table(DEMO_TSV).to_dict('records')
    correct = twin = unparsed = 0
    for k, item in enumerate(demo):
        distractor = next(c for c in 'ABCD' if c not in (item['answer'], item['twin']))
        kind = k % 6
        reply = {0: item['answer'], 1: f'({item["answer"]})', 2: f'Answer: {item["twin"]}',
                 3: f'The picture shows {item[item["answer"]]}', 4: 'I cannot tell from this image.',
                 5: distractor}[kind]
        correct += kind in (0, 1, 3)
        twin += kind == 2
        unparsed += kind == 4
        block = '\n'.join(f'{c}. {item[c]}' for c in 'ABCD')
        loopback.script(re.escape(block), reply)
    from vlmeval_ext.launcher import PROBE_PROMPT
    loopback.script(re.escape(PROBE_PROMPT), 'OK')         # the launcher's one test call to the model
    loopback.default = 'UNSCRIPTED'
    cfg = loopback_model_config(loopback, {DEMO_NAME: {'class': 'RoCOCOMCQ', 'dataset': DEMO_NAME}})
    env = dict(kit_env, PRED_FORMAT='tsv')
    proc = run_kit(['--config', write_config(tmp_path, cfg), '--work-dir', tmp_path / 'out', '--api-nproc', '4'],
                   env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    items = [r for r in loopback.log if PROBE_PROMPT not in r.prompt]
    assert len(items) == len(demo) == loopback.count() - 1 and loopback.count('UNSCRIPTED') == 0
    # every request: one image and the kit-style MCQ prompt
    assert all(r.n_images == 1 and r.prompt.endswith(Q.INSTRUCTION) and 'Options:\nA. ' in r.prompt for r in items)
    score_file = next((tmp_path / 'out').rglob(f'*_{DEMO_NAME}_score.json'))
    scores = json.loads(score_file.read_text())
    n = len(demo)
    assert scores['n'] == n == 24
    assert scores['accuracy'] == pytest.approx(100.0 * correct / n)
    assert scores['twin_rate'] == pytest.approx(100.0 * twin / n)
    assert scores['unparsed'] == unparsed == 4 and scores['parsed_by']['text'] == 4
    acc = read_table(str(score_file).replace('_score.json', '_acc.csv'))
    assert float(acc['accuracy'].iloc[0]) == pytest.approx(round(100.0 * correct / n, 2))
    manifest = json.loads(next((tmp_path / 'out').rglob(f'*_{DEMO_NAME}_manifest.json')).read_text())
    assert manifest['judge']['mode'] == 'rule'
    # rule-scored: the kit is told so, and names no judge model (it would log its MCQ default, gpt-4o-mini)
    assert 'gpt-4o-mini' not in proc.stdout + proc.stderr and "'model': 'exact_matching'" in proc.stdout + proc.stderr
