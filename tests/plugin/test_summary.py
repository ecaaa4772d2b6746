"""The end-of-run summary: each benchmark hands over its own row (its report's summary_row), one table says which
datasets are whose, and every file's failure accounting is printed."""
import json

from vlmeval_ext.records.summary import benchmark_of, dataset_of, format_score_file, main
from vlmeval_ext.corrupt.report import rc_table
from vlmeval_ext.corrupt.variants import paired_rows
from vlmeval_ext.dataset.utils.grab import summarize as grab_summarize
from vlmeval_ext.dataset.utils.rbench_full import rbench_table
from vlmeval_ext.dataset.utils.remi import score_item as remi_score_item
from vlmeval_ext.dataset.utils.remi import summarise as remi_summarise


def rbench_score(tmp_path) -> dict:
    """A score file as RBenchFull.evaluate writes it."""
    rows = [{'name': f'i{k}', 'type': t, 'distortion': 5, 'strength': 1 + k % 3, 'score_ref': 1.0,
             'score_dis': 0.5, 'score_com': 0.5} for k, t in enumerate(['MCQ', 'VQA', 'CAP'] * 2)]
    judge = {'model': 'chatgpt-0125', 'mode': 'official', 'failures': {'inference_failed_rows': 2}}
    return {**rbench_table(rows), 'judge': judge, 'failed': {}, 'items': len(rows), 'counts': {'items': 6}}


def grab_score() -> dict:
    """A score file as GRAB.evaluate writes it."""
    rows = [{'task': t, 'category': 'c', 'complexity': 1, 'official': h, 'normalized': 1}
            for t, h in (('properties', 1), ('function', 0), ('series', 1), ('transform', 1))]
    scores = {s: grab_summarize(rows, s) for s in ('official', 'normalized')}
    scores['official']['counts']['inference_failures'] = 3
    return {**scores, 'judge': None, 'notes': []}


def remi_score() -> dict:
    cells = [('EmojiAlgebra', '3', '{"explanation": "x", "answer": "3"}'), ('EmojiAlgebra', '4', 'no json here'),
             ('Clocks', '(5, 0)', 'Failed to obtain answer via API.')]
    rows = [{'task': t, 'answer': a, **remi_score_item(t, p, a)} for t, a, p in cells]
    return remi_summarise(rows, 'interleaved')


def rc_score() -> dict:
    table = rc_table(paired_rows({0: 1.0, 1: 1.0}, {(5, 1): {0: 1.0, 1: 0.0}}, task='MCQ'), 'MCQ')
    return {'base_dataset': 'AI2D_MINI', 'task': 'MCQ', 'judge': {'name': 'exact_matching', 'mode': 'm'}, **table,
            'pairs': 2, 'failed_rows': 1, 'empty_rows': 2}


def write(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def test_each_benchmark_hands_over_its_own_row(tmp_path, capsys):
    model = tmp_path / 'Model_X'
    write(model, 'Model_X_R-Bench-Full_DEMO_score.json', rbench_score(tmp_path))
    write(model, 'Model_X_GRAB_DEMO_score.json', grab_score())
    write(model / 'T20260101_Gabc', 'Model_X_ReMI_DEMO_score.json', remi_score())   # a kit run-id folder
    write(model, 'Model_X_RoCOCO-MCQ-danger_score.json',
          {'attack': 'danger', 'accuracy': 40.0, 'twin_rate': 30.0, 'chance': 25.0, 'n': 9, 'n_items': 10,
           'inference_failed': 1, 'unparsed': 0})
    write(model, 'Model_X_RoCOCO-MCQ-same_concept_score.json',
          {'attack': 'same_concept', 'accuracy': 50.0, 'twin_rate': 20.0, 'chance': 25.0, 'n': 10, 'n_items': 10,
           'inference_failed': 0, 'unparsed': 0})
    write(model, 'Model_X_RoCOCO-I2T-danger_score.json',
          {'dataset': 'RoCOCO-I2T-danger', 'direction': 'i2t', 'n_images': 5, 'n_texts': 50, 'dim': 512,
           'metrics': {'R@1': 20.0, 'R@5': 60.0, 'R@10': 80.0, 'R_mean': 53.3333, 'false_rate': 40.0}})
    # a model named like a benchmark's dataset tail: the folder, not the name, says where the dataset starts
    write(model, 'Model_X_AI2D_MINI-RC_score.json', rc_score())
    write(model, 'Model_X_Other_score.json', {'section': {'a': 0.5, 'b': None}, 'n': 3})
    assert main([str(model)]) == 0
    out = capsys.readouterr().out
    # R-Bench: its row from its Report.summary_row, headlines first, with the judge
    assert '## R-Bench\n| dataset | absolute Overall (0-1) | relative Overall (0-1) | items (count) |' in out
    assert '| R-Bench-Full_DEMO | 0.5000 | 0.5000 | 6 | 0.5000 | 0.5000 | 0.5000 |' in out
    assert 'judge (every row): judge chatgpt-0125 (official)' in out     # said once, not a column
    assert 'R-Bench-Full_DEMO [judge] mode=official; failures.inference_failed_rows=2' in out
    # GRAB: percent per task (official) and Overall per scoring
    assert '| GRAB_DEMO | 75.00 | 100.00 | 0.00 | 100.00 | 100.00 | 100.00 | 4 |' in out
    assert 'GRAB_DEMO [official] counts.inference_failures=3' in out
    # ReMI, found under the kit's run-id folder
    assert '| ReMI_DEMO | 50.00 | interleaved | 50.00 | 0.00 | 50.00 | 0 | 0 | 2 | 3 |' in out
    assert 'ReMI_DEMO [totals]' not in out
    assert 'ReMI_DEMO [counts] inference_failures=1; parse_failures.no_json=1' in out      # counters at 0 left out
    # the two RoCOCO-MCQ attacks share one table
    block = out.split('## RoCOCO-MCQ\n')[1].split('\n\n')[0]
    assert '| RoCOCO-MCQ-danger | 40.00 | danger | 30.00 | 25.00 | 9 | 10 |' in block
    assert '| RoCOCO-MCQ-same_concept | 50.00 | same_concept |' in block
    assert 'RoCOCO-MCQ-danger [totals] inference_failed=1\n' in block + '\n'
    assert '| RoCOCO-I2T-danger | 20.00 | 40.00 | 60.00 | 80.00 | 53.33 | i2t | 5 | 50 |' in out
    assert '| AI2D_MINI-RC | 1.0000 | 0.5000 | AI2D_MINI | MCQ | 0.5000 | 2 |' in out
    assert 'judge (every row): exact_matching' in out
    assert 'AI2D_MINI-RC [totals] failed_rows=1; empty_rows=2' in out
    # a dataset no benchmark claims is printed as it is
    assert '## Model_X_Other_score.json' in out and '\nn: 3' in out
    (tmp_path / 'empty').mkdir()
    assert main([str(tmp_path / 'empty')]) == 1


def test_one_table_says_which_datasets_are_whose(tmp_path):
    names = {'R-Bench-Full': 'R-Bench', 'R-Bench-Full-CAP': 'R-Bench', 'GRAB': 'GRAB', 'ReMI_DEMO_composite': 'ReMI',
             'RoCOCO-T2I-mix': 'RoCOCO retrieval', 'GRAB_DEMO-RC': '<Dataset>-RC (paired robustness)'}
    for dataset, benchmark in names.items():
        assert benchmark_of(dataset)[0] == benchmark, dataset
    assert benchmark_of('MMBench_DEV_EN') is None and benchmark_of('GRABBED') is None
    from vlmeval_ext.registry import BENCHMARKS, CORRUPTED
    assert len({r.title for r in (*BENCHMARKS, CORRUPTED)}) == 6
    # outside the kit's folder layout: the longest tail naming a known dataset
    assert dataset_of(tmp_path / 'my_run_GRAB_DEMO_score.json') == 'GRAB_DEMO'
    write(tmp_path, 'preds_ReMI_DEMO_score.json', remi_score())
    assert format_score_file(tmp_path / 'preds_ReMI_DEMO_score.json').startswith('## ReMI: preds_ReMI_DEMO')


def test_summary_command_writes_markdown_and_csv_with_units(tmp_path, capsys):
    """`vlmeval-ext summary WORK_DIR`: every model of a work dir, each column naming its unit (% or 0-1 as each
    paper reports, (count) for counts), the judge said once per table, and one long CSV with a unit column."""
    from vlmeval_ext.cli.main import main as cli_main
    work = tmp_path / 'outputs'
    for model in ('Model_A', 'Model_B'):
        write(work / model, f'{model}_R-Bench-Full_DEMO_score.json', rbench_score(tmp_path))
        write(work / model, f'{model}_GRAB_DEMO_score.json', grab_score())
    try:
        cli_main(['summary', str(work)])
    except SystemExit as done:
        assert done.code == 0
    out = capsys.readouterr().out
    assert '| model / dataset | absolute Overall (0-1) | relative Overall (0-1) | items (count) |' in out
    assert '| Model_A / GRAB_DEMO | 75.00 |' in out and '| Model_B / R-Bench-Full_DEMO | 0.5000 | 0.5000 | 6 |' in out
    assert out.count('judge chatgpt-0125 (official)') == 1
    for line in out.splitlines():
        if line.startswith('| model / dataset'):
            cells = [c.strip() for c in line.strip('|').split('|')][1:]
            assert all(c.endswith(')') for c in cells), cells        # every column names its unit
    md = (work / 'summary.md').read_text()
    assert md.strip() in out
    import csv
    rows = list(csv.DictReader(open(work / 'summary.csv')))
    assert set(rows[0]) == {'model', 'benchmark', 'dataset', 'metric', 'unit', 'value', 'judge'}
    absolute = [r for r in rows if r['metric'] == 'absolute Overall' and r['model'] == 'Model_A']
    assert absolute and absolute[0]['unit'] == '0-1' and float(absolute[0]['value']) == 0.5
    grab = [r for r in rows if r['dataset'] == 'GRAB_DEMO' and r['metric'] == 'official Overall']
    assert {r['unit'] for r in grab} == {'%'} and len(grab) == 2
    assert {r['unit'] for r in rows if r['metric'] == 'items'} == {'count'}
    assert {r['judge'] for r in absolute} == {'judge chatgpt-0125 (official)'}


def test_summary_command_says_why_it_has_nothing(tmp_path, capsys):
    from vlmeval_ext.records.summary import summary_main
    assert summary_main([str(tmp_path)]) == 1
    assert 'no *_score.json under' in capsys.readouterr().err
    assert summary_main([str(tmp_path / 'missing')]) == 2


def test_a_note_every_row_of_a_table_shares_is_said_once_under_it(tmp_path, capsys):
    model = tmp_path / 'Smoke'
    model.mkdir()
    note = 'a smoke test of the pipeline, not a model'
    for dataset in ('RoCOCO-I2T-danger', 'RoCOCO-I2T-clean'):
        (model / f'Smoke_{dataset}_score.json').write_text(json.dumps(
            {'dataset': dataset, 'direction': 'i2t', 'n_images': 5, 'n_texts': 50, 'note': note,
             'metrics': {'R@1': 20.0, 'R@5': 60.0, 'R@10': 80.0, 'R_mean': 53.3333, 'false_rate': 40.0}}))
    assert main([str(model)]) == 0
    out = capsys.readouterr().out
    assert out.count(note) == 1 and f'[note] (every row) {note}' in out
