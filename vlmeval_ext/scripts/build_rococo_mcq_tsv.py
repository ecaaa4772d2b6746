"""Build RoCOCO-MCQ-<attack>.tsv, VLMEvalKit's multiple-choice recast of RoCOCO, from the official
annotations and COCO val2014.

RoCOCO (Park et al. 2023, github.com/pseulki/rococo) publishes annotation files: a JSON list of
{"image": "val2014/COCO_val2014_....jpg", "caption": [...]} with the image's ground-truth captions
followed by its adversarial captions (caption k with one word replaced): same_concept.json,
diff_concept.json, rand_voca.json, danger.json. The images are COCO's. Run

    python scripts/build_rococo_mcq_tsv.py --annotation same_concept.json --coco-root COCO \
        --out RoCOCO-MCQ-same_concept.tsv

(COCO holding val2014/). This recast is not the authors' benchmark: each image becomes one
question with four options, its first ground-truth caption, that caption's adversarial twin and
two ground-truth captions of other images, drawn with numpy's default_rng([2023, image row]) (an
item does not depend on which other items are built), in a shuffled order. Every caption goes
through the official pre_caption (BLIP's), so the twin cannot be spotted by case or punctuation.
Each row holds the COCO file's bytes unchanged (base64). The script prints the TSV's md5, the
`DATASET_MD5` of vlmeval/dataset/rococo_mcq.py.
"""
import argparse
import base64
import csv
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MAX_WORDS = 30
SEED = 2023
N_OPTIONS = 4
# entry length -> ground-truth captions (the rest are adversarial), as the official loader decides
GROUND_TRUTH_COUNT = {5: 5, 6: 6, 10: 5, 11: 6}
COLUMNS = ['index', 'image', 'question', 'A', 'B', 'C', 'D', 'answer', 'twin', 'attack',
           'coco_image', 'answer_text_row', 'twin_text_row']
_PUNCT = re.compile(r'([.!"()*#:;~])')
_SPACES = re.compile(r'\s{2,}')


def pre_caption(caption, max_words=MAX_WORDS):
    """The official BLIP/RoCOCO normalisation: lower case, .!"()*#:;~ to spaces, runs of spaces
    collapsed, at most max_words words."""
    text = _PUNCT.sub(' ', caption.lower())
    text = _SPACES.sub(' ', text)
    text = text.rstrip('\n').strip(' ')
    words = text.split(' ')
    if len(words) > max_words:
        text = ' '.join(words[:max_words])
    return text


@dataclass
class Annotation:
    """One annotation file flattened in file order: texts[t] belongs to image text_image[t];
    is_ground_truth[t] says whether it is an original caption; twin_of[t] is, for an adversarial
    caption, the ground-truth caption it was made from (else -1)."""
    path: str
    images: list
    texts: list
    raw_texts: list
    text_image: np.ndarray
    is_ground_truth: np.ndarray
    twin_of: np.ndarray
    ground_truth: list = field(repr=False)

    @property
    def n_images(self):
        return len(self.images)

    @property
    def n_texts(self):
        return len(self.texts)

    @property
    def has_adversarial(self):
        return bool((~self.is_ground_truth).any())


def flatten(entries, source, max_words=MAX_WORDS):
    """The Annotation of a list of {"image", "caption": [...]} entries (each of a length in
    GROUND_TRUTH_COUNT)."""
    images, texts, raw, text_image, is_gt, twin_of, gts = [], [], [], [], [], [], []
    for i, entry in enumerate(entries):
        captions = entry['caption']
        n_gt = GROUND_TRUTH_COUNT[len(captions)]
        first = len(texts)
        gts.append(list(range(first, first + n_gt)))
        for k, caption in enumerate(captions):
            raw.append(caption)
            texts.append(pre_caption(caption, max_words))
            text_image.append(i)
            is_gt.append(k < n_gt)
            # adversarial caption j (0..4) is ground-truth caption j with one word replaced
            twin_of.append(first + (k - n_gt) if k >= n_gt else -1)
        images.append(entry['image'])
    return Annotation(path=source, images=images, texts=texts, raw_texts=raw,
                      text_image=np.asarray(text_image, dtype=np.int64),
                      is_ground_truth=np.asarray(is_gt, dtype=bool),
                      twin_of=np.asarray(twin_of, dtype=np.int64), ground_truth=gts)


def build_items(ann, attack, question, letters, seed=SEED, n_options=N_OPTIONS, rows=None):
    """One item per image row (all, or `rows`): the options drawn and shuffled with
    default_rng([seed, row])."""
    twin_of_gt = {int(ann.twin_of[t]): int(t) for t in np.flatnonzero(ann.twin_of >= 0)}
    ground_truth = np.flatnonzero(ann.is_ground_truth)
    items = []
    for i in (range(ann.n_images) if rows is None else rows):
        rng = np.random.default_rng([seed, int(i)])
        gt = ann.ground_truth[i][0]
        twin = twin_of_gt[gt]
        others = ground_truth[ann.text_image[ground_truth] != i]
        distractors = rng.choice(others, size=n_options - 2, replace=False).tolist()
        options = [gt, twin] + distractors
        order = rng.permutation(n_options)
        shuffled = [options[k] for k in order]
        item = {'index': int(i), 'image_path': ann.images[i], 'attack': attack,
                'question': question, 'answer': letters[shuffled.index(gt)],
                'twin': letters[shuffled.index(twin)], 'answer_text_row': int(gt),
                'twin_text_row': int(twin)}
        for letter, t in zip(letters, shuffled):
            item[letter] = ann.texts[t]
        items.append(item)
    return items


def tsv_record(item, image, letters):
    """The TSV row of one item; `image` is its base64 text or the image file's Path (encoded when
    the row is written)."""
    record = {'index': item['index'], 'image': image, 'question': item['question']}
    record.update({c: item[c] for c in letters})
    record.update(answer=item['answer'], twin=item['twin'], attack=item['attack'],
                  coco_image=item['image_path'], answer_text_row=item['answer_text_row'],
                  twin_text_row=item['twin_text_row'])
    return record


def write_rows(columns, rows, f):
    """Tab-separated, every cell quoted, to an open text file (newline=''). An image cell holding
    a Path is read and base64-encoded as its row is written: memory holds one image."""
    writer = csv.writer(f, delimiter='\t', quoting=csv.QUOTE_ALL, lineterminator='\n')
    writer.writerow(columns)
    at = columns.index('image') if 'image' in columns else -1
    for row in rows:
        if at >= 0 and isinstance(row[at], Path):
            encoded = base64.b64encode(row[at].read_bytes()).decode('ascii')
            row = (*row[:at], encoded, *row[at + 1:])
        writer.writerow(row)


def build(annotation, coco_root, out, attack=None):
    """RoCOCO-MCQ-<attack>.tsv from an attack annotation file and COCO."""
    from vlmeval.dataset.utils.rococo_mcq import LETTERS, QUESTION   # the dataset's own prompt
    attack = attack or Path(annotation).stem
    with open(annotation, encoding='utf-8') as f:
        ann = flatten(json.load(f), str(annotation))
    letters = LETTERS[:N_OPTIONS]
    items = build_items(ann, attack, QUESTION, letters)
    rows = (tuple(tsv_record(item, Path(coco_root) / item['image_path'], letters)[c]
                  for c in COLUMNS) for item in items)
    tmp = str(out) + '.partial'
    with open(tmp, 'w', encoding='utf-8', newline='') as f:
        write_rows(COLUMNS, rows, f)
    os.replace(tmp, out)
    print(f'wrote {len(items)} RoCOCO-MCQ-{attack} questions to {out}')


def main(argv=None):
    parser = argparse.ArgumentParser(
        description='Build RoCOCO-MCQ-<attack>.tsv from a RoCOCO annotation file and COCO.')
    parser.add_argument('--annotation', required=True,
                        help='same_concept.json, diff_concept.json, rand_voca.json or danger.json')
    parser.add_argument('--coco-root', required=True, help='the folder holding val2014/')
    parser.add_argument('--out', required=True, help='the TSV to write')
    args = parser.parse_args(argv)
    from vlmeval.smp import md5    # the kit's, as DATASET_MD5 is checked
    build(args.annotation, args.coco_root, args.out)
    print(f'md5 {md5(args.out)}')


if __name__ == '__main__':
    main()
