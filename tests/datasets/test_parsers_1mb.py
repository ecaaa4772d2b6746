"""Every benchmark's reply parser finishes on 1 MB hostile model outputs (linear time; no crash).

Each parser reads each output of helpers.adversarial_outputs in a child process; an output that a parser has not
finished after 20 s (linear parsers take about a second at most: benchmarks/parsers_1mb.md), or that makes it
raise, fails the test. No timing is asserted beyond that generous bound.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.adversarial_outputs import hostile_outputs, parsers

PER_OUTPUT_S = 20

# Child: each output in the main thread under an alarm (the regex engine checks for signals as it runs, and a
# thread could not be stopped while it holds the interpreter).
CHILD = r'''
import os, signal, sys
from helpers.adversarial_outputs import hostile_outputs, parsers
parse = parsers()[sys.argv[1]]
kind = None

def too_slow(signum, frame):
    print(f'TIMEOUT {kind}', flush=True)
    os._exit(3)

signal.signal(signal.SIGALRM, too_slow)
for kind, text in hostile_outputs().items():
    signal.alarm(int(sys.argv[2]))
    try:
        parse(text)
    except Exception as err:
        print(f'RAISED {kind}: {type(err).__name__}: {str(err)[:200]}', flush=True)
        os._exit(4)
    signal.alarm(0)
    print(f'ok {kind}', flush=True)
'''


@pytest.mark.parametrize('parser', list(parsers()))
def test_parser_finishes_on_1mb_hostile_outputs(parser):
    tests = str(Path(__file__).resolve().parents[1])            # tests/: where helpers/ lives
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(filter(None, [tests, os.environ.get('PYTHONPATH')]))}
    proc = subprocess.run([sys.executable, '-c', CHILD, parser, str(PER_OUTPUT_S)], capture_output=True, text=True,
                          timeout=PER_OUTPUT_S * (len(hostile_outputs(64)) + 5), env=env)
    assert proc.returncode == 0, f'{parser}: {proc.stdout.splitlines()[-1:]} {proc.stderr[-2000:]}'
    assert proc.stdout.count('ok ') == len(hostile_outputs(64))
