"""R-Bench-Full: are LMMs robust to real-world corruptions? (Li et al. 2024, arXiv 2410.05474).

1,485 MCQ / VQA / CAP items, each asked on a reference and on a distorted image (33
distortions, 3 strengths): 2,970 rows sharing a `pair_id`. The kit's R-Bench-Dis / R-Bench-Ref
hold the MCQ third as two separate accuracies; this dataset scores all three tasks with the
paper's GPT judge protocol and reports absolute and relative robustness by task, strength, the
7 steps and the 7 groups. R-Bench-Full-MCQ / -VQA / -CAP are the task subsets of the same TSV.

Judge arguments: `judge_mode` official (the paper's protocol, default) or efficient, an extension
of ours, not the paper's protocol: repeats are stopped once the score is settled (a 0/1/2 score
at its first verdict, an MCQ majority once three verdicts agree) and each CAP score judges one
reference caption drawn with the run's `caption_seed` (random unless given, kept by a resumed run,
recorded in the score file). Over the judge's noise and the draw its expected score equals
official mode's in every cell, at 0.333 of the calls. Efficient results are written as
<stem>_efficient_*, beside the official ones.
"""
import os
import os.path as osp
from urllib.parse import urlsplit

import pandas as pd

from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.dataset.utils import build_judge
from vlmeval.smp import (LMUDataRoot, download_file, dump, get_intermediate_file_path, get_logger,
                         md5)
from vlmeval.utils import track_progress_rich

from .utils.exact_io import is_infer_fail, judge_id, load_progress, read_text_table
from .utils.rbench_full import (DEFAULT_JUDGE, KINDS, ask, assign, calls_of, combine,
                                judge_requests, model_prompt, pair_rows, rbench_table,
                                result_table)

logger = get_logger(__name__)


def resolve_caption_seed(given, done, path):
    """Efficient mode's caption seed: the one given (judge argument `caption_seed`), else the one
    this evaluation's progress file holds (a resumed run keeps its draws), else a fresh random one,
    saved there before any call. It is recorded in the score file's judge block."""
    saved = done.get('caption_seed')
    if given is not None:
        seed = int(given)
        if saved is not None and int(saved) != seed:
            raise ValueError(f'{path} was started with caption_seed {saved}, not {seed}: pass '
                             f'{saved} to resume it, or delete the file to start afresh')
    elif saved is not None:
        seed = int(saved)
    else:
        seed = int.from_bytes(os.urandom(4), 'big')
    if saved is None:
        done['caption_seed'] = seed
        dump(done, path)
    return seed


SUBSETS = {'R-Bench-Full-MCQ': 'MCQ', 'R-Bench-Full-VQA': 'VQA', 'R-Bench-Full-CAP': 'CAP'}
SCORE_COLUMNS = ['pair_id', 'name', 'type', 'distortion', 'strength', 'score_ref', 'score_dis',
                 'score_com', 'verdicts_ref', 'verdicts_dis', 'verdicts_com']


class RBenchFull(ImageBaseDataset):
    TYPE = 'VQA'
    DATASET_URL = {'R-Bench-Full': '', **{name: '' for name in SUBSETS}}
    DATASET_MD5 = {}
    DEFAULT_JUDGE = DEFAULT_JUDGE
    # The paper's prompts (MCQ options, the caption instruction) are part of the benchmark: models
    # must not replace them with their own.
    force_use_dataset_prompt = True

    def load_data(self, dataset):
        split = 'R-Bench-Full' if dataset in SUBSETS else dataset
        path = osp.join(LMUDataRoot(), f'{split}.tsv')
        expected = self.DATASET_MD5.get(split)
        if not osp.exists(path) or (expected and md5(path) != expected):
            if not self.DATASET_URL.get(split):
                raise FileNotFoundError(f'{path} not found (and no DATASET_URL for {split})')
            download_file(self.DATASET_URL[split], path)
            if expected and md5(path) != expected:
                raise ValueError(f"{path}: the downloaded file's md5 is not {expected}")
        self.data_path = path
        data = pd.read_csv(path, sep='\t', dtype=str, keep_default_na=False)
        if dataset in SUBSETS:
            data = data[data['type'] == SUBSETS[dataset]].reset_index(drop=True)
        return data

    def post_build(self, dataset):  # the subsets share the full split's images
        self.img_root = osp.join(LMUDataRoot(), 'images',
                                 'R-Bench-Full' if dataset in SUBSETS else dataset)

    def build_prompt(self, line):
        if isinstance(line, int):
            line = self.data.iloc[line]
        message = [dict(type='image', value=p) for p in self.dump_image(line)]
        text = model_prompt(line['type'], question=line['question'], choice=line['choice'])
        return message + [dict(type='text', value=text)]

    @classmethod
    def report_primary_metric(cls, metrics):
        """The headline for the kit's run summary: absolute robustness Overall (0-1), by name."""
        for key, value in (metrics or {}).items():
            if str(key).endswith('=absolute|Overall (0-1)'):
                return {'absolute robustness Overall (0-1)': value}
        return {}

    @classmethod
    def report_infer_err(cls, prediction_file):
        if prediction_file is None or not osp.exists(prediction_file):
            return dict(failed=0, total=0)
        data = read_text_table(prediction_file)
        return dict(failed=sum(map(is_infer_fail, data['prediction'])), total=len(data))

    def evaluate(self, eval_file, **judge_kwargs):
        """Judge score_dis / score_ref / score_com per item; writes _scores.csv, _robustness.csv
        and _score.json; returns the robustness table."""
        name, protocol = self.judge_protocol(judge_kwargs)
        items, counts, failed_rows = self.read_pairs(eval_file)
        judge = build_judge(model=name, **judge_kwargs)
        rows, block = self.score_items(items, eval_file, judge, name, **protocol)
        return self.write_results(eval_file, counts, failed_rows, rows, block, protocol['mode'])

    def judge_protocol(self, judge_kwargs):
        """(judge name, protocol arguments of score_items), popped from `judge_kwargs`: what is
        left is for build_judge."""
        name = judge_kwargs.pop('model', None) or self.DEFAULT_JUDGE
        mode = judge_kwargs.pop('judge_mode', 'official')
        if mode not in ('official', 'efficient'):
            raise ValueError(f'judge_mode must be official or efficient, not {mode!r}')
        if name == 'exact_matching':
            raise ValueError('R-Bench needs an LLM judge (pass --judge MODEL)')
        return name, dict(mode=mode, nproc=judge_kwargs.pop('nproc', 4),
                          caption_seed=judge_kwargs.pop('caption_seed', None))

    @staticmethod
    def read_pairs(eval_file):
        """(items, row counts, failed rows) of a predictions file; no items is an error."""
        items, counts, failed_rows = pair_rows(read_text_table(eval_file), eval_file)
        if not items:
            raise ValueError(f'{eval_file}: no predictions')
        return items, counts, failed_rows

    def write_results(self, eval_file, counts, failed_rows, rows, judge, mode='official'):
        """_scores.csv, _robustness.csv and _score.json of the scored rows (those of efficient mode
        as <stem>_efficient_*); the robustness table."""
        tag = '_efficient' if mode == 'efficient' else ''
        complete = sum(all(r[f'score_{k}'] is not None for k in KINDS) for r in rows)
        counts = dict(items=len(rows), rows=counts['rows'], scored=complete,
                      empty=counts['empty'], inference_failures=counts['inference_failures'],
                      missing_partner=counts['missing_partner'],
                      judge_failures=judge['failures']['judge_failed_scores'])
        excluded = {f'score_{k}': sum(r[f'score_{k}'] is None for r in rows)
                    for k in ('ref', 'dis', 'com')}
        judge['failures'].update(inference_failed_rows=counts['inference_failures'],
                                 missing_partner_items=counts['missing_partner'],
                                 excluded_scores=excluded, failed_rows=failed_rows)
        table = rbench_table(rows)
        dump(pd.DataFrame(rows, columns=SCORE_COLUMNS),
             get_intermediate_file_path(eval_file, f'{tag}_scores', 'csv'))
        dump(pd.DataFrame([{'dimension': d, 'absolute (0-1)': table['absolute'][d],
                            'relative (0-1)': table['relative'][d]} for d in table['absolute']]),
             get_intermediate_file_path(eval_file, f'{tag}_robustness', 'csv'))
        dump(dict(absolute=table['absolute'], relative=table['relative'], judge=judge,
                  failed=excluded, items=len(rows), counts=counts),
             get_intermediate_file_path(eval_file, f'{tag}_score', 'json'))
        logger.info(f"R-Bench: {judge['label']}; {judge['calls']} judge verdicts "
                    f"({judge['calls_cached']} kept from this work dir); "
                    f'excluded scores {excluded}')
        return result_table(table, rows)

    def score_items(self, items, eval_file, judge, name, mode='official', nproc=4,
                    caption_seed=None):
        """(per-item rows with score_dis / score_ref / score_com, the judge block)."""
        tmp = get_intermediate_file_path(eval_file, '_rbench_judge', 'pkl')
        done = load_progress(tmp, logger)
        if mode == 'efficient':
            caption_seed = resolve_caption_seed(caption_seed, done, tmp)
        plans, demands, key, todo = judge_requests(items, mode, caption_seed, done,
                                                   judge_id(name, judge), eval_file)
        if todo and not judge.working():
            raise RuntimeError(f'the judge {name} does not answer (judge.working() is False): set '
                               'its key (OPENAI_API_KEY) and endpoint (--judge-base-url), or pass '
                               'another --judge')
        if todo:
            calls = sum(calls_of(demands, p) for p in todo)
            upto = 'up to ' if mode == 'efficient' else ''
            print(f'{self.dataset_name}: {len(todo)} of {len(demands)} distinct prompts to judge '
                  f'({upto}{calls} judge calls, {mode} mode; {len(demands) - len(todo)} judged in '
                  f'{osp.basename(tmp)}); the bar counts prompts',
                  flush=True)
            stem = osp.splitext(osp.basename(eval_file))[0]
            results = track_progress_rich(ask, [(judge, p, *demands[p][:2]) for p in todo],
                                          nproc=nproc, save=tmp, keys=[key[p] for p in todo],
                                          desc=f'Judge {name} on {stem} (prompts)')
            done.update((key[p], result) for p, result in zip(todo, results))
        answers = {p: done[key[p]] for p in demands}
        by_key = {p.key: p for p in plans}
        got = assign(demands, answers)
        rows = []
        for item in items:
            row = {c: item[c] for c in ('pair_id', 'name', 'type', 'distortion', 'strength')}
            for kind in KINDS:
                k = f"{item['pair_id']}|{kind}"
                verdicts = got.get(k)
                if isinstance(verdicts, list):
                    score = combine(by_key[k], verdicts, mode)
                    text = ';'.join(','.join(map(str, v)) for v in verdicts)
                else:  # a failed judge call (its reason), or an output the kit failed to get
                    score, text = None, verdicts or ''
                row[f'score_{kind}'], row[f'verdicts_{kind}'] = score, text
            rows.append(row)
        failed = sorted(k for k, v in got.items() if isinstance(v, str))
        asked = sum(answers[p]['calls'] for p in todo)
        calls = sum(a['calls'] for a in answers.values())
        block = dict(model=name, name=name, mode=mode, label=f'judge {name} ({mode} mode)',
                     endpoint_host=urlsplit(str(getattr(judge, 'api_base', ''))).hostname,
                     calls=calls, calls_made=asked, calls_cached=calls - asked,
                     calls_per_item=round(calls / len(items), 4),
                     call_failures=sum(answers[p]['failed'] is not None for p in todo),
                     failed_keys=failed[:50], failures=dict(judge_failed_scores=len(failed)),
                     items=len(items))
        if mode == 'efficient':
            block['caption_seed'] = caption_seed
        return rows, block
