"""R-Bench's constants in the dataset file (vlmeval_ext/dataset/utils/rbench_full.py) against the reviewed spec
(dataset_specs/rbench.yaml): the distortion table, steps and groups, the verbatim prompts."""
import hashlib

import pytest

from vlmeval_ext.dataset.utils import rbench_full as B
from vlmeval_ext.dataset.utils.rbench_full import dimension_order, model_prompt
from vlmeval_ext.spec import load_spec


def test_distortion_table_steps_and_groups():
    spec = load_spec('rbench')
    assert len(spec['distortions']) == 33
    assert {d['id']: (d['name'], d['step'], d['group']) for d in spec['distortions']} == B.DISTORTIONS
    steps = {e['name']: e['ids'] for e in spec['steps']}
    assert steps == {'Environment': [1, 2, 3, 4], 'Camera': [5, 6, 7, 8], 'Analog': [9, 10, 11, 12, 13],
                     'Source': [14, 15, 16, 17, 18], 'Channel': [19, 20, 21, 22], 'Receive': [23, 24, 25, 26, 27],
                     'Enhance': [28, 29, 30, 31, 32, 33]}
    groups = {e['name']: sorted(e['ids']) for e in spec['groups']}
    assert groups == {'Blur': [1, 5, 28], 'Luminance': [25, 26, 27], 'Chrominance': [14, 23, 24, 29, 30, 32, 33],
                      'Spatial': [6, 13, 18, 19, 20, 21, 22], 'Noise': [9, 10, 11, 12, 31],
                      'Compression': [15, 16, 17], 'Wild': [2, 3, 4, 7, 8]}
    assert tuple(steps) == B.STEPS and tuple(groups) == B.GROUPS
    for name, ids in steps.items():
        assert all(B.DISTORTIONS[i][1] == name for i in ids)
    for name, ids in groups.items():
        assert all(B.DISTORTIONS[i][2] == name for i in ids)
    assert B.DISTORTIONS[16][0] == 'JPEG' and B.DISTORTIONS[31][0] == 'CNN denoise'
    assert {int(k): v for k, v in spec['strengths'].items()} == B.STRENGTHS == {1: 'low', 2: 'mid', 3: 'high'}
    approximated = sorted(d['id'] for d in spec['distortions'] if 'synthetic_note' in d)
    assert approximated == [2, 3, 4, 7, 8, 31]


def test_dimension_order_has_all_36_dimensions():
    dims = dimension_order()
    assert dims[:7] == ['Overall', 'MCQ', 'VQA', 'CAP', 'low', 'mid', 'high']
    assert dims[-9:] == ['MCQ-low', 'MCQ-mid', 'MCQ-high', 'VQA-low', 'VQA-mid', 'VQA-high',
                         'CAP-low', 'CAP-mid', 'CAP-high']
    assert len(dims) == 7 + 7 + 7 + 9


def test_judge_prompts_verbatim_with_whitespace():
    spec = load_spec('rbench')
    assert spec['judge_prompts'] == B.JUDGE_PROMPTS
    for task, template in B.JUDGE_PROMPTS.items():
        assert hashlib.sha256(template.encode()).hexdigest() == spec['judge_prompt_sha256'][task], task
    mcq = B.JUDGE_PROMPTS['MCQ']
    assert mcq.startswith('You will now be provided with a question [{question}] and a set of options [{answers}]')
    assert '\n            Additionally, there will be an answer [{answer}]' in mcq
    assert mcq.endswith('Please only provide the result in the following format: Score:')
    assert 'correct answer [{correct_ans}]. \n' in B.JUDGE_PROMPTS['VQA']
    assert B.JUDGE_PROMPTS['CAP'].startswith('Evaluate whether the sentence [{answer}] completely matches '
                                             'the correct answer [{correct}]. \n')


def test_model_prompts_verbatim():
    assert load_spec('rbench')['model_prompts'] == B.MODEL_PROMPTS
    assert model_prompt('MCQ', 'Q?', 'A.x; B.y') == ("Q?\nA.x; B.y\nAnswer with the option's letter from the given "
                                                     'choices directly.')
    assert model_prompt('VQA', 'What is {this}') == 'What is {this}. Please answer no more than 10 words'
    assert model_prompt('CAP').startswith('Please describe this image in general. Directly provide the description')
    with pytest.raises(ValueError, match='OCR'):
        model_prompt('OCR', 'q')


def test_a_prompt_is_filled_in_one_pass():
    # A question that reads '{choice}' stays that text: the template is filled once, never re-read.
    assert model_prompt('MCQ', 'Is {choice} here?', 'A.{question}; B.y') == (
        "Is {choice} here?\nA.{question}; B.y\nAnswer with the option's letter from the given choices directly.")
