"""RoCOCO retrieval protocol: real annotation files, pre_caption, blockwise ranking (the dataset's
rank_blockwise) vs a brute-force reference."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlmeval_ext.dataset.utils import rococo_retrieval as R
from vlmeval_ext.prepare import rococo as P
from vlmeval_ext.scripts.build_rococo_mcq_tsv import pre_caption
from vlmeval_ext.cli.rococo import score_embeddings


def score_i2t(ann, img, txt, **kw):
    return score_embeddings(ann, img, txt, 'i2t', **kw)


def score_t2i(ann, img, txt, **kw):
    return score_embeddings(ann, img, txt, 't2i', **kw)


ATTACK_FILES = [f'{a}.json' for a in P.ATTACKS]


def brute_rank(scores_row: np.ndarray, positives) -> tuple[int, list[int]]:
    order = sorted(range(len(scores_row)), key=lambda j: (-scores_row[j], j))
    return min(order.index(p) for p in positives), order


def brute_i2t(ann, img, txt):
    ranks, false = [], []
    for i in range(ann.n_images):
        s = img[i] @ txt.T
        r, order = brute_rank(s, ann.ground_truth[i])
        ranks.append(r)
        false.append(not ann.is_ground_truth[order[0]])
    n = len(ranks)
    out = {f'R@{k}': 100.0 * sum(r < k for r in ranks) / n for k in (1, 5, 10)}
    out['R_mean'] = (out['R@1'] + out['R@5'] + out['R@10']) / 3
    out['false_rate'] = 100.0 * sum(false) / n
    return out


def synthetic_annotation(n_images: int, rng, n_eleven: int = 2, clean: bool = False):
    entries = []
    for i in range(n_images):
        n_gt = 6 if i < n_eleven else 5
        gts = [f'Image {i} caption {k}.' for k in range(n_gt)]
        adv = [] if clean else [f'image {i} kaption {k}' for k in range(5)]
        entries.append({'image': f'val2014/COCO_val2014_{i:012d}.jpg', 'caption': gts + adv})
    rng.shuffle(entries)
    return P.parse_annotation(entries, source='synthetic')


@pytest.mark.parametrize('name', ['coco_karpathy_test.json'] + ATTACK_FILES)
def test_real_annotation_files_parse_in_full(fixtures_dir, name):
    ann = P.load_annotation(fixtures_dir / 'rococo' / name)
    assert ann.n_images == 5000
    clean = name == 'coco_karpathy_test.json'
    assert ann.n_texts == (25010 if clean else 50010)
    assert int(ann.is_ground_truth.sum()) == 25010          # 4,990 x 5 + 10 x 6 ground-truth captions
    assert len({len(g) for g in ann.ground_truth}) == 2 and sum(len(g) == 6 for g in ann.ground_truth) == 10
    if not clean:
        assert int((~ann.is_ground_truth).sum()) == 25000
        # every adversarial caption twins a ground-truth caption of the same image, differing in few words
        adv = np.flatnonzero(~ann.is_ground_truth)
        assert (ann.twin_of[adv] >= 0).all()
        assert (ann.text_image[ann.twin_of[adv]] == ann.text_image[adv]).all()
        assert ann.is_ground_truth[ann.twin_of[adv]].all()
        same_len = [len(ann.texts[t].split()) == len(ann.texts[ann.twin_of[t]].split()) for t in adv]
        assert np.mean(same_len) > 0.8


def test_real_files_share_images_and_ground_truth(fixtures_dir):
    clean = P.load_annotation(fixtures_dir / 'rococo' / 'coco_karpathy_test.json')
    attack = P.load_annotation(fixtures_dir / 'rococo' / 'rand_voca.json')
    assert clean.images == attack.images
    gt_attack = [attack.texts[t] for t in np.flatnonzero(attack.is_ground_truth)]
    assert gt_attack == clean.texts


def test_pre_caption_matches_official_rules():
    assert pre_caption('A man (with) a "red" helmet!  On: a  moped; ~yes* #1. \n') == \
        'a man with a red helmet on a moped yes 1'
    long = ' '.join(f'w{i}' for i in range(40))
    assert pre_caption(long).split() == [f'w{i}' for i in range(30)]
    assert pre_caption("Don't, stop-here?") == "don't, stop-here?"   # only .!"()*#:;~ are removed


def test_parse_rejects_bad_entries():
    with pytest.raises(ValueError, match=r'synthetic: entry 1 .* has 7 captions'):
        P.parse_annotation([{'image': 'a.jpg', 'caption': ['x'] * 5}, {'image': 'b.jpg', 'caption': ['x'] * 7}],
                           source='synthetic')
    with pytest.raises(ValueError, match='entry 0 must be an object'):
        P.parse_annotation([['a.jpg']], source='synthetic')


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_i2t_blockwise_equals_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    ann = synthetic_annotation(12, rng, n_eleven=3)
    # small integer embeddings -> many exactly tied scores
    img = rng.integers(-2, 3, size=(ann.n_images, 4)).astype(np.float32)
    txt = rng.integers(-2, 3, size=(ann.n_texts, 4)).astype(np.float32)
    txt[ann.ground_truth[0][1]] = txt[ann.ground_truth[0][0]]       # duplicate ground truth
    txt[ann.ground_truth[1][0] + 6 if len(ann.ground_truth[1]) == 6 else ann.ground_truth[1][0] + 5] = \
        txt[ann.ground_truth[1][0]]                                     # adversarial twin tied with its original
    got = score_i2t(ann, img, txt, normalise=False, block_rows=5)
    assert got == pytest.approx(brute_i2t(ann, img, txt))
    _, _, topk = R.rank_blockwise(img, txt, P.i2t_positives(ann), k=10, block_rows=4)
    for i in range(ann.n_images):
        _, order = brute_rank(img[i] @ txt.T, ann.ground_truth[i])
        assert topk[i].tolist() == order[:10]


def test_i2t_false_rate_and_perfect_model():
    rng = np.random.default_rng(5)
    ann = synthetic_annotation(8, rng)
    dim = ann.n_texts
    txt = np.eye(dim, dtype=np.float32)
    img = np.zeros((ann.n_images, dim), np.float32)
    for i, g in enumerate(ann.ground_truth):
        img[i, g] = 1.0
    perfect = score_i2t(ann, img, txt)
    assert perfect == {'R@1': 100.0, 'R@5': 100.0, 'R@10': 100.0, 'R_mean': 100.0, 'false_rate': 0.0}
    # images 0..3 prefer their adversarial twins
    for i in range(4):
        adv = [t for t in range(ann.n_texts) if ann.text_image[t] == i and not ann.is_ground_truth[t]]
        img[i, adv] = 2.0
    fooled = score_i2t(ann, img, txt)
    assert fooled['false_rate'] == 50.0 and fooled['R@1'] == 50.0 and fooled['R@10'] == 100.0


def test_t2i_with_mixed_images_brute_force():
    rng = np.random.default_rng(7)
    ann = synthetic_annotation(9, rng, n_eleven=2, clean=True)
    img = rng.integers(-2, 3, size=(2 * ann.n_images, 3)).astype(np.float32)
    img[ann.n_images + 2] = img[2]                                      # mixed twin tied with its original
    txt = rng.integers(-2, 3, size=(ann.n_texts, 3)).astype(np.float32)
    got = score_t2i(ann, img, txt, normalise=False, block_rows=7)
    ranks, false = [], []
    for t in range(ann.n_texts):
        r, order = brute_rank(img @ txt[t], [int(ann.text_image[t])])
        ranks.append(r)
        false.append(order[0] >= ann.n_images)
    n = ann.n_texts
    assert got['R@1'] == pytest.approx(100.0 * sum(r < 1 for r in ranks) / n)
    assert got['R@5'] == pytest.approx(100.0 * sum(r < 5 for r in ranks) / n)
    assert got['R@10'] == pytest.approx(100.0 * sum(r < 10 for r in ranks) / n)
    assert got['false_rate'] == pytest.approx(100.0 * sum(false) / n)


def test_embedding_errors_name_array_and_row():
    ann = synthetic_annotation(3, np.random.default_rng(0))
    img = np.ones((3, 4), np.float32)
    txt = np.ones((ann.n_texts, 4), np.float32)
    txt[7, 2] = np.nan
    with pytest.raises(ValueError, match=r'T\.npy: row 7 column 2 is nan'):
        score_i2t(ann, img, txt, names=('I.npy', 'T.npy'))
    with pytest.raises(ValueError, match=r'I\.npy: expected 3 rows, got 2'):
        score_i2t(ann, img[:2], txt, names=('I.npy', 'T.npy'))
    with pytest.raises(ValueError, match='does not match'):
        score_i2t(ann, img, np.ones((ann.n_texts, 5)), names=('I.npy', 'T.npy'))
    with pytest.raises(ValueError, match='clean annotation'):
        score_t2i(ann, np.ones((6, 4)), txt)


def test_galleries_follow_file_order(tmp_path):
    entries = [{'image': 'val2014/COCO_val2014_1.jpg', 'caption': ['A b.'] * 5},
               {'image': 'val2014/COCO_val2014_2.jpg', 'caption': ['C d!'] * 6}]
    path = tmp_path / 'clean.json'
    path.write_text(json.dumps(entries))
    ann = P.load_annotation(path)
    images, texts = P.t2i_gallery(ann, 'mix_0.9')
    assert images == ['val2014/COCO_val2014_1.jpg', 'val2014/COCO_val2014_2.jpg',
                      'mix_0.9/COCO_val2014_1.jpg', 'mix_0.9/COCO_val2014_2.jpg']
    assert texts == ['a b'] * 5 + ['c d'] * 6


def _brute_select(scores, b_index, k):
    ranks, tops = [], []
    for r in range(scores.shape[0]):
        order = np.lexsort((np.arange(scores.shape[1]), -scores[r]))
        ranks.append(int(np.flatnonzero(order == b_index[r])[0]))
        tops.append(order[:k].tolist())
    return ranks, tops


@pytest.mark.parametrize('seed, spread', [(0, 40), (1, 40), (2, 2)])
def test_chunked_selection_equals_a_full_sort_with_ties(seed, spread):
    """Rank and top k from chunk maxima and gathered chunks equal a full sort: ties, a ragged last chunk, a row of
    nothing but ties, the best entry in the tail; spread 2 makes most chunks qualify (the full-comparison path)."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(-spread, spread, size=(37, 5003)).astype(np.float32)
    scores[3] = 0.0
    scores[5, -1] = 100.0
    b_index = rng.integers(0, scores.shape[1], size=scores.shape[0])
    b_index[7] = scores.shape[1] - 2                                       # a positive in the ragged tail
    b_score = scores[np.arange(scores.shape[0]), b_index]
    rank, top = R._select_block(scores, b_score, b_index, 10, chunk=64)
    expected_rank, expected_top = _brute_select(scores, b_index, 10)
    assert rank.tolist() == expected_rank
    assert top.tolist() == expected_top


def test_chunked_selection_gathers_few_chunks_when_positives_rank_high():
    """A good model's case: the positive is among the best entries, so only a few chunks are gathered for its
    rank; exact ties planted at the top and across chunk borders still rank by column."""
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((40, 5003)).astype(np.float32)
    top_cols = np.argsort(-scores, axis=1, kind='stable')
    b_index = top_cols[np.arange(40), rng.integers(0, 3, size=40)]           # 1st to 3rd best
    scores[0, 70] = scores[0, b_index[0]] = 9.0                              # a tie in another chunk, before it
    scores[1, 5002] = scores[1, b_index[1]] = 9.0                            # a tie in the ragged tail
    b_score = scores[np.arange(40), b_index]
    main = scores[:, :scores.shape[1] // 64 * 64].reshape(40, -1, 64)
    assert (main.max(axis=2) >= b_score[:, None]).sum() < main.shape[0] * main.shape[1] // 2   # the gather path
    rank, top = R._select_block(scores, b_score, b_index, 10, chunk=64)
    expected_rank, expected_top = _brute_select(scores, b_index, 10)
    assert rank.tolist() == expected_rank
    assert top.tolist() == expected_top


def test_rank_blockwise_equals_brute_force_on_a_large_gallery():
    """Rank, best positive and top 10 of rank_blockwise agree with a full sort per query (the selection takes
    the chunked path: gallery > 4 chunks), with tied scores from small integer embeddings."""
    rng = np.random.default_rng(7)
    n_q, n_g = 60, 6007
    queries = rng.integers(-2, 3, size=(n_q, 6)).astype(np.float32)
    gallery = rng.integers(-2, 3, size=(n_g, 6)).astype(np.float32)
    positives = np.stack([rng.choice(n_g, 5, replace=False) for _ in range(n_q)])
    positives[::4, 3:] = -1                                                  # padded rows
    rank, best, topk = R.rank_blockwise(queries, gallery, positives, k=10, block_rows=16)
    for i in range(n_q):
        scores = gallery @ queries[i]
        order = np.lexsort((np.arange(n_g), -scores))
        position = np.empty(n_g, dtype=np.int64)
        position[order] = np.arange(n_g)
        valid = positives[i][positives[i] >= 0]
        assert rank[i] == position[valid].min()
        assert best[i] == valid[np.argmin(position[valid])]
        assert topk[i].tolist() == order[:10].tolist()
