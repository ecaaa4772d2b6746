"""The demo's closing summary prints each benchmark's own table (pure: no kit import)."""
import json

from vlmeval_ext.core.summary import format_score_file, main


def test_summary_uses_each_benchmarks_table(tmp_path, capsys):
    dims = ['Overall'] + [f'{t}-{s}' for t in ('MCQ', 'VQA', 'CAP') for s in ('low', 'mid', 'high')]
    rbench = {'absolute': {d: 0.5 for d in dims}, 'relative': {d: 0.25 for d in dims},
              'judge': {'model': 'chatgpt-0125', 'mode': 'official'}}
    (tmp_path / 'M_R-Bench-Full_score.json').write_text(json.dumps(rbench))
    rococo = {'attack': 'danger', 'accuracy': 40.0, 'twin_rate': 30.0, 'chance': 25.0, 'n': 9, 'n_items': 10,
              'inference_failed': 1, 'unparsed': 0}
    (tmp_path / 'M_RoCOCO-MCQ-danger_score.json').write_text(json.dumps(rococo))
    (tmp_path / 'M_Other_score.json').write_text(json.dumps({'section': {'a': 0.5, 'b': None}, 'n': 3}))
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert '| Absolute | MCQ low |' in out and '| judge chatgpt-0125 (official) | 0.5000' in out
    assert 'accuracy 40.0 %, adversarial twin chosen 30.0 %' in out and '9 answered of 10' in out
    assert format_score_file(tmp_path / 'M_Other_score.json').splitlines()[-1] == 'n: 3'
    assert main([str(tmp_path / 'empty')]) == 1
