"""Ctrl-C inside the kit's own loop (vlmeval_ext.interrupt): the kit's `track_progress_rich` saves its progress
file after every finished call; a Ctrl-C that lands during that save must still end the loop with
KeyboardInterrupt (never a CancelledError the kit logs as an evaluation error), once the save is done."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from helpers.kit_run import REPO_ROOT

# Runs in a process of its own: the handler is process-wide. The first finished call's result, when the kit
# pickles it into the progress file, raises SIGINT: the signal lands inside the kit's dump.
SCRIPT = textwrap.dedent('''
    import os, signal, sys, time
    from vlmeval.smp import load
    from vlmeval.utils.mp_util import track_progress_rich
    from vlmeval_ext.interrupt import handling_ctrl_c

    class PressesCtrlC:
        def __reduce__(self):
            if not getattr(PressesCtrlC, 'pressed', False):
                PressesCtrlC.pressed = True
                signal.raise_signal(signal.SIGINT)
                time.sleep(0.2)                      # still inside the kit's write when the redelivery is due
            return (str, ('answer',))

    def call(i):
        time.sleep(0.05)
        return PressesCtrlC() if i == 0 else 'answer'

    save = sys.argv[1]
    try:
        with handling_ctrl_c(lambda: 'interrupted'):
            track_progress_rich(call, list(range(40)), nproc=1, save=save, keys=list(range(40)))
        print('ENDED: the loop finished')
    except KeyboardInterrupt:
        saved = load(save)
        print('ENDED: KeyboardInterrupt;', len(saved), 'saved;', 'readable' if isinstance(saved, dict) else '')
    except Exception as err:
        print('ENDED:', type(err).__name__)
    os._exit(0)
''')


def test_ctrl_c_during_the_kits_progress_save_ends_its_loop_with_keyboard_interrupt_after_the_save(tmp_path):
    script = tmp_path / 'press.py'
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / 'progress.pkl')], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    ended = [line for line in proc.stdout.splitlines() if line.startswith('ENDED:')]
    assert ended, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert ended[0].startswith('ENDED: KeyboardInterrupt;'), proc.stdout[-2000:] + proc.stderr[-3000:]
    saved = int(ended[0].split(';')[1].split()[0])
    assert 1 <= saved < 40                       # the save the Ctrl-C landed in completed; the rest never ran
    assert 'readable' in ended[0]
    assert 'Traceback' not in proc.stderr, proc.stderr[-3000:]


# The process ends early (a second Ctrl-C, or the grace period running out) while the kit is writing its progress
# file: the end waits for the write, so the file is whole. Pickling the third object presses the key (or ends the
# grace period) and stays 0.3 s inside the write.
ENDING_SCRIPT = textwrap.dedent('''
    import signal, sys, threading, time
    from vlmeval.smp import dump
    from vlmeval_ext import interrupt

    class EndsTheProcess:
        def __reduce__(self):
            if sys.argv[2] == 'second-ctrl-c':
                signal.raise_signal(signal.SIGINT)
            else:
                threading.Thread(target=interrupt._end_now).start()
            time.sleep(0.3)
            return (str, ('answer',))

    with interrupt.handling_ctrl_c(lambda: 'interrupted: ended'):
        interrupt.STOP.set('interrupted')            # as the first Ctrl-C leaves it
        data = {i: 'x' * 1000 for i in range(2000)}
        data[2] = EndsTheProcess()
        dump(data, sys.argv[1])
        print('WRITTEN', flush=True)
        time.sleep(30)
''')


@pytest.mark.parametrize('ending', ['second-ctrl-c', 'grace-period'])
def test_an_early_end_waits_for_the_kits_file_write_so_the_progress_file_is_whole(ending, tmp_path):
    import pickle
    script = tmp_path / 'end.py'
    script.write_text(ENDING_SCRIPT)
    save = tmp_path / 'progress.pkl'
    proc = subprocess.run([sys.executable, str(script), str(save), ending], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert 'interrupted: ended' in proc.stderr
    with open(save, 'rb') as f:
        saved = pickle.load(f)
    assert len(saved) == 2000 and saved[2] == 'answer' and saved[1999] == 'x' * 1000
