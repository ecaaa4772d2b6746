"""`run.py --help` without importing the kit: the kit's own options, read from the source of its run.py.

The kit's run.py imports the whole kit (and torch) before it can print its help, which takes 10-20 s. Its parser is
a list of literal `parser.add_argument(...)` calls in `parse_args()`, so we read them with `ast` (nothing of the
file is run: only literal values are taken, `type=` functions are left out, as they do not change the help) and
print the same options, with their help texts, followed by our datasets and models. A run.py whose parser we cannot
read this way returns None, and the caller lets the kit print its help itself.
"""
from __future__ import annotations

import argparse
import ast

SHOWN_KEYWORDS = ('help', 'default', 'nargs', 'choices', 'action', 'metavar', 'required', 'dest', 'const')


def _literal(node: ast.AST, names: dict):
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    return ast.literal_eval(node)


def _literal_keywords(keywords: list[ast.keyword], names: dict) -> dict:
    """The keywords of an add_argument call that change its help, where literal (a computed default such as
    `2 ** 15` is left out: the kit's help texts do not show defaults)."""
    out = {}
    for k in keywords:
        if k.arg not in SHOWN_KEYWORDS:
            continue
        try:
            out[k.arg] = _literal(k.value, names)
        except ValueError:
            if k.arg not in ('default', 'const'):
                raise
    return out


def _parse_args_function(source: str) -> ast.FunctionDef | None:
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == 'parse_args':
            return node
    return None


def kit_parser(source: str, prog: str = 'run.py', leave_out=()) -> argparse.ArgumentParser | None:
    """The kit's argument parser rebuilt from the text of its run.py, or None when it is not plain literals;
    options named in `leave_out` are not added."""
    try:
        func = _parse_args_function(source)
    except SyntaxError:
        return None
    if func is None:
        return None
    names: dict = {}
    parser = None
    for stmt in func.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                names[stmt.targets[0].id] = value.value
            elif isinstance(value, ast.Call) and getattr(value.func, 'attr', '') == 'ArgumentParser':
                description = next((k.value for k in value.keywords if k.arg == 'description'), None)
                try:
                    text = _literal(description, names) if description is not None else None
                except ValueError:
                    text = None
                parser = argparse.ArgumentParser(prog=prog, description=text,
                                                 formatter_class=argparse.RawTextHelpFormatter)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and getattr(stmt.value.func, 'attr', '') == 'add_argument' and parser is not None:
            call = stmt.value
            try:
                flags = [_literal(a, names) for a in call.args]
                kwargs = _literal_keywords(call.keywords, names)
                if not set(flags) & set(leave_out):
                    parser.add_argument(*flags, **kwargs)
            except (ValueError, TypeError, argparse.ArgumentError):
                return None
    if parser is None or not any('--data' in a.option_strings for a in parser._actions):
        return None
    return parser


def help_text(source: str, datasets: list[str], models: list[str], prog: str = 'run.py',
              refused: dict | None = None) -> str | None:
    """What `run.py --help` prints: the kit's help without the options we refuse, then the names vlmeval-ext
    adds and what to use instead of each refused option; None when unreadable."""
    refused = refused or {}
    parser = kit_parser(source, prog, leave_out=tuple(refused))
    if parser is None:
        return None
    instead = ''.join(f'  refused: {flag} (the kit would store it in status.json and its logs): set {home}\n'
                      for flag, home in refused.items())
    return (f'{parser.format_help()}\n'
            'vlmeval-ext: this is VLMEvalKit\'s run.py with these datasets and models added (every option above '
            'works as in the kit):\n'
            f'{instead}'
            f'  datasets: {", ".join(datasets)} (and <Dataset>-RC variants built by `vlmeval-ext corrupt`)\n'
            f'  models:   {", ".join(models)}\n'
            '  `vlmeval-ext --help` lists the other commands (prepare, eval, summary, leaderboard, ...).\n')
