"""`vlmeval-ext report`: the page of a demo work dir, opened in a real headless Chromium; everything checked from
the rendered page, not from the HTML text: the items per benchmark, that a filter changes the rows shown, that a
reply holding a <script> or an onerror= attribute is shown as text and never runs, and that every image loads.
A screenshot of each benchmark's section is kept under $VLMEVAL_EXT_ARTIFACTS (default: artifacts/report/)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from helpers.kit_run import REPO_ROOT, kit_environment, run_kit

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
GIANT = 'A' * 200_000
DEMOS = {'GRAB_DEMO': ([], 41), 'ReMI_DEMO': ([], 13), 'R-Bench-Full_DEMO': (['--judge', 'offline'], 24),
         'RoCOCO-MCQ-same_concept_DEMO': ([], 24)}


def chromium() -> str:
    """The system's Chromium (tests/run.sh installs Debian's `chromium`)."""
    for name in ('chromium', 'chromium-browser', 'google-chrome'):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError('no Chromium here: tests/run.sh installs it (apt-get install -y chromium)')


@pytest.fixture(scope='module')
def page_of_the_demos(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('report')
    env = kit_environment(tmp)
    work = tmp / 'work' / 'M'
    work.mkdir(parents=True)
    for dataset, (extra, _) in DEMOS.items():
        data = pd.read_csv(REPO_ROOT / 'vlmeval_ext' / 'demo' / f'{dataset}.tsv', sep='\t', dtype=str,
                           keep_default_na=False).drop(columns=['image'])
        data['prediction'] = data['answer']
        data.loc[1, 'prediction'] = HOSTILE                       # a model reply that is markup
        if dataset == 'GRAB_DEMO':
            data.loc[2, 'prediction'] = GIANT                     # a reply of 200,000 characters
        path = work / f'M_{dataset}.tsv'
        data.to_csv(path, sep='\t', index=False)
        proc = run_kit(['eval', '--data', dataset, '--pred', path, *extra], env=env, entry=('-m', 'vlmeval_ext'))
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    # a second model, on GRAB only, every answer wrong: the score card then has two rows, a best to mark, and a
    # `compare` result to show
    other = tmp / 'work' / 'N'
    other.mkdir()
    data = pd.read_csv(REPO_ROOT / 'vlmeval_ext' / 'demo' / 'GRAB_DEMO.tsv', sep='\t', dtype=str,
                       keep_default_na=False).drop(columns=['image'])
    data['prediction'] = 'no idea'
    data.to_csv(other / 'N_GRAB_DEMO.tsv', sep='\t', index=False)
    proc = run_kit(['eval', '--data', 'GRAB_DEMO', '--pred', other / 'N_GRAB_DEMO.tsv'], env=env,
                   entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    proc = run_kit(['compare', work, other, '--data', 'GRAB_DEMO'], env=env, entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    proc = run_kit(['report', tmp / 'work'], env=env, entry=('-m', 'vlmeval_ext'))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    html = tmp / 'work' / 'report.html'
    assert html.is_file() and 'report:' in proc.stdout
    return html


def test_the_score_card_has_a_row_per_model_a_column_per_headline_and_every_anchor_and_plot_works(
        page_of_the_demos):
    from playwright.sync_api import sync_playwright
    artifacts = Path(os.environ.get('VLMEVAL_EXT_ARTIFACTS') or REPO_ROOT / 'artifacts' / 'report')
    artifacts.mkdir(parents=True, exist_ok=True)
    html = page_of_the_demos.read_text(encoding='utf-8')
    assert str(page_of_the_demos.parent.parent) not in html          # no absolute path of this machine
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=['--no-sandbox'])
        page = browser.new_page(viewport={'width': 1400, 'height': 900})
        errors = []
        page.on('pageerror', lambda err: errors.append(str(err)))
        page.goto(page_of_the_demos.as_uri())
        card = page.locator('table.scorecard')
        # first on the page, before any item
        assert page.evaluate("document.querySelector('table.scorecard').compareDocumentPosition("
                             "document.querySelector('section.items')) & Node.DOCUMENT_POSITION_FOLLOWING")
        models = card.locator('tbody tr td:first-child').all_inner_texts()
        assert sorted(models) == ['M', 'N']
        heads = card.locator('thead th').all_inner_texts()
        # one column per headline: GRAB, ReMI and RoCOCO-MCQ one each, R-Bench absolute and relative
        assert len(heads) == 1 + 5, heads
        grab = next(i for i, h in enumerate(heads) if h.startswith('GRAB_DEMO'))
        row_of = {m: card.locator('tbody tr').nth(i) for i, m in enumerate(models)}
        assert 'best' in row_of['M'].locator('td').nth(grab).get_attribute('class')      # 100 vs 0, apart
        assert 'best' not in row_of['N'].locator('td').nth(grab).get_attribute('class')
        assert row_of['N'].locator('td').nth(grab).inner_text().startswith('0.00')
        # a click on a column sorts by it, the header says which way
        header = card.locator('thead th').nth(grab)
        header.click()
        assert header.get_attribute('aria-sort') == 'ascending' and '\u25b2' in header.inner_text()
        assert card.locator('tbody tr td:first-child').all_inner_texts() == ['N', 'M']
        header.click()
        assert header.get_attribute('aria-sort') == 'descending'
        assert card.locator('tbody tr td:first-child').all_inner_texts() == ['M', 'N']
        card.screenshot(path=str(artifacts / 'scorecard.png'))
        # every link of the contents goes somewhere on the page
        targets = page.evaluate("Array.from(document.querySelectorAll('nav#contents a')).map("
                                "a => [a.getAttribute('href'), !!document.getElementById(a.getAttribute('href').slice(1))])")
        assert len(targets) >= 8 and all(ok for _, ok in targets), targets
        # the compare result of the work dir is on the page
        assert page.locator('table.comparisons tr.comparison').count() >= 1
        assert 'GRAB_DEMO' in page.locator('table.comparisons').inner_text()
        # every plot opens at full size with a click
        plots = page.locator('img.plot')
        assert plots.count() >= 1
        for i in range(plots.count()):
            plot = plots.nth(i)
            plot.scroll_into_view_if_needed()
            plot.click()
            assert 'full' in plot.get_attribute('class')
            assert page.evaluate('(img) => img.clientWidth === img.naturalWidth',
                                 plot.element_handle())
        # the run configuration names each run's command, without this machine's paths
        config = page.locator('#runs + table').inner_text()
        assert 'python -m vlmeval_ext eval --data GRAB_DEMO --pred \'<report folder>/N/N_GRAB_DEMO.tsv\'' in config \
            or 'python -m vlmeval_ext eval --data GRAB_DEMO --pred <report folder>/N/N_GRAB_DEMO.tsv' in config, config
        # the demos say their images are stand-ins
        assert 'generated stand-in images' in page.locator('p.banner.demo').inner_text()
        assert not errors, errors
        browser.close()


def test_the_rendered_report_counts_filters_escapes_and_loads_every_image(page_of_the_demos):
    from playwright.sync_api import sync_playwright
    artifacts = Path(os.environ.get('VLMEVAL_EXT_ARTIFACTS') or REPO_ROOT / 'artifacts' / 'report')
    artifacts.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=['--no-sandbox'])
        page = browser.new_page(viewport={'width': 1400, 'height': 900})
        errors = []
        page.on('pageerror', lambda err: errors.append(str(err)))
        page.goto(page_of_the_demos.as_uri())
        page.wait_for_selector('section.items tr.item')
        sections = page.locator('section.items')
        seen = {}
        for i in range(sections.count()):
            section = sections.nth(i)
            title = section.locator('h2').inner_text()
            dataset = next(d for d in DEMOS if title.endswith(f'/ {d}'))
            seen[dataset] = int(section.locator('.total').inner_text())
            assert section.locator('tr.item').count() == min(seen[dataset], 100), title
            section.screenshot(path=str(artifacts / f'{dataset}.png'))
        assert seen == {d: n for d, (_, n) in DEMOS.items()}
        # a filter changes the rows shown: GRAB's task filter
        grab = sections.filter(has_text='M / GRAB_DEMO')
        properties = grab.locator('select[data-filter="task"]')
        properties.select_option('properties')
        demo = pd.read_csv(REPO_ROOT / 'vlmeval_ext' / 'demo' / 'GRAB_DEMO.tsv', sep='\t', usecols=['task'])
        n_properties = int((demo['task'] == 'properties').sum())
        assert 0 < n_properties < 41
        assert grab.locator('tr.item').count() == n_properties
        assert grab.locator('.shown').inner_text() == f'{n_properties} matching'
        properties.select_option('')
        assert grab.locator('tr.item').count() == 41
        grab.locator('input[data-search]').fill('pearson')
        assert 0 < grab.locator('tr.item').count() < 41
        grab.locator('input[data-search]').fill('')
        # the hostile reply is text on the page, and nothing of it ran
        assert page.get_by_text('window.__pwned = 1', exact=False).count() >= len(DEMOS)
        assert page.evaluate('window.__pwned === undefined')
        assert page.locator('section.items td script, section.items td img[src="x"]').count() == 0
        # every image of the page loaded (thumbnails and plots are embedded)
        images = page.evaluate('Array.from(document.images).map(i => [i.complete && i.naturalWidth > 0, i.alt])')
        assert images and all(ok for ok, _ in images), [alt for ok, alt in images if not ok][:5]
        page.evaluate('window.scrollTo(0, 0)')
        page.screenshot(path=str(artifacts / 'overview.png'))           # the top of the page: the overview
        assert not errors, errors
        browser.close()


def test_the_page_carries_every_text_as_data_never_as_markup(page_of_the_demos):
    text = page_of_the_demos.read_text(encoding='utf-8')
    assert '<script>window.__pwned' not in text and 'onerror="window' not in text
    payloads = text.split('<script type="application/json" class="payload">')[1:]
    assert len(payloads) == len(DEMOS) + 1                    # the second model's GRAB items too
    rows = json.loads(payloads[0].split('</script>')[0])['rows']
    assert any(HOSTILE in str(v) for r in rows for v in r.values())


def test_a_giant_reply_shows_its_start_and_the_rest_is_one_click_away(page_of_the_demos):
    import time
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=['--no-sandbox'])
        page = browser.new_page(viewport={'width': 1400, 'height': 900})
        start = time.monotonic()
        page.goto(page_of_the_demos.as_uri())
        page.wait_for_selector('section.items tr.item')
        print(f'\n[figures] report with a 200,000-character reply: items shown after {time.monotonic() - start:.1f} s')
        more = page.locator('button.more', has_text='show all 200,000 characters')
        assert more.count() == 1
        cell = more.locator('xpath=..')
        assert len(cell.inner_text()) < 1100 and cell.inner_text().startswith('A' * 1000)
        more.click()
        assert page.locator('textarea.full').input_value() == GIANT and page.locator('button.more').count() == 0
        browser.close()
