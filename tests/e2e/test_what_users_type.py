"""What real users type, through run.py against loopback servers (one for the model, one for the judge), on
whichever kit the suite runs on: served model and judge names with "/", a relative work dir, the same command
again, a judge that dies mid-run, Ctrl-C, a server that does not serve the name, and the checks made before the
kit is imported."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from PIL import Image

from helpers.kit_run import REPO_ROOT, kit_environment, kit_output, run_kit
from helpers.loopback_server import LoopbackServer
from vlmeval_ext.io import safe_name

SAFE_PART = re.compile(r'^[\w.+=-]+$')
JUDGE_READY = 'Reply with the single word: ready'
RB_JUDGE = 'Please only provide the result in the following format: Score:'


def judge_reply(body) -> str:
    """The judge: 'Score: 1' to R-Bench's judge prompts, a number to GRAB's extraction prompt."""
    text = json.dumps(body['messages'])
    if 'ready' in text and 'single word' in text:
        return 'ready'
    return 'Score: 1' if 'Score:' in text else '3'


def model_server() -> LoopbackServer:
    server = LoopbackServer().start()
    server.default = 'The answer is 3.'
    return server


def judge_server() -> LoopbackServer:
    server = LoopbackServer().start()
    server.default = judge_reply
    return server


def _lines(proc, word: str) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if word in line]


def _chat(server: LoopbackServer, exclude: str | None = None) -> list:
    return [r for r in server.log if exclude is None or exclude not in r.prompt]


def test_served_and_judge_names_with_a_slash_in_a_relative_work_dir_and_the_same_command_again(tmp_path):
    """`--model Qwen/Tiny-VL --base-url URL --judge Org/Judge-7B --work-dir outputs` (relative, from another
    folder): the servers are asked for the names as typed, every file uses their safe forms, the run records are
    written, the end of the run prints the table and where the results are; the same command again asks nothing
    but the two test calls and says so."""
    from vlmeval_ext.launcher import PROBE_PROMPT
    model, judge = model_server(), judge_server()
    try:
        env = kit_environment(tmp_path)
        argv = ['--data', 'GRAB_DEMO', 'R-Bench-Full_DEMO', '--model', 'Qwen/Tiny-VL', '--base-url', model.base_url,
                '--judge', 'Org/Judge-7B', '--judge-base-url', judge.base_url, '--work-dir', 'outputs',
                '--api-nproc', '8']
        proc = run_kit(argv, env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert {r.model for r in model.log} == {'Qwen/Tiny-VL'}
        assert {r.model for r in judge.log} == {'Org/Judge-7B'}
        work = tmp_path / 'outputs'
        assert sorted(p.name for p in work.iterdir() if p.is_dir()) == ['.vlmeval-ext-locks', '.vlmeval-ext-report',
                                                                         'Qwen--Tiny-VL', 'logs']
        folder = work / 'Qwen--Tiny-VL'
        for dataset in ('GRAB_DEMO', 'R-Bench-Full_DEMO'):
            assert kit_output(folder, f'Qwen--Tiny-VL_{dataset}_score.json')
            manifest = json.loads(kit_output(folder, f'Qwen--Tiny-VL_{dataset}_manifest.json').read_text())
            assert manifest['model']['served_name'] == 'Qwen/Tiny-VL'
            assert manifest['model']['folder_name'] == 'Qwen--Tiny-VL'
            assert manifest['model']['endpoint_host'] == '127.0.0.1' and 'generation' in manifest['model']
            assert manifest['judge']['model'] == 'Org/Judge-7B'
            assert kit_output(folder, f'Qwen--Tiny-VL_{dataset}_Org--Judge-7B_verdicts.jsonl')
        for plot in ('GRAB_DEMO_complexity.png', 'R-Bench-Full_DEMO_radar.png', 'R-Bench-Full_DEMO_task_strength.png'):
            with Image.open(kit_output(folder, f'Qwen--Tiny-VL_{plot}')) as png:   # the title the plot shows
                assert png.text['Title'].split(' | ')[1] == 'model Qwen/Tiny-VL', (plot, png.text)
        out = proc.stdout
        assert '# Qwen/Tiny-VL' in out, out[-3000:]            # the name as typed; the safe form is for files
        assert f'results: {work}' in out or 'results: outputs' in out, out[-2000:]
        assert 'report:' in out and (work / 'report.html').is_file()
        paid = {d: json.loads(kit_output(folder, f'Qwen--Tiny-VL_{d}_score.json').read_text())['judge_calls']['made']
                for d in ('GRAB_DEMO', 'R-Bench-Full_DEMO')}
        assert paid['R-Bench-Full_DEMO'] == 360 and paid['GRAB_DEMO'] > 0, paid

        model.reset_log()
        judge.reset_log()
        again = run_kit(argv, env, cwd=tmp_path)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert [r.prompt for r in model.log] == [PROBE_PROMPT]           # the test call, nothing re-asked
        assert [r.prompt for r in judge.log] == [JUDGE_READY]
        calls = _lines(again, 'model calls this run:')
        assert len(calls) == 1 and 'GRAB_DEMO: 0 asked, 41 reused' in calls[0] and \
            'R-Bench-Full_DEMO: 0 asked, 48 reused' in calls[0], calls
        judged = _lines(again, 'judge Org/Judge-7B:')
        assert len(judged) == 2 and all(' 0 call(s) made' in line for line in judged), judged
        for dataset, made in paid.items():
            calls = json.loads(kit_output(folder, f'Qwen--Tiny-VL_{dataset}_score.json').read_text())['judge_calls']
            # nothing asked: each verdict comes from the verdict cache or from the kit's progress file beside the
            # predictions (ms-vlmeval writes the rerun into the same folder; an upstream checkout into a new one)
            assert calls['made'] == 0 and calls['reused_from_cache'] + calls['kept_from_progress_file'] == made, \
                (dataset, calls)
    finally:
        model.stop()
        judge.stop()


HOSTILE_MODEL = '../Ünï cödé:v1/x y'
HOSTILE_JUDGE = 'org/ju dge:..'


def test_hostile_names_never_leave_the_work_dir_or_nest_folders(tmp_path):
    """A served model and a judge named with '/', ':', spaces, '..' and non-ASCII: every file the run, summary,
    report and leaderboard write stays under the work dir with a safe name; the names themselves are recorded."""
    model, judge = model_server(), judge_server()
    try:
        env = kit_environment(tmp_path)
        proc = run_kit(['--data', 'GRAB_DEMO', '--model', HOSTILE_MODEL, '--base-url', model.base_url,
                        '--judge', HOSTILE_JUDGE, '--judge-base-url', judge.base_url, '--work-dir', 'outputs',
                        '--api-nproc', '8'], env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert {r.model for r in model.log} == {HOSTILE_MODEL} and {r.model for r in judge.log} == {HOSTILE_JUDGE}
        for command in (['summary', 'outputs'], ['report', 'outputs'],
                        ['leaderboard', '--data', 'GRAB_DEMO', '--work-dir', 'outputs']):
            done = run_kit(command, env, cwd=tmp_path, entry=('-m', 'vlmeval_ext'))
            assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    finally:
        model.stop()
        judge.stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == ['LMUData', 'outputs', 'verdict-cache']
    work = tmp_path / 'outputs'
    written = [p.relative_to(work) for p in work.rglob('*')
               if '.vlmeval-ext-locks' not in p.parts and '.vlmeval-ext-report' not in p.parts]
    locks = sorted(p.name for p in (work / '.vlmeval-ext-locks').iterdir())
    assert locks == [f'{safe_name(HOSTILE_MODEL)}__GRAB_DEMO.lock'] and SAFE_PART.match(locks[0])
    unsafe = [str(p) for p in written if not all(SAFE_PART.match(part) and not part.startswith('.')
                                                 for part in p.parts)]
    assert not unsafe, unsafe
    manifest = json.loads(next(work.rglob('*_GRAB_DEMO_manifest.json')).read_text())
    assert manifest['model']['served_name'] == HOSTILE_MODEL and manifest['judge']['model'] == HOSTILE_JUDGE
    assert any('Ünï' in str(p) for p in written)                      # letters of any script stay


def test_a_judge_that_dies_mid_run_stops_the_calls_fails_the_dataset_and_the_rerun_asks_only_the_rest(tmp_path):
    from vlmeval_ext.judging import DOWN_AFTER_FAILURES
    model, judge = model_server(), judge_server()
    answered = []

    def dying(body):
        answered.append(1)
        if len(answered) == 60:                   # the 60th R-Bench verdict is the last one it gives
            judge.fault_rate, judge.fault_kinds = 1.0, ('500',)
        return judge_reply(body)
    judge.script(re.escape(RB_JUDGE), dying)
    try:
        env = kit_environment(tmp_path)
        argv = ['--data', 'R-Bench-Full_DEMO', '--model', 'Tiny-VL', '--base-url', model.base_url,
                '--judge', 'judge-7b', '--judge-base-url', judge.base_url, '--work-dir', tmp_path / 'out',
                '--api-nproc', '4', '--judge-args', '{"judge_backoff": 0.05}']
        proc = run_kit(argv, env)
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
        failed = _lines(proc, 'FAILED')
        assert len(failed) == 1 and 'is down' in failed[0] and 'run the same command to resume' in failed[0], failed
        lacking = int(re.search(r'(\d+) judged result\(s\) lack verdicts', failed[0]).group(1))
        assert 0 < lacking <= 72                        # 24 items x 3 judged scores
        given = len(answered)                          # verdicts the judge gave before it died
        missing = 360 - given                          # the official protocol asks 360 verdicts of this split
        refused = [r for r in judge.log if r.outcome == '500']
        # bounded: the calls in flight and their retries once the judge stopped answering, nothing more
        assert len(refused) <= (DOWN_AFTER_FAILURES + 4) * 4, len(refused)
        assert 'judge_fail_rate 0.00%' not in proc.stdout + proc.stderr
        folder = tmp_path / 'out' / 'Tiny-VL'
        assert not list(folder.rglob('Tiny-VL_R-Bench-Full_DEMO_score.json'))
        assert list(folder.rglob('Tiny-VL_R-Bench-Full_DEMO_score_incomplete.json'))

        judge.fault_rate = 0.0
        judge.reset_log()
        again = run_kit(argv, env)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        asked = [r for r in judge.log if RB_JUDGE in r.prompt]
        assert len(asked) == missing, (len(asked), missing)
        score = json.loads(kit_output(folder, 'Tiny-VL_R-Bench-Full_DEMO_score.json').read_text())
        calls = score['judge_calls']
        # every verdict that arrived was kept (in the verdict cache, or in the kit's progress file beside the
        # predictions); only the others were asked
        assert calls['made'] == missing and calls['reused_from_cache'] + calls['kept_from_progress_file'] == \
            given, calls
    finally:
        model.stop()
        judge.stop()


def test_ctrl_c_while_judging_stops_at_once_keeps_every_answer_and_the_rerun_asks_only_the_rest(tmp_path):
    model, judge = model_server(), judge_server()
    judge.latency = 0.2
    try:
        env = kit_environment(tmp_path)
        argv = ['--data', 'R-Bench-Full_DEMO', '--model', 'Tiny-VL', '--base-url', model.base_url,
                '--judge', 'judge-7b', '--judge-base-url', judge.base_url, '--work-dir', str(tmp_path / 'out'),
                '--api-nproc', '4']
        proc = subprocess.Popen([sys.executable, str(REPO_ROOT / 'run.py'), *argv], env=env, cwd=REPO_ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.time() + 300
        while judge.count(re.escape(RB_JUDGE)) < 40 and proc.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, 'the run ended before judging was under way'
        os.killpg(proc.pid, signal.SIGINT)                    # what Ctrl-C sends: the whole foreground group
        pressed = time.time()
        stdout, stderr = proc.communicate(timeout=60)
        stopped_in = time.time() - pressed
        at_stop = judge.count(re.escape(RB_JUDGE))
        time.sleep(1.0)
        assert judge.count(re.escape(RB_JUDGE)) == at_stop            # nothing sent after the exit
        assert proc.returncode == 130, stdout[-2000:] + stderr[-3000:]
        assert stopped_in < 15, stopped_in
        interrupted = [line for line in (stdout + stderr).splitlines() if 'interrupted:' in line]
        assert len(interrupted) == 1 and 'run the same command to resume' in interrupted[0], interrupted
        assert 'Traceback' not in stdout + stderr, stderr[-3000:]
        answered_first = sum(1 for r in judge.log if RB_JUDGE in r.prompt and r.outcome == 'ok')

        judge.reset_log()
        judge.latency = 0.0
        again = run_kit(argv, env)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        score = json.loads(kit_output(tmp_path / 'out' / 'Tiny-VL',
                                      'Tiny-VL_R-Bench-Full_DEMO_score.json').read_text())
        asked_again = judge.count(re.escape(RB_JUDGE))
        # every verdict that arrived before the stop was stored; only the others are asked now
        calls = score['judge_calls']
        kept = calls['reused_from_cache'] + calls['kept_from_progress_file']
        assert kept >= answered_first - 4, (calls, answered_first)        # at most the calls in flight are lost
        assert calls['made'] == asked_again and asked_again + kept == 360, calls
    finally:
        model.stop()
        judge.stop()


def test_a_server_that_does_not_serve_the_name_is_said_so_with_the_names_it_serves(tmp_path):
    model = model_server()
    try:
        model.fail_next('404')
        env = kit_environment(tmp_path)
        proc = run_kit(['--data', 'GRAB_DEMO', '--model', 'Qwen/Not-Served', '--base-url', model.base_url,
                        '--work-dir', tmp_path / 'out'], env)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
        lines = [line for line in proc.stderr.splitlines() if line.startswith('[vlmeval-ext]')]
        assert len(lines) == 1, proc.stderr[-3000:]
        assert "serves no model named 'Qwen/Not-Served'" in lines[0] and 'it serves: loopback' in lines[0]
        assert 'does not exist' in lines[0]                               # the server's own text
        assert len(model.log) == 1                                        # a 404 is not retried
    finally:
        model.stop()


CHECK_BEFORE_THE_KIT = '''
import sys
from vlmeval_ext.launcher import run
code = run(sys.argv[1:])
print('KIT-IMPORTED' if 'vlmeval' in sys.modules else 'KIT-NOT-IMPORTED')
sys.exit(code)
'''


# An unknown name may be one of the kit's own datasets, which only the kit knows: the first run of a kit needs its
# import for that check (and keeps the kit's names); a later run says it before the import.
@pytest.mark.parametrize('argv, env_change, says, before_the_kit', [
    (['--data', 'R-Bench-Full_DEMO', '--model', 'M', '--judge', 'j', '--judge-args', '{"judge_mode": "efficent"}'],
     {}, 'did you mean "efficient"', True),
    (['--data', 'GRAB_DEMO', '--model', 'M'], {'LMUData': '/nonexistent/LMUData'}, '/nonexistent/LMUData', True),
    (['--data', 'GRAB', '--model', 'M'], {}, 'vlmeval-ext prepare GRAB', True),
    (['--data', 'R-Bench-Ful', '--model', 'M'], {}, 'did you mean R-Bench-Full', False),
])
def test_mistakes_are_one_line_before_any_work(tmp_path, argv, env_change, says, before_the_kit):
    env = {**kit_environment(tmp_path), **env_change}
    proc = subprocess.run([sys.executable, '-c', CHECK_BEFORE_THE_KIT, *argv], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == ('KIT-NOT-IMPORTED' if before_the_kit else 'KIT-IMPORTED')
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert 'Traceback' not in proc.stderr
    if not before_the_kit:                  # the kit's names are kept now: the same mistake again, before the kit
        start = time.time()
        again = subprocess.run([sys.executable, '-c', CHECK_BEFORE_THE_KIT, *argv], env=env, cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=120)
        took = time.time() - start
        assert again.returncode == 2 and again.stdout.strip().splitlines()[-1] == 'KIT-NOT-IMPORTED', again.stderr
        assert [line for line in again.stderr.splitlines() if line.strip()] == lines
        print(f'\n[figures] an unknown --data name: {took:.1f} s once the kit\'s names are kept')
