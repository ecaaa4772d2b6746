"""The one root of every error vlmeval-ext shows to a user (pure: no kit import).

Each error a user can cause or fix (bad data, an unreachable judge or model, a missing kit, a refused argument)
derives from `ExtError`. The command line (`vlmeval-ext ...`, `python run.py ...`) prints such an error as one
line, `[vlmeval-ext] ERROR: <message>`, and exits with status 2; any other exception is a bug and keeps its
traceback.
"""
from __future__ import annotations

import sys

PREFIX = '[vlmeval-ext]'


class ExtError(Exception):
    """An error meant for the user: its message says what is wrong and what to do."""


class KitNotInstalled(ExtError, ImportError):
    """`import vlmeval` fails: VLMEvalKit is not installed in this environment."""


class KitEntryPointNotFound(ExtError):
    """Neither ms-vlmeval's `vlmeval.run` nor an upstream checkout's `run.py` could be found."""


class RefusedArgument(ExtError):
    """A command-line argument the launcher will not hand to the kit (for example a key the kit would log)."""


class EndpointUnavailable(ExtError):
    """An API model did not answer its test call before inference."""


def error_line(err: BaseException) -> str:
    """The one line a user sees for an ExtError."""
    text = ' '.join(str(err).split()) or type(err).__name__
    return f'{PREFIX} ERROR: {text}'


def report(err: BaseException, stream=None) -> int:
    """Print `err` as one line on stderr (or `stream`) and return the exit status for it (2)."""
    print(error_line(err), file=stream or sys.stderr)
    return 2
