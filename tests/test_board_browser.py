"""The interactive board in a real browser: Debian's headless Chromium, driven by
Selenium, loads the board of a toy release from ``file://``, sorts, filters, and every
cell it displays is the value ``relbench export --summary --release`` computes from the
release's ``results.parquet``.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (``scripts/setup.sh``
installs them when run as root) and the ``selenium`` package (the ``test`` extra).
Without them the tests fail, saying how to install them; set ``RELBENCH_SKIP_BROWSER=1``
to skip them instead, on purpose."""

from __future__ import annotations

import json
import os
import shutil
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pandas as pd
import pytest

CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
INSTALL = ("as root: `apt-get update && apt-get install -y chromium chromium-driver` (or `make setup`), and "
           "`.venv/bin/pip install -c constraints.txt selenium`; or set RELBENCH_SKIP_BROWSER=1 to skip these tests")

TASK = """\
suite:
  seeds: [0, 1]
  num_anchors: 3
  output: results
  leaderboards: leaderboards
tasks:
  - name: blobs
    dataset: {name: toy-blobs, params: {classes: 6, train_size: 200}}
    encoders:
      - {name: toy-rotated, label: a, params: {seed: 1}}
      - {name: toy-rotated, label: b, params: {seed: 2, scale: 3.0}}
    grid:
      selectors: [random]
      similarities: [cosine, euclidean]
      stitchers: [{name: relative, label: rel, params: {epochs: 1}}, {name: absolute, label: abs, params: {epochs: 1}}]
    metrics: [accuracy]
"""


def _browser():
    """A headless Chromium driven by Selenium; fails (or, with RELBENCH_SKIP_BROWSER=1, skips) without them."""
    missing = [str(p) for p in (CHROMIUM, DRIVER) if not (p.is_file() or shutil.which(p.name))]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package")
    if missing:
        reason = f"the board's browser test needs {', '.join(missing)}: install them {INSTALL}."
        if os.environ.get("RELBENCH_SKIP_BROWSER") == "1":
            pytest.skip(reason)
        pytest.fail(reason)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(str(DRIVER)))


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A toy run, its board drawn from its release table, and the summary exported from
    that table: ``(board folder, summary rows)``."""
    import toy_plugins

    from relbench import cli
    from relbench.plugins import Registry, _discover

    registry = Registry(_discover() + [("toy", toy_plugins, "tests 0")])
    folder = tmp_path_factory.mktemp("browser")
    (folder / "tasks.yaml").write_text(TASK)
    table = folder / "leaderboards" / "results.parquet"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("relbench.plugins.load_registry", lambda *args, **kwargs: registry)
        assert cli.main(["run", str(folder / "tasks.yaml"), "-q"]) == 0
        assert cli.main(["leaderboard", str(folder / "tasks.yaml"), "--html", str(folder / "site"),
                         "--release", str(table)]) == 0
        assert cli.main(["export", str(folder / "tasks.yaml"), "--summary", "--release", str(table),
                         "--to", str(folder / "summary.parquet")]) == 0
    return folder / "site", pd.read_parquet(folder / "summary.parquet")


@pytest.fixture(scope="module")
def browser():
    driver = _browser()
    yield driver
    driver.quit()


def shown(value) -> str:
    """A value as board.js shows it (numbers: three decimals, rounded half away from zero
    as ``toFixed`` does; whole numbers as they are; booleans yes/no; missing: empty)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and not value.is_integer():
        return str(Decimal(value).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))
    return str(int(value)) if isinstance(value, float) else str(value)


#: every displayed row of the main table as {column: [text, value]}, read in one call
READ = """return [...document.querySelectorAll('#cells tbody tr')].map(tr => Object.fromEntries(
  [...tr.children].map(td => [td.dataset.column, [td.textContent, JSON.parse(td.dataset.value)]])));"""


def _open(browser, page: Path) -> list[dict]:
    browser.get(page.as_uri())
    return browser.execute_script(READ)


def _plain(value):
    return None if value is pd.NA or (isinstance(value, float) and value != value) else value


def test_every_displayed_cell_is_the_summary_s_value(release, browser):
    folder, summary = release
    rows = _open(browser, folder / "index.html")
    assert len(rows) == len(summary) > 0
    for row, expected in zip(rows, summary.to_dict("records")):
        assert row.pop("modality") == ["vector", "vector"]
        assert set(row) == set(expected) - {"revision"}
        for column, (text, value) in row.items():
            assert value == _plain(expected[column]), (column, value, expected[column])
            assert text == shown(expected[column]), (column, text, expected[column])


def test_clicking_a_header_sorts_numerically_then_reverses(release, browser):
    folder, summary = release
    _open(browser, folder / "index.html")
    header = browser.find_element("css selector", '#cells th[data-column="score"]')
    header.click()
    scores = [value for value in (r["score"][1] for r in browser.execute_script(READ))]
    assert scores == sorted(summary["score"]) and header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert [r["score"][1] for r in browser.execute_script(READ)] == sorted(summary["score"], reverse=True)
    assert header.get_attribute("aria-sort") == "descending"


def test_a_filter_keeps_only_the_matching_rows(release, browser):
    from selenium.webdriver.support.ui import Select

    folder, summary = release
    _open(browser, folder / "index.html")
    Select(browser.find_element("css selector", 'select[data-filter="similarity"]')).select_by_value(
        json.dumps("euclidean"))
    rows = browser.execute_script(READ)
    assert len(rows) == (summary["similarity"] == "euclidean").sum() > 0
    assert {r["similarity"][0] for r in rows} == {"euclidean"}
    assert browser.find_element("id", "count").text == f"{len(rows)} of {len(summary)} cells"


def test_a_matrix_cell_says_its_score_interval_and_seeds_on_hover(release, browser):
    folder, _ = release
    browser.get((folder / "blobs.html").as_uri())
    cells = browser.find_elements("css selector", ".matrix td[data-score]")
    assert len(cells) == 4  # two encoders: every source × target pair of the first combination
    for cell in cells:
        score, low, high = (json.loads(cell.get_attribute(f"data-{k}")) for k in ("score", "low", "high"))
        assert low <= score + 1e-9 <= high + 2e-9 and cell.text == shown(score)
        assert cell.get_attribute("title").endswith(f": {shown(score)}, 95 % interval [{shown(low)}, "
                                                    f"{shown(high)}], n 2")


def test_numbers_sort_as_numbers_and_missing_values_last(browser, tmp_path):
    from relbench import board

    summary = pd.DataFrame({"task": ["t"] * 4, "kind": ["k"] * 4, "stitcher": ["x", "y", "z", "w"],
                            "metric": ["m"] * 4, "score": [10.25, 9.5, None, 100.0]})
    board.write(tmp_path, [board.TaskBoard("t", "k", "text", summary, ["stitcher"])])
    _open(browser, tmp_path / "index.html")
    browser.find_element("css selector", '#cells th[data-column="score"]').click()
    assert [r["score"][1] for r in browser.execute_script(READ)] == [9.5, 10.25, 100.0, None]  # not 10.25, 100, 9.5
    browser.find_element("css selector", '#cells th[data-column="stitcher"]').click()
    assert [r["stitcher"][0] for r in browser.execute_script(READ)] == ["w", "x", "y", "z"]


def test_curves_draw_a_point_per_budget_with_its_interval_and_the_reference_as_a_level_line(browser, tmp_path):
    from relbench import board

    points = [{"selector": sel, "metric": "acc", "measure": "stitched", "num_anchors": k, "score": s,
               "low": s - 0.02, "high": s + 0.03, "n": 5}
              for sel, curve in (("random", ((8, 0.41), (16, 0.6), (32, 0.7))), ("fps", ((8, 0.5), (16, 0.65))))
              for k, s in curve]
    points.append({"selector": None, "metric": "acc", "measure": "own", "num_anchors": 0, "score": 0.9,
                   "low": 0.88, "high": 0.92, "n": 5})
    points.append({"selector": "random", "metric": "f1", "measure": "stitched", "num_anchors": 8, "score": 0.3,
                   "low": None, "high": None, "n": 5})
    board.write(tmp_path, [board.TaskBoard("budget", "anchor-budget", "image", None, ["selector"],
                                           curve_axis="num_anchors", curves=points)])
    browser.get((tmp_path / "budget.html").as_uri())
    dots = browser.find_elements("css selector", "#curves circle")
    assert sorted((json.loads(d.get_attribute("data-x")), json.loads(d.get_attribute("data-score"))) for d in dots) \
        == sorted((p["num_anchors"], p["score"]) for p in points[:5])  # the first metric's points
    first = browser.find_element("css selector", '#curves g[data-series="random · stitched"] circle title')
    assert first.get_attribute("textContent") == "random · stitched, num_anchors 8: 0.410, 95 % interval [0.390, " \
                                                 "0.440], n 5"
    level = browser.find_element("css selector", '#curves g[data-series="own"] line')
    assert json.loads(level.get_attribute("data-score")) == 0.9
    assert len(browser.find_elements("css selector", "#curves polygon")) == 2  # a band per curve with intervals
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("css selector", 'select[data-curve="metric"]')).select_by_value("f1")
    assert [json.loads(d.get_attribute("data-score")) for d in browser.find_elements("css selector", "#curves circle")] \
        == [0.3]


def test_a_companion_s_matrix_is_drawn_beside_the_task_s_own_and_links_its_page(browser, tmp_path):
    from relbench import board

    def cell(source, target, score, **names):
        return {**names, "source": source, "target": target, "score": score, "low": score, "high": score, "n": 3}

    similarity = board.TaskBoard("sim", "space-similarity", "image", None, [], ("source", "target"),
                                 [cell("b", "a", 0.8, measure="cka", metric="cka"),
                                  cell("a", "b", 0.9, measure="cka", metric="cka")],
                                 companions=("st",))
    stitching = board.TaskBoard("st", "stitching", "image", None, ["stitcher"], ("source", "target"),
                                [cell("a", "b", 0.5, stitcher="rel", metric="acc"),
                                 cell("b", "a", 0.25, stitcher="rel", metric="acc")])
    board.write(tmp_path, [similarity, stitching])
    browser.get((tmp_path / "sim.html").as_uri())
    own = browser.find_elements("css selector", "#matrix td[data-score]")
    beside = browser.find_elements("css selector", "#companion-0 td[data-score]")
    assert sorted(json.loads(c.get_attribute("data-score")) for c in own) == [0.8, 0.9]
    assert sorted(json.loads(c.get_attribute("data-score")) for c in beside) == [0.25, 0.5]
    heads = [th.text for th in browser.find_elements("css selector", "#matrix tr:first-child th")][1:]
    rows = [th.text for th in browser.find_elements("css selector", "#matrix tr th:first-child")][1:]
    assert heads == rows == ["b", "a"]  # one order for both axes (first seen): the diagonal is the diagonal
    assert browser.find_element("css selector", '#matrix select option').text == "cka"  # a value once
    link = browser.find_element("css selector", "#companion-0 h2 a")
    assert link.text == "st" and link.get_attribute("href").endswith("/st.html")


def test_a_long_table_is_drawn_a_page_at_a_time_in_the_chosen_order(browser, tmp_path):
    """A release's main table holds about 10,000 cells: 500 rows are drawn, and a button
    draws the next 500 of the same sorted, filtered order."""
    from relbench import board

    n = 1203
    summary = pd.DataFrame({"task": ["t"] * n, "kind": ["k"] * n, "stitcher": ["x", "y", "z"] * (n // 3),
                            "metric": ["m"] * n, "score": [float(i) for i in range(n)]})
    board.write(tmp_path, [board.TaskBoard("t", "k", "text", summary, ["stitcher"])])
    rows = _open(browser, tmp_path / "index.html")
    assert [r["score"][1] for r in rows] == list(range(500))
    more = browser.find_element("id", "more")
    assert more.text == "show 500 more (703 not shown)"
    browser.find_element("css selector", '#cells th[data-column="score"]').click()
    browser.find_element("css selector", '#cells th[data-column="score"]').click()  # descending
    more.click()
    assert [r["score"][1] for r in browser.execute_script(READ)] == list(range(n - 1, n - 1001, -1))
    more.click()
    assert len(browser.execute_script(READ)) == n and not more.is_displayed()
    assert browser.find_element("id", "count").text == f"{n} of {n} cells"
