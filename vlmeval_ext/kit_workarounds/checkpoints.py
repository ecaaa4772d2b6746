"""The kit's checkpoint and prediction files, made loadable before the kit reads them, and its empty run folders.

- A torn checkpoint (the kit's `dump` writes in place; a run killed mid-write leaves a cut pickle that stops every
  later run): `set_aside_unloadable` moves it aside, saying what was lost, so the run re-asks those items.
  Removed by upstream/0002-atomic-dump.patch.
- A reply holding a lone surrogate (no UTF-8 file can store it; the kit's prediction table refuses it, and every
  rerun fails on the same checkpoint): `repair_unstorable_replies` replaces it by U+FFFD in the checkpoints of our
  datasets. Removed by upstream/0003-storable-predictions.patch.
- ms-vlmeval 0.0.20 makes a `T<date>-<time>` folder per dataset run and writes nothing into it:
  `remove_empty_run_dirs` removes the ones this run made.

Each function takes the model folders (`{model: folder}`) and returns the lines it has to say; the launcher
prints them.
"""
from __future__ import annotations

import datetime
import os
import pickle
from pathlib import Path


def checkpoint_files(run_dir: Path, model: str, dataset: str, world_size: int) -> list[Path]:
    """The kit's files of one model x dataset in one run folder: checkpoints, per-rank parts, the predictions."""
    names = [f'{model}_{dataset}_checkpoint.pkl', f'{model}_{dataset}_PREV.pkl',
             *(f'{rank}{world_size}_{dataset}.pkl' for rank in range(world_size)),
             *(f'{model}_{dataset}.{ext}' for ext in ('xlsx', 'tsv', 'json'))]
    return [run_dir / n for n in names if (run_dir / n).is_file()]


def kit_run_dirs(model_dir: Path) -> list[Path]:
    """The model folder and the kit's per-run folders inside it (an upstream checkout writes one per run)."""
    from vlmeval.smp.file import list_eval_run_dirs
    return [model_dir, *map(Path, list_eval_run_dirs(str(model_dir)))] if model_dir.is_dir() else []


def remove_empty_run_dirs(model_dirs: dict[str, Path], started: datetime.datetime) -> list[Path]:
    """Remove the per-run folders (`T<date>-<time>`) that the kit made since `started` and left empty. ms-vlmeval
    0.0.20 makes one per dataset run (`prepare_reuse_files`) and writes everything into the model folder; an upstream
    checkout writes its status.json into it, so its folders are never empty and stay. Returns what was removed."""
    from vlmeval.smp.file import is_eval_run_id
    removed = []
    for model_dir in model_dirs.values():
        if not model_dir.is_dir():
            continue
        for folder in model_dir.iterdir():
            if not (folder.is_dir() and not folder.is_symlink() and is_eval_run_id(folder.name)):
                continue
            made = datetime.datetime.fromtimestamp(folder.stat().st_mtime).astimezone()
            if made >= started and not any(folder.iterdir()):
                folder.rmdir()
                removed.append(folder)
    return removed


def set_aside_unloadable(model_dirs: dict[str, Path], datasets, world_size: int) -> list[str]:
    """Move aside each checkpoint/prediction file of these combinations that the kit could not load; returns one
    line per file moved, saying what was lost."""
    from vlmeval.smp import load
    said = []
    stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
    for model, model_dir in model_dirs.items():
        for run_dir in kit_run_dirs(model_dir):
            for dataset in datasets:
                for path in checkpoint_files(run_dir, model, dataset, world_size):
                    try:
                        load(str(path))
                        continue
                    except Exception as err:  # pickle/zip/json raise many types; any of them stops the kit
                        reason = f'{type(err).__name__}: {err}'
                    aside = path.with_name(f'{path.name}.unreadable-{stamp}')
                    try:
                        os.replace(path, aside)
                    except FileNotFoundError:
                        continue
                    said.append(f'{path} cannot be loaded ({reason[:120]}); moved to {aside.name}. Lost: the '
                                f'{model} x {dataset} predictions it held; the kit asks for them again')
    return said


def repair_unstorable_replies(model_dirs: dict[str, Path], datasets, world_size: int) -> list[str]:
    """Replace lone surrogates in the replies held by the checkpoints of these combinations (U+FFFD; a surrogate
    pair split in two code points is joined): no UTF-8 file can store them, and the kit's table of predictions
    refuses them, so a run that failed on one would fail again with the same reply. Returns one line per file."""
    from vlmeval_ext.predictions import storable_text
    said = []
    for model, model_dir in model_dirs.items():
        for run_dir in kit_run_dirs(model_dir):
            for dataset in datasets:
                for path in checkpoint_files(run_dir, model, dataset, world_size):
                    if path.suffix != '.pkl':
                        continue
                    try:
                        with open(path, 'rb') as f:
                            held = pickle.load(f)      # the kit's own checkpoint, written by its dump()
                    except Exception:  # unreadable: set_aside_unloadable deals with it
                        continue
                    if not isinstance(held, dict):
                        continue
                    fixed = [k for k, v in held.items() if isinstance(v, str) and storable_text(v) != v]
                    if not fixed:
                        continue
                    for k in fixed:
                        held[k] = storable_text(held[k])
                    tmp = path.with_name(f'{path.name}.partial{os.getpid()}')
                    with open(tmp, 'wb') as f:
                        pickle.dump(held, f)
                    os.replace(tmp, path)
                    said.append(f'{path}: {len(fixed)} repl(ies) of {model} on {dataset} (item(s) {fixed[:10]}) '
                                'held a lone surrogate, which no UTF-8 file can store; replaced by U+FFFD so the '
                                'predictions can be written')
    return said
