"""Read the released R-Bench question bank together with a model's ref/dis output files (official CSV layout:
an unnamed index column, name, answer (= the model's output), type, distortion, strength; same row order)."""
from __future__ import annotations

import csv
from pathlib import Path

from vlmeval_ext.rbench.data import read_question_bank
from vlmeval_ext.rbench.score import Item


def read_outputs(path: str | Path, bank: list[dict]) -> list[str]:
    """Model outputs in release order; checks every row's name/type against the question bank."""
    path = Path(path)
    with open(path, encoding='utf-8', newline='') as f:
        rows = list(csv.DictReader(f))
    if len(rows) != len(bank):
        raise ValueError(f'{path}: {len(rows)} rows, the question bank has {len(bank)}')
    for i, (row, item) in enumerate(zip(rows, bank), 1):
        for col in ('name', 'type'):
            if row.get(col) != item[col]:
                raise ValueError(f'{path} row {i} column {col}: {row.get(col)!r} != question bank {item[col]!r}')
    return [row['answer'] for row in rows]


def load_items(bank_csv: str | Path, ref_csv: str | Path | None, dis_csv: str | Path | None) -> list[Item]:
    bank = read_question_bank(bank_csv)
    ref = read_outputs(ref_csv, bank) if ref_csv else [None] * len(bank)
    dis = read_outputs(dis_csv, bank) if dis_csv else [None] * len(bank)
    return [Item(pair_id=i, type=b['type'], question=b['question'], choice=b['choice'], answer=b['answer'],
                 distortion=b['distortion'], strength=b['strength'], pred_ref=r, pred_dis=d, name=b['name'])
            for i, (b, r, d) in enumerate(zip(bank, ref, dis))]


def llava15_items(fixtures_dir: str | Path) -> list[Item]:
    """The real question bank with LLaVA-1.5's outputs on both images, from the shared fixtures' layout."""
    fx = Path(fixtures_dir)
    return load_items(fx / 'Ref_Release.csv', fx / 'llava15_ref.csv', fx / 'llava15_dis.csv')


def read_official_results(path: str | Path) -> list[float]:
    """The notebook's Result_*.csv: column `result` per item (already normalised to [0, 1])."""
    with open(path, encoding='utf-8', newline='') as f:
        return [float(r['result']) for r in csv.DictReader(f)]
