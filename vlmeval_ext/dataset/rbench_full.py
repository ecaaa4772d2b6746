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

import pandas as pd

from vlmeval.dataset.image_base import ImageBaseDataset
from vlmeval.dataset.utils import build_judge
from vlmeval.smp import (LMUDataRoot, download_file, dump, get_intermediate_file_path, get_logger,
                         md5)
from vlmeval.utils import track_progress_rich

from .utils.exact_io import is_infer_fail, judge_id, load_progress, read_text_table
from .utils.rbench_full import (DEFAULT_JUDGE, ask, calls_of, evaluation_files, judge_protocol,
                                judge_requests, model_prompt, read_pairs, scored_rows)

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
        return judge_protocol(judge_kwargs, self.DEFAULT_JUDGE)

    @staticmethod
    def read_pairs(eval_file):
        """(items, row counts, failed rows) of a predictions file; no items is an error."""
        return read_pairs(read_text_table(eval_file), eval_file)

    def write_results(self, eval_file, counts, failed_rows, rows, judge, mode='official'):
        """_scores.csv, _robustness.csv and _score.json of the scored rows (those of efficient mode
        as <stem>_efficient_*); the robustness table."""
        files, table = evaluation_files(counts, failed_rows, rows, judge, mode)
        for name, content in files.items():
            suffix, fmt = name.rsplit('.', 1)
            dump(content, get_intermediate_file_path(eval_file, suffix, fmt))
        logger.info(f"R-Bench: {judge['label']}; {judge['calls']} judge verdicts "
                    f"({judge['calls_cached']} kept from this work dir); "
                    f"excluded scores {judge['failures']['excluded_scores']}")
        return table

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
        return scored_rows(items, plans, demands, key, todo, done, judge, name, mode,
                           caption_seed)
