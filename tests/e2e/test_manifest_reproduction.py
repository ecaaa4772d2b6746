"""Manifests of two runs: what changed, why the scores may disagree, and what blocks comparison. Pure: no kit
import (a stand-in `vlmeval.config` module is put in sys.modules where the kit's model table is needed)."""
import json
import sys
import types
from functools import partial

from vlmeval_ext.records.manifest import (build_manifest, diff_manifests, diff_manifests_main, resolve_manifest_path,
                                       write_manifest)

FAKE_KEY = 'sk-vlmevalext-FAKE-0123456789abcdef'
PROMPTS = {'mcq': 'Q: {question}\nAnswer with the letter.', 'judge': 'Score the answer [{answer}]. Score:'}


def _run(tmp_path, name, judge_model, host, prompts=PROMPTS, mode='official', judge_failed=0):
    model_dir = tmp_path / name / 'GPT4o'
    model_dir.mkdir(parents=True)
    pred = model_dir / 'GPT4o_R-Bench-Full.tsv'
    pred.write_text('index\tprediction\n0\tA\n1\tB\n')
    extra = {'judge': {'model': judge_model, 'mode': mode, 'endpoint_host': host, 'retries': 3},
             'prompts': dict(prompts), 'seeds': {'sampling': 0}, 'counts': {'judge_failed': judge_failed,
                                                                           'infer_failed': 0}}
    path = write_manifest('R-Bench-Full', str(pred), {'model': judge_model, 'key': FAKE_KEY}, extra, n_items=2)
    return pred, json.loads(open(path).read())


def test_changed_judge_is_named_and_blocks_comparison(tmp_path, capsys):
    pred_a, a = _run(tmp_path, 'a', 'gpt-3.5-turbo-0125', 'api.openai.com')
    pred_b, b = _run(tmp_path, 'b', 'qwen2.5-72b-instruct', 'judge.internal', judge_failed=4)
    reasons = diff_manifests(a, b)
    heads = [r.split(':', 1)[0] for r in reasons]
    assert 'judge.model' in heads and 'judge.endpoint_host' in heads and 'counts' in heads
    assert "('gpt-3.5-turbo-0125' -> 'qwen2.5-72b-instruct')" in next(r for r in reasons if r.startswith('judge.model'))
    assert 'counts: failure counts differ (failed items are excluded from means) (judge_failed)' in reasons
    # unchanged things are not reported: same data, predictions, prompts, mode, retries, seeds
    for same in ('dataset.tsv_md5', 'dataset.n_items', 'predictions.content_sha1', 'prompt_sha1', 'judge.mode',
                 'judge.retries', 'seeds', 'model.name'):
        assert same not in heads, same
    # the CLI accepts the runs' predictions files (manifests found beside them) and says the judge blocks
    assert diff_manifests_main([str(pred_a), str(pred_b)]) == 1
    out = capsys.readouterr().out
    assert '- judge.model: the judge model changed' in out
    assert '1 of these make the scores not comparable' in out
    assert FAKE_KEY not in json.dumps(a) + json.dumps(b)


def test_changed_prompt_and_mode_are_named_by_key(tmp_path):
    _, a = _run(tmp_path, 'a', 'gpt-4o-mini', 'api.openai.com')
    _, b = _run(tmp_path, 'b', 'gpt-4o-mini', 'api.openai.com', mode='efficient',
                prompts={**PROMPTS, 'judge': PROMPTS['judge'] + ' '})        # one trailing space
    reasons = diff_manifests(a, b)
    assert 'prompt_sha1: a prompt template changed (judge)' in reasons
    assert "judge.mode: the judge protocol mode changed ('official' -> 'efficient')" in reasons
    assert a['prompt_sha1']['mcq'] == b['prompt_sha1']['mcq'] and PROMPTS['mcq'] not in json.dumps(a)


def test_identical_runs_agree_and_paths_resolve(tmp_path, capsys):
    pred, a = _run(tmp_path, 'a', 'gpt-4o-mini', 'api.openai.com')
    manifest = resolve_manifest_path(pred)
    assert manifest.name == 'GPT4o_R-Bench-Full_manifest.json'
    assert resolve_manifest_path(pred.with_name('GPT4o_R-Bench-Full_score.json')) == manifest
    assert diff_manifests_main([str(manifest), str(pred)]) == 0
    assert 'agree on everything' in capsys.readouterr().out
    assert diff_manifests_main([str(manifest), str(tmp_path / 'nowhere.xlsx')]) == 2
    assert 'no manifest' in capsys.readouterr().err
    # reproducibility state of the code: revision plus whether the checkout was modified
    assert set(a['plugin']) >= {'version', 'git_revision', 'git_dirty'}
    assert a['plugin']['git_dirty'] in (True, False, None)


def test_kit_model_arguments_recorded_without_keys(tmp_path, monkeypatch):
    class FakeGPT:
        pass

    fake_config = types.ModuleType('vlmeval.config')
    fake_config.supported_VLM = {'GPT4o': partial(FakeGPT, model='gpt-4o-2024-05-13', temperature=0, img_detail='high',
                                                  key=FAKE_KEY)}
    monkeypatch.setitem(sys.modules, 'vlmeval.config', fake_config)
    pred = tmp_path / 'GPT4o' / 'GPT4o_GRAB.tsv'
    pred.parent.mkdir()
    pred.write_text('index\tprediction\n0\t1\n')
    m = build_manifest('GRAB', str(pred), {}, {}, 1, None)
    assert m['model'] == {'name': 'GPT4o', 'class_args': {'class': 'FakeGPT', 'model': 'gpt-4o-2024-05-13',
                                                          'temperature': 0, 'img_detail': 'high'}}
    assert FAKE_KEY not in json.dumps(m)
    other = tmp_path / 'Other' / 'Other_GRAB.tsv'
    other.parent.mkdir()
    other.write_text('index\tprediction\n0\t1\n')
    assert build_manifest('GRAB', str(other), {}, {}, 1, None)['model']['class_args'] is None


def test_predictions_are_compared_by_contents_not_file_bytes(tmp_path, capsys):
    """Two xlsx files that load to the same table (written at other times: other bytes) are the same predictions;
    a changed cell is not."""
    import time

    import pandas as pd
    table = pd.DataFrame({'index': [0, 1], 'question': ['q0', 'q1'], 'prediction': ['A', '07']})
    paths = []
    for name in ('a', 'b'):
        folder = tmp_path / name / 'GPT4o'
        folder.mkdir(parents=True)
        path = folder / 'GPT4o_GRAB.xlsx'
        table.to_excel(path, index=False)
        paths.append(path)
        time.sleep(1.1)                       # xlsx stores its creation time: other bytes
    assert paths[0].read_bytes() != paths[1].read_bytes()
    manifests = [build_manifest('GRAB', str(p), {}, {}, 2, None) for p in paths]
    assert manifests[0]['predictions']['content_sha1'] == manifests[1]['predictions']['content_sha1']
    assert not any(r.startswith('predictions') for r in diff_manifests(*manifests))
    changed = table.assign(prediction=['A', '7'])
    changed.to_excel(paths[1], index=False)
    other = build_manifest('GRAB', str(paths[1]), {}, {}, 2, None)
    reasons = diff_manifests(manifests[0], other)
    assert any(r.startswith('predictions.content_sha1: the predictions differ') for r in reasons)
