"""Shared pytest fixtures: real benchmark data (tests/fixtures), the loopback OpenAI-compatible server."""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

import sys

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# tests/helpers (the loopback server, the kit runner, the fixtures) import as `helpers.*` from every test folder
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope='session')
def kit_flavour() -> str:
    """Which VLMEvalKit the suite runs on: 'ms-vlmeval' (PyPI's `ms-vlmeval`) or 'upstream' (a checkout of
    github.com/open-compass/VLMEvalKit installed as the `vlmeval` distribution). tests/run.sh runs the suite on both;
    a test whose expectation differs by kit takes this fixture and says in a comment what differs."""
    try:
        metadata.version('ms-vlmeval')
        return 'ms-vlmeval'
    except metadata.PackageNotFoundError:
        pass
    metadata.version('vlmeval')   # neither kit installed: PackageNotFoundError names the missing one
    return 'upstream'


@pytest.fixture(scope='session')
def fixtures_dir(tmp_path_factory) -> Path:
    """tests/fixtures decompressed: real benchmark questions, answers and model outputs (no images)."""
    from helpers.fixtures import unpacked_fixtures
    return unpacked_fixtures(tmp_path_factory.mktemp('fixtures'))


FAKE_KEY = 'sk-vlmevalext-FAKE-0123456789abcdef'   # a known fake key: tests grep outputs for it


@pytest.fixture(scope='session', autouse=True)
def _session_verdict_cache(tmp_path_factory):
    """Nothing a test runs writes to the user's verdict cache (VLMEVAL_EXT_CACHE, see vlmeval_ext.judging)."""
    import os
    before = os.environ.get('VLMEVAL_EXT_CACHE')
    os.environ['VLMEVAL_EXT_CACHE'] = str(tmp_path_factory.mktemp('verdict-cache-session'))
    yield
    if before is None:
        os.environ.pop('VLMEVAL_EXT_CACHE', None)
    else:
        os.environ['VLMEVAL_EXT_CACHE'] = before


@pytest.fixture(autouse=True)
def _verdict_cache_per_test(tmp_path_factory, monkeypatch):
    """Each test starts with an empty verdict cache of its own: no test reuses another test's verdicts."""
    monkeypatch.setenv('VLMEVAL_EXT_CACHE', str(tmp_path_factory.mktemp('verdict-cache')))


@pytest.fixture(autouse=True)
def _a_run_context_per_test():
    """Each test is a run of its own: its notes said once, its judges test-called once, no options of another."""
    from vlmeval_ext import run_context
    run_context.start()


@pytest.fixture
def loopback():
    """A started loopback OpenAI-compatible server (127.0.0.1, free port), stopped after the test."""
    from helpers.loopback_server import LoopbackServer
    server = LoopbackServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kit_env(tmp_path, loopback):
    """Environment for running run.py / vlmeval-ext as a subprocess against the loopback server."""
    from helpers.kit_run import kit_environment
    return kit_environment(tmp_path, loopback)


@pytest.fixture
def lmu(tmp_path, monkeypatch):
    """An empty $LMUData for the test (the kit's data root: dataset TSVs and their images)."""
    root = tmp_path / 'LMUData'
    root.mkdir()
    monkeypatch.setenv('LMUData', str(root))
    return root


# ---- markers: what a test needs, read from its module's source (explicit and cheap) ----------------------------
#   browser  opens the report in headless Chromium
#   slow     runs a command in a subprocess (run.py, vlmeval-ext, a script), or sits in tests/e2e
#   kit      imports VLMEvalKit in the test process (a dataset class, `eval`, the kit's own functions)
# `bash tests/run.sh --fast` runs the rest, the pure tests; the full run (CI) runs everything.
_SLOW_SIGNS = ('run_kit(', 'subprocess.', 'Popen(', 'run_examples.sh')
_KIT_SIGNS = ('import vlmeval\n', 'from vlmeval ', 'from vlmeval.', 'import vlmeval.', 'plugin_class(', '.evaluate(',
              "['eval'", 'build_kit_judge', 'vlmeval_ext.datasets', 'vlmeval_ext.registry import register',
              'vlmeval_ext.launcher', 'vlmeval_ext.corrupt', 'vlmeval_ext.offline.models', 'kit_env')


def _needs(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        text = path.read_text(encoding='utf-8')
        needs = set()
        if 'sync_playwright' in text or 'chromium' in text.lower():
            needs.add('browser')
        if 'e2e' in path.parts or any(sign in text for sign in _SLOW_SIGNS):
            needs.add('slow')
        if any(sign in text for sign in _KIT_SIGNS):
            needs.add('kit')
        cache[path] = needs
    return cache[path]


def pytest_configure(config):
    for name, what in (('browser', 'opens the report in headless Chromium'),
                       ('slow', 'runs a command in a subprocess, or an end-to-end run'),
                       ('kit', 'imports VLMEvalKit in the test process')):
        config.addinivalue_line('markers', f'{name}: {what}')


def pytest_collection_modifyitems(config, items):
    cache: dict = {}
    for item in items:
        for name in _needs(Path(str(item.fspath)), cache):
            item.add_marker(name)
