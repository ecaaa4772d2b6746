"""No API key reaches a log line, the kit's own log lines included."""
import logging

from vlmeval_ext.kit_workarounds.console import install_log_redaction
from vlmeval_ext.secrets import MASK, redact


def test_redacts_env_keys_and_key_shapes(monkeypatch):
    monkeypatch.setenv('MY_SERVICE_API_KEY', 'abcdef123456')
    text = redact("Using API Base: http://x; API Key: abcdef123456 {'key': 'zz-99887766', 'model': 'm'} "
                  'Authorization: Bearer tok_123456789 sk-proj-AAAAAAAAAA')
    for secret in ('abcdef123456', 'zz-99887766', 'tok_123456789', 'sk-proj-AAAAAAAAAA'):
        assert secret not in text
    assert MASK in text and "'model': 'm'" in text


def test_log_records_are_redacted_before_any_handler(monkeypatch, caplog):
    monkeypatch.setenv('OPENAI_API_KEY', 'sk-vlmevalext-FAKE-0123456789abcdef')
    install_log_redaction()
    logger = logging.getLogger('some.kit.module')
    with caplog.at_level(logging.INFO):
        logger.info('judge kwargs %s', {'key': 'sk-vlmevalext-FAKE-0123456789abcdef', 'nproc': 4})
    assert 'FAKE-0123456789abcdef' not in caplog.text and "'nproc': 4" in caplog.text
