"""The README and the `--help` texts agree with the code: every command they show is accepted by the parser that
would read it, and every `--help` prints cleanly.

Each `vlmeval-ext ...` / `python -m vlmeval_ext ...` command of the README (code blocks and inline) and of every
help text goes through the real command with its real argument parser; the test stops it right after its parser
accepted the command line (an instrument of this test: `ArgumentParser.parse_args` raises `Accepted` once the
real parse succeeded), so nothing is prepared, downloaded or run. `python run.py ...` / `vlmeval-ext run ...`
lines go through the kit's own parser (rebuilt from its run.py, as `run.py --help` does), then through our checks
that need no kit: refused options, our dataset names, `--judge-args`. What the commands do is tested by the
end-to-end tests; this one keeps the documentation from drifting from the options.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from helpers.kit_run import REPO_ROOT

README = (REPO_ROOT / 'README.md').read_text(encoding='utf-8')
OURS = re.compile(r'^(R-Bench|GRAB|ReMI|RoCOCO)')


class Accepted(Exception):
    """The command's parser accepted its command line."""


def _logical_lines(block: str) -> list[str]:
    out, current = [], ''
    for line in block.splitlines():
        if line.rstrip().endswith('\\'):
            current += line.rstrip()[:-1] + ' '
            continue
        out.append(current + line)
        current = ''
    return out


def _argv(line: str) -> list[str] | None:
    """The words of a shell line (comments dropped, leading VAR=value assignments skipped, a synopsis's optional
    ` [--option VALUE]` groups left out), or None."""
    line = re.sub(r'\s\[[^\]]*\]', '', line)
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    while words and re.match(r'^[A-Za-z_][A-Za-z0-9_]*=', words[0]):
        words = words[1:]
    return words or None


def command_of(words: list[str]) -> tuple[str, list[str]] | None:
    """('cli' | 'run' | 'rococo' | 'rbench', argv) for one of our commands, else None."""
    if words[0] == 'torchrun':
        words = ['python', *[w for w in words[1:] if not w.startswith('--nproc')]]
    if words[0] == 'vlmeval-ext':
        rest = words[1:]
    elif words[:3] == ['python', '-m', 'vlmeval_ext']:
        rest = words[3:]
    elif words[:3] == ['python', '-m', 'vlmeval_ext.cli.rococo']:
        return 'rococo', words[3:]
    elif words[:3] == ['python', '-m', 'vlmeval_ext.cli.rbench']:
        return 'rbench', words[3:]
    elif words[0] == 'python' and len(words) > 1 and words[1] == 'run.py':
        return 'run', words[2:]
    else:
        return None
    if rest and rest[0] == 'run':
        return 'run', rest[1:]
    return 'cli', rest


def documented_commands(text: str, where: str) -> list[tuple[str, str, list[str]]]:
    """[(where, line, argv)] of every command of ours in a text: code blocks line by line, and inline `...`."""
    found = []
    for block in re.findall(r'```bash\n(.*?)```', text, re.S):
        for line in _logical_lines(block):
            words = _argv(line)
            command = command_of(words) if words else None
            if command:
                found.append((where, line.strip(), command))
    prose = re.sub(r'```.*?```', '', text, flags=re.S)
    for snippet in re.findall(r'`([^`\n]+)`', prose):
        words = _argv(snippet)
        command = command_of(words) if words else None
        if command and command[1] and not any('...' in w or w == '|' for w in words):
            found.append((where, snippet, command))
    return found


def _accepting(monkeypatch):
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise Accepted(self.prog)
    monkeypatch.setattr(argparse.ArgumentParser, 'parse_args', parse_then_stop)


def _kit_parser():
    from vlmeval_ext.kit_workarounds.kit_help import kit_parser
    from vlmeval_ext.launcher import find_kit_entry
    parser = kit_parser(Path(find_kit_entry().source).read_text(encoding='utf-8'))
    assert parser is not None, "the kit's run.py parser could not be read"
    return parser


def problems_of(kind: str, argv: list[str], monkeypatch) -> str | None:
    """Why the command line would not be accepted, or None."""
    if kind == 'run':
        from vlmeval_ext.launcher import KEY_HOMES, early_args, judge_options_of
        from vlmeval_ext.registry import benchmark_of
        refused = [w.split('=')[0] for w in argv if w.split('=')[0] in KEY_HOMES]
        if refused:
            return f'shows a refused option {refused}'
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                _kit_parser().parse_args(argv)
            except SystemExit:
                return f"the kit's parser refuses it: {err.getvalue().strip().splitlines()[-1]}"
        early = early_args(argv)
        unknown = [n for n in early.data if OURS.match(n) and '<' not in n and benchmark_of(n) is None]
        if unknown:
            return f'unknown dataset name(s) {unknown}'
        judge_options_of(early.judge_args)
        return None
    from vlmeval_ext.cli import main as cli, rbench as rbench_cli, rococo as rococo_cli
    if kind == 'cli' and len(argv) == 1:          # a command named in prose: it must exist
        return None if argv[0] in (*cli.COMMANDS, *cli.DELEGATED) else f'no command {argv[0]!r}'
    main = {'cli': cli.main, 'rococo': rococo_cli.main, 'rbench': rbench_cli.main}[kind]
    _accepting(monkeypatch)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(list(argv))
        except Accepted:
            return None
        except SystemExit as stop:
            message = err.getvalue().strip().splitlines()
            return f'exit {stop.code}: {message[-1] if message else "(no message)"}'
    return 'the command finished without parsing its arguments'


README_COMMANDS = documented_commands(README, 'README.md')


def test_the_readme_shows_commands_of_every_kind():
    kinds = {kind for _, _, (kind, _) in README_COMMANDS}
    assert kinds == {'cli', 'run', 'rococo', 'rbench'}, kinds
    assert len(README_COMMANDS) > 40


@pytest.mark.parametrize('line, command', [(line, c) for _, line, c in README_COMMANDS],
                         ids=[line[:60] for _, line, _ in README_COMMANDS])
def test_every_readme_command_is_accepted(line, command, monkeypatch):
    kind, argv = command
    assert problems_of(kind, argv, monkeypatch) is None, f'README: {line}: {problems_of(kind, argv, monkeypatch)}'


def _help_of(argv: list[str], monkeypatch) -> str:
    from vlmeval_ext.cli import main as cli
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code in (0, None), (argv, stop.value.code)
    return out.getvalue()


def every_help() -> list[list[str]]:
    from vlmeval_ext.cli.main import COMMANDS, DELEGATED
    commands = [[name, '--help'] for name in (*COMMANDS, *DELEGATED) if name != 'run']
    commands += [['rococo', sub, '--help'] for sub in ('score', 'gallery', 'make-mixed', 'embed', 'prepare',
                                                        'demo-gallery')]
    return [['--help'], *commands]


@pytest.mark.parametrize('argv', every_help(), ids=lambda a: ' '.join(a))
def test_every_help_prints_cleanly_and_its_examples_are_accepted(argv, monkeypatch):
    text = _help_of(argv, monkeypatch)
    assert text.startswith('usage:'), text[:200]
    assert '%%' not in text and '%(' not in text, text
    for where, line, (kind, args) in documented_commands(text, ' '.join(argv)):
        assert problems_of(kind, args, monkeypatch) is None, f'{where} --help: {line}'


def test_run_help_lists_no_refused_option_and_says_what_to_use_instead(capsys):
    from vlmeval_ext.launcher import KEY_HOMES, run
    assert run(['--help']) == 0
    text = capsys.readouterr().out
    options = set(re.findall(r'(?m)^\s+(--[a-z-]+)', text))
    assert '--data' in options and '--judge' in options
    for flag, home in KEY_HOMES.items():
        assert flag not in options
        assert f'refused: {flag} ' in text and home.split()[0] in text


@pytest.mark.parametrize('kind, argv', [('cli', ['prepare', 'GRAB', '--max-sides', '0']),
                                        ('cli', ['rococo', 'make-mixed', '--coco-root', 'C']),
                                        ('run', ['--data', 'GRAB', '--model', 'M', '--judge-key', 'k']),
                                        ('run', ['--data', 'R-Bench-Ful', '--model', 'M']),
                                        ('run', ['--data', 'GRAB', '--model', 'M', '--no-such-option'])])
def test_a_command_the_code_does_not_accept_is_caught(kind, argv, monkeypatch):
    """The check itself can fail: commands the parsers refuse are reported."""
    assert problems_of(kind, argv, monkeypatch) is not None
