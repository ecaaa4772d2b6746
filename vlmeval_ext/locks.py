"""Lock files: one run per model x dataset (the launcher), one evaluation per predictions file (the datasets).

Locks live in a `.vlmeval-ext-locks/` folder beside what they guard, are opened without following links, and hold the
holder's pid while held (empty otherwise). The kernel releases them when the process ends, however it ends.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from vlmeval_ext.errors import ExtError

LOCK_DIR = '.vlmeval-ext-locks'
_EVALUATIONS_HELD: set[str] = set()


def open_lock_file(path: Path, retry_hint: str) -> int:
    """A lock file opened for reading and writing, created when missing, never through a symbolic link."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        why = 'it is a symbolic link' if path.is_symlink() else (err.strerror or str(err))
        raise ExtError(f'{path}: cannot use it as a lock ({why}); {retry_hint}') from None


@contextlib.contextmanager
def evaluation_lock(eval_file, title: str):
    """One evaluation of a predictions file at a time (an exclusive lock on `<its folder>/.vlmeval-ext-locks/<its
    name>.lock`). A second evaluation of the same file waits for the first, with one line saying so, and then finds
    the first one's verdicts in the progress file beside the predictions: no judge call is paid twice, and no result
    file is written by two processes at once. The same process entering again (a benchmark evaluating inside
    another) goes on, and so does the evaluation of a file that is not there (it fails with its own error, and no
    lock is left for it)."""
    import fcntl
    eval_file = Path(eval_file)
    key = str(eval_file.resolve())
    if key in _EVALUATIONS_HELD or not eval_file.is_file():
        yield
        return
    folder = eval_file.parent / LOCK_DIR
    try:
        folder.mkdir(exist_ok=True)
    except OSError as err:
        raise ExtError(f'{folder}: cannot be created ({type(err).__name__}: {err.strerror or err}); the folder of '
                       'the predictions must be writable to evaluate them') from None
    path = folder / f'{eval_file.name}.lock'
    fd = open_lock_file(path, 'remove it, then run the same command again')
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode('utf-8', 'replace').strip() or 'another process'
            print(f'[{title}] {eval_file}: another evaluation of it is running ({holder}); waiting for it to finish '
                  '(its verdicts are then reused, not asked again)', flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f'pid {os.getpid()}\n'.encode(), 0)
        _EVALUATIONS_HELD.add(key)
        try:
            yield
        finally:
            _EVALUATIONS_HELD.discard(key)
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)
