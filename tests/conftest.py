"""Shared pytest fixtures: real fixture data beside the repo, the loopback OpenAI-compatible server."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES_DIR = REPO_ROOT.parent / 'shared' / 'fixtures'


@pytest.fixture(scope='session')
def fixtures_dir() -> Path:
    """../shared/fixtures: real benchmark questions, answers and model outputs (no images)."""
    assert FIXTURES_DIR.is_dir(), f'missing {FIXTURES_DIR}: the shared fixtures must sit beside the repo'
    return FIXTURES_DIR


FAKE_KEY = 'sk-vlmevalext-FAKE-0123456789abcdef'   # a known fake key: tests grep outputs for it


@pytest.fixture
def loopback():
    """A started loopback OpenAI-compatible server (127.0.0.1, free port), stopped after the test."""
    from vlmeval_ext.testing.loopback_server import LoopbackServer
    server = LoopbackServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kit_env(tmp_path, loopback):
    """Environment for running run.py / vlmeval-ext as a subprocess against the loopback server."""
    from vlmeval_ext.testing.kit_run import kit_environment
    return kit_environment(tmp_path, loopback)
