"""Two `run.py --reuse` on one work dir at once: real launcher processes, the loopback server as model."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

from helpers.kit_run import (REPO_ROOT, kit_environment, loopback_model_config, run_kit,
                                         write_config)
from helpers.loopback_server import LoopbackServer


def _has_image(body) -> bool:
    return any(isinstance(m.get('content'), list) and any(p.get('type') == 'image_url' for p in m['content'])
               for m in body.get('messages', []))


def _held_answer(release: threading.Event):
    """Answers questions (with an image) only once `release` is set: the first run is mid-inference for as long as
    the test needs; the launcher's test call (no image) is answered at once."""
    def reply(body) -> str:
        if _has_image(body):
            release.wait(timeout=300)
        return 'The answer is 3.'
    return reply


def test_a_second_run_on_the_same_work_dir_stops_and_no_call_is_made_twice(tmp_path):
    server = LoopbackServer().start()
    release = threading.Event()
    try:
        server.default = _held_answer(release)
        env = kit_environment(tmp_path, server)
        cfg = loopback_model_config(server, {'GRAB_DEMO': {'class': 'GRAB', 'dataset': 'GRAB_DEMO'}}, timeout=600)
        args = ['--config', write_config(tmp_path, cfg), '--work-dir', str(tmp_path / 'out'), '--reuse',
                '--api-nproc', '2']
        first = subprocess.Popen([sys.executable, str(REPO_ROOT / 'run.py'), *args], env=env, cwd=REPO_ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        locks = tmp_path / 'out' / '.vlmeval-ext-locks'
        while not (locks.is_dir() and any(locks.glob('*.lock'))) and first.poll() is None \
                and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        assert first.poll() is None, 'the first run ended before inference started'
        second = run_kit(args, env)                        # the same command, while the first is inferring
        release.set()
        first_out, first_err = first.communicate(timeout=600)
        asked = [r for r in server.log if r.n_images]
        third = run_kit(args, env)                         # afterwards: everything is saved
        asked_after = [r for r in server.log if r.n_images]
    finally:
        release.set()
        if first.poll() is None:
            first.kill()
        server.stop()
    assert first.returncode == 0, first_err[-3000:]
    lines = [line for line in second.stderr.splitlines() if line.startswith('[vlmeval-ext] ERROR')]
    assert second.returncode == 2 and len(lines) == 1 and 'Traceback' not in second.stderr, second.stderr[-3000:]
    assert f'in work dir {tmp_path / "out"} is being run by another run (pid {first.pid}' in lines[0]
    assert len(asked) == 41                                # every item asked once: no call made twice
    assert len({r.image_hashes[0] for r in asked}) <= 41
    assert third.returncode == 0 and len(asked_after) == 41, third.stderr[-3000:]
