"""R-Bench's judge protocol run in one thread over items, from the kit dialect's own pure steps
(vlmeval_ext/dataset/utils/rbench_full.py: plan_score, prompt_demands, ask, assign, combine), exactly as
RBenchFull.score_items chains them, minus the kit's progress file and thread pool. Used by the protocol tests
and by benchmarks/rbench_judge_calls.py, where 22,277 calls through the kit's track_progress_rich would spend
minutes rewriting its progress file."""
from __future__ import annotations

from vlmeval_ext.dataset.utils.rbench_full import NEEDS
from vlmeval_ext.dataset.utils import rbench_full as B

KINDS = B.KINDS


class FunctionJudge:
    """A judge whose reply is a function of the prompt (the `generate` a kit judge has); counts its calls."""

    def __init__(self, reply):
        self.reply, self.calls = reply, 0

    def generate(self, prompt):
        self.calls += 1
        return self.reply(prompt)


def plans_of(items, mode, kinds=KINDS, caption_seed=0):
    """The Score plans of every scorable kind of every item (as RBenchFull.score_items builds them); efficient mode
    draws its captions with `caption_seed`."""
    return [B.plan_score(item, kind, mode, caption_seed) for item in items for kind in kinds
            if all(item[c] is not None for c in NEEDS[kind])]


def run_plans(plans, judge, mode):
    """{key: score or failure text}, and the calls made."""
    demands = B.prompt_demands(plans, mode)
    answers = {p: B.ask(judge, p, scale, needs) for p, (scale, needs, _) in demands.items()}
    got = B.assign(demands, answers)
    by_key = {p.key: p for p in plans}
    scores = {k: v if isinstance(v, str) else B.combine(by_key[k], v, mode) for k, v in got.items()}
    return scores, sum(a['calls'] for a in answers.values())


def run_protocol(items, reply, mode='official', kinds=KINDS, caption_seed=0):
    """Score every item with a judge replying `reply(prompt)`: ({'<pair_id>|<kind>': score}, calls)."""
    return run_plans(plans_of(items, mode, kinds, caption_seed), FunctionJudge(reply), mode)


def table_rows(items, scores):
    """The rows rbench_table reads (a failed score is None)."""
    def value(key):
        v = scores.get(key)
        return None if isinstance(v, str) else v
    return [{'name': it['name'], 'type': it['type'], 'distortion': it['distortion'], 'strength': it['strength'],
             **{f'score_{k}': value(f"{it['pair_id']}|{k}") for k in KINDS}} for it in items]
