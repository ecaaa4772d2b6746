"""No API key in anything a run writes: a full GRAB run with a known fake key in OPENAI_API_KEY (model and judge
both use it), then every file under the work dir and LMUData is searched for it (xlsx members unzipped), plus the
console output. The same run with the key on the command line (--judge-key, which the kit would store in
status.json and log) is refused before the kit starts. Also an uninterrupted run's scores (the reference for
test_reliability_grab's kill/resume scenario).
"""
from __future__ import annotations

import re

import pytest

from helpers.grab_play import GrabPlay, demo, expected_scores, kit_command, results, run
from helpers.kit_run import FAKE_KEY, REPO_ROOT, kit_environment

# Parts of the key that must not appear either (a key cut by a formatter is still a leak).
from helpers.secrets_check import KEY_PARTS, leaks


def test_no_key_in_any_file_or_output_of_a_run(tmp_path):
    data = demo()
    play = GrabPlay(data)
    server = play.start_server()
    env = kit_environment(tmp_path, server)
    assert env['OPENAI_API_KEY'] == FAKE_KEY
    try:
        refused = run(kit_command(tmp_path, server, '--api-nproc', '8', '--judge-key', FAKE_KEY), env)
        assert refused.returncode == 2 and not (tmp_path / 'out').exists() and not server.log
        assert '--judge-key would be written' in refused.stderr and 'OPENAI_API_KEY' in refused.stderr
        for stream in (refused.stdout, refused.stderr):
            assert not any(k in stream for k in KEY_PARTS)
        proc = run(kit_command(tmp_path, server, '--api-nproc', '8'), env)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert server.log and all(r.had_auth for r in server.log)          # the key was really used
    files = [p for p in tmp_path.rglob('*') if p.is_file()]
    kinds = {p.suffix for p in files}
    assert {'.log', '.json', '.jsonl', '.tsv'} <= kinds, kinds   # logs, status, caches, results + predictions, data
    assert any(p.name == 'status.json' for p in files) and any(p.name.endswith('_manifest.json') for p in files)
    assert leaks(tmp_path) == []
    for stream in (proc.stdout, proc.stderr):
        assert not any(k in stream for k in KEY_PARTS)
    # The uninterrupted reference run: the known scores.
    scores, _ = results(tmp_path)
    for scoring, value in expected_scores(data).items():
        assert scores[scoring]['Overall'] == pytest.approx(value, abs=1e-3)
    print(f'\n[figures] secrets: {len(files)} files searched (incl. xlsx members), 0 hold the key')


def test_examples_never_put_keys_on_the_command_line():
    for name in ('README.md', 'run_examples.sh'):
        text = (REPO_ROOT / name).read_text()
        assert '--judge-key' not in text or re.search(r'never.{0,80}--judge-key|--judge-key.{0,40}logs', text), name
        assert not re.search(r'sk-[A-Za-z0-9]{8,}', text), name
        for line in text.splitlines():
            if re.search(r'\b(run\.py|vlmeval-ext)\b', line):
                assert not re.search(r'--\w*key\s+\S', line), (name, line)
