"""Text users and contributors read (README, docs, dataset specs with their published sources, the package's code
and messages, the demo script) speaks to them, not about the team's process."""
from __future__ import annotations

import re

from helpers.kit_run import REPO_ROOT

PROCESS_TALK = re.compile(r'\bissues? ?#?\d+\b|\bthe lead\b|\btell the lead\b', re.I)


def test_no_process_talk_in_user_facing_text():
    root = REPO_ROOT
    files = [root / 'README.md', root / 'run_examples.sh', *sorted((root / 'docs').glob('*.md')),
             *sorted((root / 'dataset_specs').rglob('*.yaml')), *sorted((root / 'vlmeval_ext').rglob('*.py')),
             *sorted((root / 'vlmeval_ext').rglob('*.md'))]
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
            if PROCESS_TALK.search(line):
                found.append(f'{path.relative_to(root)}:{number}: {line.strip()[:100]}')
    assert not found, '\n'.join(found)
