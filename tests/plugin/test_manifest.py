"""Manifests: no keys, and diff-manifests names what changed (pure: no kit import)."""
import json

from vlmeval_ext.records.manifest import build_manifest, diff_manifests, diff_manifests_main


def _manifest(tmp_path, judge_model, name='m.tsv'):
    pred = tmp_path / name
    pred.write_text('index\tprediction\n1\tA\n')
    return build_manifest('GRAB', str(pred), {'model': judge_model, 'api_base': 'http://127.0.0.1:9/v1/chat/completions',
                                              'key': 'sk-vlmevalext-FAKE-0123456789abcdef'},
                          {'prompts': {'main': 'Q: {question}'}, 'counts': {'judge_failed': 0}}, 1, None)


def test_manifest_fields_and_no_key(tmp_path):
    m = _manifest(tmp_path, 'gpt-4o-mini')
    assert m['judge'] == {'model': 'gpt-4o-mini', 'mode': None, 'retries': None, 'endpoint_host': '127.0.0.1'}
    assert m['dataset']['name'] == 'GRAB' and len(m['prompt_sha1']['main']) == 40
    assert m['plugin']['version'] and 'FAKE-0123456789abcdef' not in json.dumps(m)


def test_diff_names_the_changed_judge(tmp_path, capsys):
    a, b = _manifest(tmp_path, 'gpt-4o-mini'), _manifest(tmp_path, 'qwen-72b')
    reasons = diff_manifests(a, b)
    assert any(r.startswith('judge.model: the judge model changed') for r in reasons)
    assert not any(r.startswith('dataset') for r in reasons)
    pa, pb = tmp_path / 'a.json', tmp_path / 'b.json'
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    assert diff_manifests_main([str(pa), str(pb)]) == 1
    assert 'judge model changed' in capsys.readouterr().out
    assert diff_manifests_main([str(pa), str(pa)]) == 0


def test_the_run_record_holds_the_command_with_its_keys_masked(tmp_path, monkeypatch):
    from vlmeval_ext.records.manifest import run_command
    argv = ['/venv/bin/vlmeval-ext', 'eval', '--data', 'GRAB_DEMO', '--pred', 'my preds.tsv',
            '--judge-args', '{"key": "abc123secretvalue", "judge_mode": "official"}']
    command = run_command(argv)
    assert command.startswith("vlmeval-ext eval --data GRAB_DEMO --pred 'my preds.tsv' --judge-args")
    assert 'abc123secretvalue' not in command and '"judge_mode": "official"' in command
    monkeypatch.setattr('sys.argv', ['run.py', '--data', 'GRAB', '--model', 'M'])
    assert _manifest(tmp_path, 'gpt-4o-mini')['command'] == 'run.py --data GRAB --model M'
