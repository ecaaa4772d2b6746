"""ReMI prompts: the appendix texts, interleaving at <imageK> tags, labelled and composite fallbacks."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vlmeval_ext.dataset.utils import remi as prompt

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / 'dataset_specs' / 'remi.yaml').read_text())
COMMON = (' Output only a valid JSON string with two fields: "explanation" and "answer". Do not output anything '
          'else. The explanation field contains your reasoning.')


def appendix(task):
    """The text the snippet appends to a question of this task."""
    return prompt.prompt_text('', task)[len('Question: '):]


def test_appendix_common_text_and_task_sentences():
    assert SPEC['prompt']['appendix_common'] == COMMON
    for task in SPEC['tasks']:
        text = appendix(task)
        assert text.startswith(COMMON) and len(text) > len(COMMON)
    # Verbatim from the official evaluation snippet's QUESTION_APPENDICES (typos included).
    assert appendix('Isomorphism') == COMMON + (
        ' The answer field must be 1 if the two graphs are isomorphic and 0 otherwise.')
    assert appendix('Collisions') == COMMON + (
        ' The answer field contains the numeric value corresponding to your final answer. If it is a yes or no '
        'question, the answer field must be 0 for no and 1 for yes.')
    assert appendix('IQ') == COMMON + ' The answer field contains the a string corresponding to your final choice.'
    assert appendix('Clocks') == COMMON + (
        ' The answer field contains the numeric value corresponding to your final answer.')
    assert appendix('FuncRead') == COMMON + (
        ' The answer field contains a string or numeric value corresponding to your final answer.')
    assert appendix('Charts') == COMMON + (
        ' The answer field contains a string or numerical value corresponding to your final answer.')
    with pytest.raises(ValueError, match='unknown ReMI task'):
        appendix('Sudoku')
    assert prompt.COMMON == COMMON and {t: COMMON + a for t, a in prompt.APPENDIX.items()} == {
        t: appendix(t) for t in SPEC['tasks']}


def test_interleaved_places_each_image_at_its_tag():
    images = ['img1.png', 'img2.png', 'img3.png']
    q = 'Compute <image1> using <image3> and <image2>.'
    msg = prompt.interleaved_message(q, 'EmojiAlgebra', images)
    assert [m['type'] for m in msg] == ['text', 'image', 'text', 'image', 'text', 'image', 'text']
    assert [m['value'] for m in msg if m['type'] == 'image'] == ['img1.png', 'img3.png', 'img2.png']
    assert msg[0]['value'] == 'Question: Compute '
    assert msg[2]['value'] == ' using '
    assert msg[-1]['value'] == '.' + appendix('EmojiAlgebra')
    # the text parts joined with the tags give back the full prompt
    rebuilt = ''.join(m['value'] if m['type'] == 'text' else f'<image{images.index(m["value"]) + 1}>' for m in msg)
    assert rebuilt == prompt.prompt_text(q, 'EmojiAlgebra')


def test_adjacent_tags_at_start_make_no_empty_text():
    msg = prompt.interleaved_message('<image1><image2>Find X.', 'Charts', ['a', 'b'])
    assert [m['type'] for m in msg] == ['text', 'image', 'image', 'text']
    assert msg[0]['value'] == 'Question: ' and all(m['value'] for m in msg)


def test_tag_beyond_images_is_an_error_and_untagged_images_are_kept():
    with pytest.raises(ValueError, match='<image3> but the item has 2'):
        prompt.interleaved_message('See <image3>', 'Maps', ['a', 'b'])
    msg = prompt.interleaved_message('See <image1>', 'Maps', ['a', 'b'])
    assert [m['value'] for m in msg if m['type'] == 'image'] == ['a', 'b']


def test_labelled_fallback_has_all_images_with_labels():
    msg = prompt.labelled_message('Compare <image2> with <image1>.', 'Maps', ['a', 'b'])
    assert msg[0]['value'].startswith('Question: Compare Image 2 with Image 1.')
    assert [(m['type'], m['value']) for m in msg[1:]] == [('text', 'Image 1:'), ('image', 'a'),
                                                         ('text', 'Image 2:'), ('image', 'b')]


def test_composite_fallback_one_labelled_image(tmp_path):
    from PIL import Image
    paths = []
    for k, colour in enumerate(['red', 'green', 'blue', 'yellow']):
        p = tmp_path / f'{k}.png'
        Image.new('RGB', (300, 150), colour).save(p)
        paths.append(str(p))
    target = tmp_path / 'composite.png'
    prompt.make_composite(paths, target)
    msg = prompt.composite_message('A <image1> B <image4>', 'IQ', paths, str(target))
    assert [m['type'] for m in msg] == ['image', 'text'] and msg[0]['value'] == str(target)
    assert msg[1]['value'].startswith('Question: A Image 1 B Image 4')
    assert 'tiles the 4 images' in msg[1]['value']
    with Image.open(target) as im:
        cell = SPEC['prompt']['composite']['cell_size']
        cap = SPEC['prompt']['composite']['caption_height']
        assert SPEC['prompt']['composite']['max_columns'] == 3
        assert im.size == (3 * cell, 2 * (cell + cap))                # 4 images -> 3 columns x 2 rows
        centre = lambda k: im.getpixel(((k % 3) * cell + cell // 2, (k // 3) * (cell + cap) + cap + cell // 2))
        assert [centre(k) for k in range(4)] == [(255, 0, 0), (0, 128, 0), (0, 0, 255), (255, 255, 0)]
        assert im.getpixel((3 * cell - 5, 2 * (cell + cap) - 5)) == (255, 255, 255)   # empty 6th cell


def test_the_three_input_modes_share_one_split():
    from vlmeval_ext.dataset.utils.remi import split_and_mode
    assert split_and_mode('ReMI') == ('ReMI', 'interleaved')
    assert split_and_mode('ReMI_labelled') == ('ReMI', 'labelled')
    assert split_and_mode('ReMI_DEMO_composite') == ('ReMI_DEMO', 'composite')
