"""R-Bench judge protocol as pure step functions (driven by vlmeval_ext.core.judge.run_tasks).

Per item three scores in [0, 1] (see dataset_specs/rbench.yaml, `judge`):
  dis: ground truth vs the output on the distorted image
  ref: ground truth vs the output on the reference image
  com: the model's reference output taken as correct vs its distorted output

Official mode asks exactly the calls of the official notebook (R-Bench-Script.ipynb): MCQ 5 repeats, majority;
VQA 5 repeats of 0/1/2, sum/10; CAP one call per reference caption, sum/(2 n); com 5 repeats /10 (MCQ
majority). Efficient mode applies the shortcuts listed in the spec's judge.efficient. Call ids are
'<prompt>#r<k>' ('q#r3': the item's prompt, repeat 3; 'cap2#r1': reference caption 2); in official mode k counts
on across scores that send the very same prompt text (number_repeats). An unparseable or ambiguous reply
(parse_verdict) is re-asked as '<call>+<n>' up to `reask` times, then the task fails. A failed call or an
unparseable verdict is never scored 0.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

from vlmeval_ext.core.judge import Step, VerdictCache, run_tasks
from vlmeval_ext.core.spec import load_spec

SCORE_KINDS = ('dis', 'ref', 'com')
JUDGE_MODES = ('official', 'efficient', 'offline')


@functools.lru_cache(maxsize=None)
def _verdict_patterns() -> tuple[re.Pattern, re.Pattern]:
    """The verdict regexes of dataset_specs/rbench.yaml judge.parse, compiled exactly as written there."""
    parse = load_spec('rbench')['judge']['parse']
    return re.compile(parse['pattern']), re.compile(parse['lone'])


def verdict_mentions(reply: str) -> list[str]:
    """Every score the reply states ('Score: 2', '**Score:** 1', 'score=0', 'Score: [2]'), in order, as written."""
    return _verdict_patterns()[0].findall(str(reply))


def parse_verdict(reply: str | None, allowed: Sequence[int]) -> int | None:
    """The judge's verdict in `allowed`, or None when the reply states none or is ambiguous (never a default 0).

    The official notebook reads the verdict from the end of the reply, where the requested format puts the judge's
    own 'Score: N' line. A reply that also states a different score elsewhere (the judge quoting the model's
    answer or the prompt) is ambiguous: None, so the call is asked again and, if it stays ambiguous, the score is
    counted as failed. A reply that is only a digit is the verdict itself.
    """
    if reply is None:
        return None
    text = str(reply)
    mentions = verdict_mentions(text)
    if not mentions:
        lone = _verdict_patterns()[1].match(text)
        return int(lone.group(1)) if lone and int(lone.group(1)) in allowed else None
    if len(set(mentions)) != 1 or not mentions[-1].isdigit():
        return None
    value = int(mentions[-1])
    return value if value in allowed else None


def official_last_char_verdict(reply: str, allowed: Sequence[int]) -> int:
    """The notebook's parse, kept only to compare against: the reply's last character, else 0."""
    last = str(reply)[-1:] if reply else ''
    return int(last) if last in {str(a) for a in allowed} else 0


# ----------------------------------------------------------------------------------------------- item data
def parse_choices(choice: str) -> dict[str, str]:
    """'A.running; B.Play football' -> {'A': 'running', 'B': 'Play football'} ({} for VQA/CAP's 'N')."""
    text = str(choice or '').strip()
    if not text or text == 'N':
        return {}
    # The release mostly writes 'A.x; B.y', once 'A.x;B:y' (item 140): accept ':' and a missing space.
    parts = re.split(r';\s*(?=[A-Z]\s*[.:])', text)
    options = {}
    for part in parts:
        m = re.match(r'\s*([A-Z])\s*[.:]\s*(.*)$', part, re.S)
        if not m:
            raise ValueError(f'R-Bench choice {choice!r}: cannot read option {part!r} (expected "A.text; B.text")')
        options[m.group(1)] = m.group(2).strip()
    return options


def parse_captions(text: str, where: str = 'CAP answer') -> list[str]:
    """A CAP answer cell ("['a cat ...', 'a dog ...']") -> list of captions. literal_eval/json only, never eval."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f'{where}: empty reference-caption list')
    value, errors = None, []
    for parser in (ast.literal_eval, json.loads):
        try:
            value = parser(text)
            break
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as err:
            errors.append(f'{parser.__module__}.{parser.__name__}: {err}')
    if value is None:
        raise ValueError(f'{where}: not a Python/JSON list of captions ({"; ".join(errors)}): {text[:120]!r}')
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(c, str) and c.strip() for c in value):
        raise ValueError(f'{where}: expected a non-empty list of caption strings, got {text[:120]!r}')
    return [c for c in value]


@dataclass(frozen=True)
class Item:
    """One R-Bench item (both variants) with the model's two outputs."""
    pair_id: int
    type: str
    question: str
    choice: str
    answer: str
    distortion: int
    strength: int
    pred_ref: str | None = None
    pred_dis: str | None = None
    name: str = ''

    def captions(self) -> list[str]:
        return parse_captions(self.answer, f'R-Bench item {self.pair_id} ({self.name}) column answer')


def _norm(text) -> str:
    """Lower case, whitespace collapsed, nothing else: the only normalisation under which a no-judge shortcut may
    call two texts equal. Punctuation is kept because it can change a number ('3.5' vs '35', '-1' vs '1',
    '1/2' vs '12', '10:30' vs '1030')."""
    return ' '.join(str(text).lower().split())


def certain_letter(output: str | None, options: dict[str, str]) -> str | None:
    """The option the output names beyond doubt: one bare letter ('C', 'C.', '(C)', 'C. Play tennis' with that
    option's exact text) or exactly one option's text. None when anything else is said."""
    if output is None or not options:
        return None
    text = str(output).strip()
    m = re.fullmatch(r'[(\[]?\s*([A-Z])\s*[)\].:]?', text)
    if m:
        return m.group(1) if m.group(1) in options else None
    m = re.fullmatch(r'[(\[]?\s*([A-Z])\s*[)\].:]\s*(.+)', text, re.S)
    if m and m.group(1) in options and _norm(m.group(2)) == _norm(options[m.group(1)]):
        return m.group(1)
    hits = [k for k, v in options.items() if _norm(v) and _norm(v) == _norm(text)]
    return hits[0] if len(hits) == 1 else None


# ------------------------------------------------------------------------------------------------ tasks
def _fill(template: str, **values: str) -> str:
    # Plain replacement (the notebook's f-string): values may contain braces.
    for k, v in values.items():
        template = template.replace('{' + k + '}', v)
    return template


def _text(value) -> str:
    return '' if value is None else str(value)


def caption_order(captions: dict[str, str]) -> list[str]:
    """Prompt ids of the reference captions in the order efficient mode samples them: by the SHA-256 of the
    caption text, a fixed pseudo-random order that does not depend on the model's output. Every caption is as
    likely to come first, so the sampled score is an unbiased estimate of the official mean for any judge; the
    release order is not (its first caption scores higher than the average one, benchmarks/rbench_judge_calls.md)."""
    return sorted(captions, key=lambda pid: hashlib.sha256(captions[pid].encode('utf-8')).hexdigest())


@dataclass
class RBenchJudgeTask:
    """One judged score of one item: prompts per call and the official/efficient decision rule.

    prompts: prompt id -> prompt text (one id 'q' for repeated prompts, 'cap1'..'capN' for captions)
    repeats: how many times each prompt is asked by the official protocol
    rule: 'majority' (0/1 verdicts, 1 iff more than half say 1) or 'sum_over_2n' (0/1/2 verdicts, sum/(2 calls))
    first_repeat: prompt id -> repeats of this very prompt text already asked by earlier tasks of the evaluation
        (official mode, see number_repeats): call ids continue from there, so identical prompts in two scores stay
        distinct calls as in the notebook. Efficient mode leaves it empty: identical prompts share verdicts.
    Efficient mode only (None: the official rule):
    certain: the score decided without the judge
    agree: repeats are asked one at a time; stop once the first `agree` verdicts agree (the remaining repeats are
        taken to agree) or, for majority, once the majority is reached
    caption_sample: CAP dis/ref: judge only this many reference captions, in caption_order (score = their mean)
    alias_of: key of a task with the very same prompts (dis when the model said exactly the same on both images
        reuses ref's verdicts); the caller runs the other task and copies its Step (resolve_aliases)
    """
    key: str
    prompts: dict[str, str]
    repeats: int
    rule: str
    allowed: tuple[int, ...]
    mode: str = 'official'
    certain: float | None = None
    agree: int | None = None
    caption_sample: int | None = None
    caption_order: tuple[str, ...] = ()
    first_repeat: dict[str, int] = field(default_factory=dict)
    reask: int = 2
    meta: dict = field(default_factory=dict)
    alias_of: str | None = None

    def prompt(self, call_id: str) -> str:
        prompt_id = call_id.split('#', 1)[0]
        if prompt_id not in self.prompts:
            raise KeyError(f'{self.key}: unknown call id {call_id!r}')
        return self.prompts[prompt_id]

    def call_id(self, prompt_id: str, k: int) -> str:
        """The id of the k-th repeat (1-based) of a prompt: '<prompt id>#r<n>'."""
        return f'{prompt_id}#r{self.first_repeat.get(prompt_id, 0) + k}'

    def decide_without_judge(self) -> float | None:
        return self.certain if self.mode == 'efficient' else None

    # -- verdict collection
    def _verdict_of(self, call_id: str, verdicts: dict[str, str]) -> tuple[int | None, str | None, str | None]:
        """(verdict, call id to re-ask, failure) for the logical call `call_id` and its re-asks."""
        tried = [call_id] + [f'{call_id}+{n}' for n in range(1, self.reask + 1)]
        for attempt in tried:
            if attempt not in verdicts:
                return None, attempt, None
            value = parse_verdict(verdicts[attempt], self.allowed)
            if value is not None:
                return value, None, None
        last = str(verdicts[tried[-1]])[:80]
        return None, None, (f'no unambiguous verdict in {self.allowed} in {len(tried)} replies to call {call_id} '
                            f'(last: {last!r})')

    def _collect(self, call_ids: list[str], verdicts: dict[str, str]):
        values, need = {}, []
        for cid in call_ids:
            value, ask, failure = self._verdict_of(cid, verdicts)
            if failure:
                return None, [], failure
            if ask:
                need.append(ask)
            else:
                values[cid] = value
        return values, need, None

    def _combine(self, values: list[int]) -> float:
        if self.rule == 'majority':
            return 1.0 if sum(values) * 2 > len(values) else 0.0
        return sum(values) / (2.0 * len(values))

    def step(self, verdicts: dict[str, str]) -> Step:
        if self.mode == 'efficient' and len(self.prompts) > 1 and self.caption_sample:
            return self._step_caption_sample(verdicts)
        if self.mode == 'efficient' and self.repeats > 1 and self.agree:
            return self._step_repeats(verdicts)
        call_ids = [self.call_id(p, k) for p in self.prompts for k in range(1, self.repeats + 1)]
        values, need, failure = self._collect(call_ids, verdicts)
        if failure:
            return Step(failed=failure)
        if need:
            return Step(need=need)
        return Step(score=self._combine([values[c] for c in call_ids]))

    def _step_caption_sample(self, verdicts: dict[str, str]) -> Step:
        # The first `caption_sample` captions in caption_order, one at a time (each asked once).
        chosen = list(self.caption_order or caption_order(self.prompts))[:self.caption_sample]
        asked = []
        for n, pid in enumerate(chosen, 1):
            value, ask, failure = self._verdict_of(self.call_id(pid, 1), verdicts)
            if failure:
                return Step(failed=failure)
            if ask:
                return Step(need=[ask], more=len(chosen) - n)
            asked.append(value)
        return Step(score=self._combine(asked))

    def _step_repeats(self, verdicts: dict[str, str]) -> Step:
        # Ask the repeats of the (single) prompt in order and stop as soon as they decide the score:
        # the first `agree` verdicts agree (the remaining repeats are taken to agree), or the majority is
        # already reached (MCQ). Otherwise fall back to all repeats and the official rule.
        (pid,) = self.prompts
        asked = []
        for k in range(1, self.repeats + 1):
            value, ask, failure = self._verdict_of(self.call_id(pid, k), verdicts)
            if failure:
                return Step(failed=failure)
            if ask:
                return Step(need=[ask], more=0 if self.agree <= 1 else self.repeats - k)   # 1: first decides
            asked.append(value)
            if len(asked) >= self.agree and len(set(asked)) == 1:
                return Step(score=self._combine([asked[0]] * self.repeats))
            if self.rule == 'majority':
                ones, zeros = sum(asked), len(asked) - sum(asked)
                if max(ones, zeros) * 2 > self.repeats:
                    return Step(score=1.0 if ones > zeros else 0.0)
        return Step(score=self._combine(asked))


def make_tasks(item: Item, dataset: str = 'R-Bench-Full', mode: str = 'official',
               kinds: Sequence[str] = SCORE_KINDS) -> list[RBenchJudgeTask]:
    """The judged scores of one item (keys '<dataset>|<pair_id>|<kind>'). Offline mode: see offline_judge.

    Efficient mode's rules come from dataset_specs/rbench.yaml judge.efficient (each listed there with the share
    of calls it saves)."""
    if mode not in ('official', 'efficient'):
        raise ValueError(f'R-Bench judge tasks: mode must be official or efficient, not {mode!r}')
    spec = load_spec('rbench')
    templates, protocol = spec['judge_prompts'], spec['judge']
    efficient = protocol['efficient'] if mode == 'efficient' else {}
    options = parse_choices(item.choice) if item.type == 'MCQ' else {}
    tasks = []
    for kind in kinds:
        rules = protocol['official']['com'][item.type] if kind == 'com' else protocol['official'][item.type]
        judged = _text(item.pred_dis if kind in ('dis', 'com') else item.pred_ref)
        truth = _text(item.pred_ref) if kind == 'com' else _text(item.answer)
        certain, order = None, ()
        if item.type == 'MCQ':
            prompts = {'q': _fill(templates['MCQ'], question=_text(item.question), answers=_text(item.choice),
                                  correct_ans=truth, answer=judged)}
            got = certain_letter(judged, options)
            want = certain_letter(truth, options) if kind == 'com' else truth.strip()
            if got is not None and want is not None and want in options:
                certain = 1.0 if got == want else 0.0
        elif item.type == 'VQA':
            prompts = {'q': _fill(templates['VQA'], question=_text(item.question), answer=judged,
                                  correct_ans=truth)}
            if _norm(judged) and _norm(judged) == _norm(truth):
                certain = 1.0
        elif item.type == 'CAP':
            refs = {'q': truth} if kind == 'com' else {f'cap{i}': c for i, c in enumerate(item.captions(), 1)}
            prompts = {pid: _fill(templates['CAP'], answer=judged, correct=ref) for pid, ref in refs.items()}
            order = tuple(caption_order(refs))
            if kind == 'com' and _norm(judged) and _norm(judged) == _norm(truth):
                certain = 1.0
        else:
            raise ValueError(f'R-Bench item {item.pair_id} ({item.name}): unknown type {item.type!r}')
        repeats = rules['calls'] if isinstance(rules['calls'], int) else 1
        alias = None
        if (efficient.get('reuse_identical_outputs') and kind == 'dis' and 'ref' in kinds
                and item.pred_dis is not None and item.pred_dis == item.pred_ref):
            alias = f'{dataset}|{item.pair_id}|ref'
        tasks.append(RBenchJudgeTask(
            key=f'{dataset}|{item.pair_id}|{kind}', prompts=prompts, repeats=repeats, rule=rules['rule'],
            allowed=tuple(rules['verdicts']), mode=mode,
            certain=certain if efficient.get('certain_shortcuts') else None,
            agree=efficient.get('agree'), caption_sample=efficient.get('caption_sample'), caption_order=order,
            meta={'pair_id': item.pair_id, 'kind': kind, 'type': item.type}, alias_of=alias))
    return tasks


def number_repeats(tasks: Sequence[RBenchJudgeTask]) -> None:
    """Official mode: give every repeat of a prompt text its own call id across the evaluation, in task order.

    The notebook asks each score's calls separately, also when two scores send the very same prompt (the same
    output on both images; the same question and output in two items): the first task asks '<id>#r1'..'#r5', the
    next one with that text '#r6'..'#r10', and so on. The verdict cache keys calls by prompt text and call id, so
    this keeps them distinct verdicts while a rerun (or a subset of the benchmark) still finds every one of them.
    """
    seen: dict[str, int] = {}
    for task in tasks:
        task.first_repeat = {}
        for pid, text in task.prompts.items():
            task.first_repeat[pid] = seen.get(text, 0)
            seen[text] = seen.get(text, 0) + task.repeats


def plan_tasks(tasks: Sequence[RBenchJudgeTask], share: bool | None = None
               ) -> tuple[list[RBenchJudgeTask], dict[str, str]]:
    """Prepare one evaluation's tasks for the runner: (tasks to run, {aliased key: key whose result it copies}).

    Official tasks get their repeats numbered (number_repeats). Efficient tasks share the verdicts of identical
    prompts when `share` (default: dataset_specs/rbench.yaml judge.efficient.share_identical_prompts), else they
    are numbered like official ones."""
    if share is None:
        share = bool(load_spec('rbench')['judge']['efficient'].get('share_identical_prompts'))
    number_repeats([t for t in tasks if t.mode == 'official' or not share])
    return split_aliases(tasks)


def split_aliases(tasks: Sequence[RBenchJudgeTask]) -> tuple[list[RBenchJudgeTask], dict[str, str]]:
    """(tasks to run, {aliased key: key whose result it copies})."""
    run = [t for t in tasks if t.alias_of is None]
    return run, {t.key: t.alias_of for t in tasks if t.alias_of is not None}


def resolve_aliases(results: dict[str, Step], aliases: dict[str, str]) -> dict[str, Step]:
    """Copy each aliased task's Step from the task it mirrors."""
    out = dict(results)
    for key, source in aliases.items():
        out[key] = results[source]
    return out


def official_calls(task: RBenchJudgeTask) -> int:
    """Calls the official protocol spends on this task (re-asks aside)."""
    return len(task.prompts) * task.repeats


def run_sync(tasks: Sequence[RBenchJudgeTask], judge: Callable[[str], str], mode: str = 'official',
             share: bool | None = None) -> tuple[dict[str, Step], int]:
    """Plan and run tasks with a local judge function through the real runner, no verdict cache (benchmarks and
    tests). Returns ({key: final Step, aliases included}, number of distinct judge calls)."""
    planned, aliases = plan_tasks(tasks, share=share)
    results, stats = run_tasks(planned, judge, VerdictCache(None, 'local', enabled=False), mode=mode, nproc=1,
                               retries=0, backoff=0, progress=False)
    return resolve_aliases(results, aliases), stats.calls_made
