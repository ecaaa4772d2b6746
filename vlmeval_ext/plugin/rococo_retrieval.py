"""RoCOCO retrieval's plugin half: what vlmeval-ext adds to the kit-dialect dataset
(vlmeval_ext/dataset/rococo_retrieval.py).

Its `Report`: the summary row, the run record, the 95 % intervals (Korn-Graubard with the images as clusters,
text-to-image averaged over the mixing seeds), the ranks `compare` reads and the report page's section (top 5 per
query); `RoCOCORetrievalSteps`, what the plugin's dataset class adds to the kit dialect's steps. Embedding models
rank, so there is no naive answer. Kit-free.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from vlmeval_ext.io import stem_path
from vlmeval_ext.plugin.base import Report, read_table
from vlmeval_ext.records.compare import Headline, item_table
from vlmeval_ext.records.intervals import Intervals, korn_graubard
from vlmeval_ext.records.report_html import Section, col, read_file


SMOKE_TEST_NOTE = ('RoCOCO-Smoke-Hash is a weight-free smoke test of the pipeline, not a model: its recalls are '
                   'about chance level and are never compared with the paper')


RETRIEVAL_QUERIES = 1000        # queries of a retrieval run shown per seed (the page says how many there are)


class RoCOCORetrievalReport(Report):
    HEADLINE = (('R@1', ('metrics', 'R@1'), '%'), ('false rate', ('metrics', 'false_rate'), '%'))

    def intervals(self, eval_file, score, tag=''):
        return item_intervals(read_table(stem_path(eval_file, '_ranks.tsv')))

    def interval_rows(self, score):
        from vlmeval_ext.records.intervals import leaf
        seeds = list((score.get('per_seed') or {}))
        return [leaf(score.get('ci95'), ['metrics', 'R@1'])] + [leaf(score.get('ci95'), ['per_seed', s, 'R@1'])
                                                               for s in seeds]

    def summary_row(self, score):
        row = {}
        for name, value in (score.get('metrics') or {}).items():
            if isinstance(value, (int, float)) or value is None:
                row[f'{name.replace("false_rate", "false rate")} (%)'] = value
        row.update({'direction': score.get('direction'), 'images': score.get('n_images'),
                    'texts': score.get('n_texts')})
        return row

    def rule_files(self, dataset, data, eval_file, judge_kwargs):
        from vlmeval_ext.dataset.utils import rococo_retrieval as rules
        files = rules.evaluation_files(data, dataset, eval_file)
        return files, rules.result_table(dataset, files['_acc.csv'])

    def extend_score(self, dataset, eval_file, score):
        from vlmeval_ext import run_context
        from vlmeval_ext.evaluation import self_model
        from vlmeval_ext.registry import SMOKE_TEST_MODELS
        if self_model(eval_file, dataset) in SMOKE_TEST_MODELS:
            score['note'] = SMOKE_TEST_NOTE
            run_context.current().say_once(f'[RoCOCO] {SMOKE_TEST_NOTE}')

    def run_record(self, dataset):
        return {'judge': {'model': None, 'mode': 'embedding ranking', 'retries': 0, 'endpoint_host': None}}


def clustered_ratio(hits: np.ndarray, who: np.ndarray, seeds: np.ndarray, n_clusters: int) -> tuple:
    """(mean over seeds of each seed's hit rate, its variance, df, clusters): the linearized (ratio-estimator)
    variance with the images as clusters, every seed's rate linearized and averaged within each image."""
    z = np.zeros(n_clusters)
    rates = []
    labels = np.unique(seeds)
    for s in labels:
        sel = seeds == s
        y = np.bincount(who[sel], weights=hits[sel], minlength=n_clusters)
        m = np.bincount(who[sel], minlength=n_clusters).astype(float)
        rate = y.sum() / m.sum()
        rates.append(rate)
        z += (y - rate * m) / (m.sum() / n_clusters) / len(labels)
    n = n_clusters
    var = float((z ** 2).sum() / (n * (n - 1))) if n > 1 else 0.0
    return float(np.mean(rates)), var, float(n - 1), n


def item_intervals(ranks: pd.DataFrame) -> dict:
    """RoCOCO retrieval from `_ranks.tsv`: R@1/5/10, R_mean and the false rate, Korn-Graubard on the images as
    clusters; text-to-image: the mean over the mixing seeds, and `per_seed` gets its own intervals."""
    clusters = ranks['cluster'].astype(int).to_numpy()
    ids, inverse = np.unique(clusters, return_inverse=True)
    seeds = ranks['seed'].astype(str).to_numpy()
    iv = Intervals(len(ids), {'method': 'korn-graubard', 'clusters': 'images', 'unit': 'images'})
    rank = ranks['rank'].astype(int).to_numpy()
    hits = {'R@1': rank < 1, 'R@5': rank < 5, 'R@10': rank < 10,
            'false_rate': ranks['top1_false'].astype(int).to_numpy() == 1}
    hits = {k: v.astype(float) for k, v in hits.items()}
    hits['R_mean'] = (hits['R@1'] + hits['R@5'] + hits['R@10']) / 3
    for key in ('R@1', 'R@5', 'R@10', 'R_mean', 'false_rate'):
        mean, var, df, n = clustered_ratio(hits[key], inverse, seeds, len(ids))
        iv.put(['metrics', key], korn_graubard(mean, var, n, df, 100.0), len(ids))
        if len(set(seeds)) > 1:
            for s in sorted(set(seeds)):
                sel = seeds == s
                m, v, d, k = clustered_ratio(hits[key][sel], inverse[sel], seeds[sel], len(ids))
                iv.put(['per_seed', s, key], korn_graubard(m, v, k, d, 100.0), len(ids))
    return iv.block(None)


def read_headlines(eval_file: Path, tag: str = '') -> list[Headline]:
    ranks = item_table(Path(stem_path(eval_file, '_ranks.tsv')))
    keys = (ranks['seed'] + '|' + ranks['query']).tolist()
    seeds = ranks['seed'].to_numpy()
    clusters = ranks['cluster'].astype(int).to_numpy()
    rank = ranks['rank'].astype(int).to_numpy()
    return [Headline(name, '%', keys, values.astype(float), np.zeros(len(keys), int), clusters, binary=True,
                     groups=seeds if len(set(seeds)) > 1 else None, clustered=True)
            for name, values in (('R@1', rank < 1), ('R@5', rank < 5), ('R@10', rank < 10),
                                 ('false rate', ranks['top1_false'].astype(int).to_numpy() == 1))]


def page_section(title, dataset, eval_file, tag, thumbs) -> Section | None:
    ranks, preds = read_file(stem_path(eval_file, '_ranks.tsv')), read_file(eval_file)
    if ranks is None or preds is None:
        return None
    texts = preds[preds['kind'] == 'text'].sort_values('item', key=lambda s: s.astype(int))
    images = preds[preds['kind'] == 'image'].sort_values('item', key=lambda s: s.astype(int))
    caption = dict(zip(texts['item'], texts['question']))
    truth = dict(zip(texts['item'], texts['ground_truth']))
    owner = dict(zip(texts['item'], texts['image_row']))
    originals = images[images['seed'] == '0']
    n = len(originals)
    image_index = {s: list(g['index']) for s, g in images.groupby('seed')}
    i2t = dataset.startswith('RoCOCO-I2T')
    rows, total = [], len(ranks)
    for seed, part in ranks.groupby('seed', sort=False):
        for r in part.head(RETRIEVAL_QUERIES).to_dict('records'):
            top = [t for t in r['top5'].split(';') if t]
            if i2t:
                query = {'images': thumbs.of(dataset, originals['index'].iloc[int(r['query'])])}
                found = [f"{caption.get(t, '?')} [{'ground truth' if truth.get(t) == 'yes' else 'adversarial'}]"
                         for t in top]
            else:
                query = {'text': caption.get(r['query'], '')}
                gallery = image_index['0'] + image_index.get(seed, [])
                found = [f"image {t}" + (' [ground truth]' if t == owner.get(r['query']) else ' [mixed]'
                                         if int(t) >= n else '') for t in top]
            rows.append({'seed': seed, 'query_id': r['query'], 'images': query.get('images', []),
                         'query': query.get('text', ''), 'rank': int(r['rank']) + 1, 'top5': found,
                         'top1': 'false (adversarial or mixed)' if r['top1_false'] == '1' else 'ok',
                         **({'top5_images': [next(iter(thumbs.of(dataset, gallery[int(t)])), None)
                                             if int(t) < len(gallery) else None for t in top]} if not i2t else {})})
    columns = [col('seed', 'seed'), col('query_id', 'query'), col('images', 'query image', 'images'),
               col('query', 'query caption'), col('rank', 'rank of the ground truth', 'number'),
               col('top5', 'top 5', 'list'), col('top1', 'top 1')]
    if not i2t:
        columns.insert(6, col('top5_images', 'top 5 images', 'images'))
    note = (f'the first {RETRIEVAL_QUERIES:,} queries of each seed are shown ({total:,} in all)'
            if len(rows) < total else '')
    return Section(title, 'RoCOCO retrieval', columns, rows, [{'key': 'seed', 'label': 'seed'},
                                                              {'key': 'top1', 'label': 'top 1'}], note, total)


class RoCOCORetrievalSteps:
    """RoCOCO retrieval's steps in front of the plugin's common ones (`datasets.plugin_class_of` puts this class
    before `PluginDataset` and the kit-dialect `RoCOCORetrieval`): the gallery's caption rows hold no image, so the
    loading checks ask for one only on image rows, and an image cell that does not decode is one line naming its
    row. Kit-free to import; the methods run where the kit runs the dataset."""

    def image_rows(self, data):
        from vlmeval_ext.io import DataError
        kinds = {str(k) for k in data['kind']}
        if not kinds <= {'image', 'text'}:
            raise DataError(f'{self.data_path}: column \'kind\' must be image or text, found {sorted(kinds)}')
        return [str(k) == 'image' for k in data['kind']]

    def validated(self, data, path):
        # The kit dialect's load_data keeps the image column aside (caption rows have none): checked with it.
        table = super().validated(data.assign(image=self._images.values), path)
        self._images = table.pop('image')
        return table

    def load_data(self, dataset):
        if self._from_predictions:
            self._images = pd.Series(dtype=object)
        return super().load_data(dataset)

    def dump_image(self, line):
        from vlmeval_ext.dataset.rococo_retrieval import RoCOCORetrieval
        from vlmeval_ext.loading import BadImageCell, safe_join
        self.image_folder()
        safe_join(self.img_root, f'{line["index"]}.jpg', f'{self.data_path}: index {line["index"]}')
        try:
            return RoCOCORetrieval.dump_image(self, line)
        except (ValueError, OSError) as err:     # not base64, or not an image
            raise BadImageCell(f'{self.data_path}: index {line["index"]}, column \'image\': not a decodable base64 '
                               f'image ({type(err).__name__}: {str(err)[:80]})') from err


REPORT = RoCOCORetrievalReport(read_headlines, page_section)
