"""dataset_specs/rbench.yaml: the single distortion table, steps/groups as in issue 3, verbatim prompts."""
import hashlib

from vlmeval_ext.core.spec import load_spec
from vlmeval_ext.rbench.prompt import model_prompt
from vlmeval_ext.rbench.report import dimension_order, taxonomy


def test_distortion_table_steps_and_groups():
    spec = load_spec('rbench')
    tax = taxonomy(spec)  # also checks steps/groups agree with the table
    assert len(spec['distortions']) == 33
    steps = {e['name']: e['ids'] for e in spec['steps']}
    assert steps == {'Environment': [1, 2, 3, 4], 'Camera': [5, 6, 7, 8], 'Analog': [9, 10, 11, 12, 13],
                     'Source': [14, 15, 16, 17, 18], 'Channel': [19, 20, 21, 22], 'Receive': [23, 24, 25, 26, 27],
                     'Enhance': [28, 29, 30, 31, 32, 33]}
    groups = {e['name']: sorted(e['ids']) for e in spec['groups']}
    assert groups == {'Blur': [1, 5, 28], 'Luminance': [25, 26, 27], 'Chrominance': [14, 23, 24, 29, 30, 32, 33],
                      'Spatial': [6, 13, 18, 19, 20, 21, 22], 'Noise': [9, 10, 11, 12, 31],
                      'Compression': [15, 16, 17], 'Wild': [2, 3, 4, 7, 8]}
    assert tax['distortions'][16] == 'JPEG' and tax['distortions'][31] == 'CNN denoise'
    assert tax['strengths'] == {1: 'low', 2: 'mid', 3: 'high'}
    approximated = sorted(d['id'] for d in spec['distortions'] if 'synthetic_note' in d)
    assert approximated == [2, 3, 4, 7, 8, 31]


def test_taxonomy_rejects_inconsistent_group():
    spec = dict(load_spec('rbench'))
    spec['groups'] = [dict(g) for g in spec['groups']]
    spec['groups'][0] = {'name': 'Blur', 'ids': [1, 5, 28, 2]}
    try:
        taxonomy(spec)
    except ValueError as err:
        assert 'distortion 2' in str(err)
    else:
        raise AssertionError('an inconsistent group table was accepted')


def test_dimension_order_has_all_36_dimensions():
    dims = dimension_order()
    assert dims[:7] == ['Overall', 'MCQ', 'VQA', 'CAP', 'low', 'mid', 'high']
    assert dims[-9:] == ['MCQ-low', 'MCQ-mid', 'MCQ-high', 'VQA-low', 'VQA-mid', 'VQA-high',
                         'CAP-low', 'CAP-mid', 'CAP-high']
    assert len(dims) == 7 + 7 + 7 + 9


def test_judge_prompts_verbatim_with_whitespace():
    spec = load_spec('rbench')
    for task, template in spec['judge_prompts'].items():
        assert hashlib.sha256(template.encode()).hexdigest() == spec['judge_prompt_sha256'][task], task
    mcq = spec['judge_prompts']['MCQ']
    assert mcq.startswith('You will now be provided with a question [{question}] and a set of options [{answers}]')
    assert '\n            Additionally, there will be an answer [{answer}]' in mcq
    assert mcq.endswith('Please only provide the result in the following format: Score:')
    assert 'correct answer [{correct_ans}]. \n' in spec['judge_prompts']['VQA']
    assert spec['judge_prompts']['CAP'].startswith('Evaluate whether the sentence [{answer}] completely matches '
                                                   'the correct answer [{correct}]. \n')


def test_model_prompts_verbatim():
    assert model_prompt('MCQ', 'Q?', 'A.x; B.y') == "Q?\nA.x; B.y\nAnswer with the option's letter from the given choices directly."
    assert model_prompt('VQA', 'What is {this}') == 'What is {this}. Please answer no more than 10 words'
    assert model_prompt('CAP').startswith('Please describe this image in general. Directly provide the description')
    try:
        model_prompt('OCR', 'q')
    except ValueError as err:
        assert 'OCR' in str(err)
    else:
        raise AssertionError('unknown task accepted')
