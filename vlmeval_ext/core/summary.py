"""Print every `<stem>_score.json` under a work dir as compact tables (used at the end of run_examples.sh).

    python -m vlmeval_ext.core.summary outputs/MyModel
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path


def _flatten(obj, prefix=''):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, f'{prefix}.{k}' if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        yield prefix, ', '.join(map(str, obj[:8])) + (' ...' if len(obj) > 8 else '')
    else:
        yield prefix, obj


def _fmt(v):
    if isinstance(v, float):
        return f'{v:.4f}' if abs(v) <= 1 else f'{v:.2f}'
    return 'n/a' if v is None else str(v)


_ACCOUNTING = re.compile(r'fail|unparsed|empty|missing|excluded|calls_per_item|mode$')


def _failure_lines(data: dict) -> str:
    """Under a benchmark's table: its failure accounting and judge use, one `[section] key=n; ...` line each."""
    lines = []
    for section, value in data.items():
        if not isinstance(value, dict):
            continue
        leaves = [(k, v) for k, v in _flatten(value)
                  if _ACCOUNTING.search(k) and (isinstance(v, (int, float, str)) or v is None)]
        if leaves:
            lines.append(f'[{section}] ' + '; '.join(f'{k}={_fmt(v)}' for k, v in leaves))
    return ''.join('\n' + line for line in lines)


def _benchmark_table(data: dict) -> str | None:
    """The benchmark's own main table in its paper's layout, recognised by the keys of its _score.json."""
    if isinstance(data.get('absolute'), dict) and isinstance(data.get('relative'), dict) \
            and 'MCQ-low' in data['absolute']:
        from vlmeval_ext.rbench.report import paper_tables
        judge = data.get('judge') or {}
        label = judge.get('label') or f"judge {judge.get('model', '?')} ({judge.get('mode', '?')})"
        return paper_tables(data, label=label)
    if isinstance(data.get('official'), dict) and isinstance(data.get('normalized'), dict):
        from vlmeval_ext.grab.report import task_table
        scorings = {k: v for k, v in data.items() if k in ('official', 'normalized', 'llm_extracted')}
        return 'GRAB accuracy (%), official = the paper\'s scoring\n' + task_table(scorings).to_string()
    if isinstance(data.get('accuracy'), dict) and 'erp' in data:
        from vlmeval_ext.remi.report import markdown_table
        return markdown_table(data)
    if 'twin_rate' in data:
        return (f"RoCOCO-MCQ ({data.get('attack')}): accuracy {data['accuracy']:.1f} %, adversarial twin chosen "
                f"{data['twin_rate']:.1f} %, chance {data.get('chance', float('nan')):.1f} % "
                f"({data['n']} answered of {data.get('n_items', data['n'])}; inference failures "
                f"{data.get('inference_failed', 0)}, unparsed {data.get('unparsed', 0)})")
    return None


def format_score_file(path: Path) -> str:
    data = json.loads(path.read_text())
    table = _benchmark_table(data)
    if table is not None:
        return f'## {path.name}\n{table}' + _failure_lines(data)
    lines = [f'## {path.name}']
    # Sections whose leaves share keys (e.g. absolute/relative per dimension) read best side by side.
    sections = {k: dict(_flatten(v)) for k, v in data.items() if isinstance(v, dict)}
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    numeric = {k: s for k, s in sections.items() if s and all(isinstance(x, (int, float)) or x is None
                                                             for x in s.values())}
    groups: dict[tuple, list[str]] = {}
    for name, sec in numeric.items():
        groups.setdefault(tuple(sec), []).append(name)
    for keys, names in groups.items():
        width = max(len(k) for k in keys) + 2
        lines.append(''.ljust(width) + ''.join(n[:14].rjust(15) for n in names))
        for key in keys:
            lines.append(key.ljust(width) + ''.join(_fmt(sections[n][key]).rjust(15) for n in names))
    for name, sec in sections.items():
        if name not in numeric:
            lines.append(f'[{name}] ' + '; '.join(f'{k}={_fmt(v)}' for k, v in sec.items()))
    for k, v in scalars.items():
        lines.append(f'{k}: {_fmt(v)}')
    return '\n'.join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print('usage: python -m vlmeval_ext.core.summary WORK_DIR/MODEL', file=sys.stderr)
        return 2
    files = sorted(Path(argv[0]).rglob('*_score.json'))
    if not files:
        print(f'no *_score.json under {argv[0]}', file=sys.stderr)
        return 1
    for f in files:
        print(format_score_file(f))
        print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
