"""The dashboard and the API docs in a real headless browser (Debian's chromium through selenium).

A real ``svmstream serve`` process learns from ``svmstream replay`` (ijcnn1 from
``SVMSTREAM_DATA``, or generated raw data) while Chromium shows ``/``: the accuracy chart
gains points, the examples/s figure is > 0 and the console has no error.  ``/docs`` and
``/redoc`` render with every host but the server unresolvable (no CDN reachable).

``SVMSTREAM_SCREENSHOT=path.png`` saves the ijcnn1 page (docs/dashboard.png was taken so).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CLI, REPO, subprocess_env, two_moons_like, write_libsvm

DATA = Path(os.environ.get("SVMSTREAM_DATA", REPO.parent / "shared" / "data"))
# Every host name but the test's own fails to resolve: any CDN request would fail (and log).
OFFLINE = "--host-resolver-rules=MAP svmstream.test 127.0.0.1, MAP * ~NOTFOUND"


def console_errors(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def wait_for(predicate, timeout: float, what: str):
    """Poll ``predicate()`` until it returns a truthy value; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def chart_points(driver, model: str, chart: str) -> int:
    return int(
        driver.execute_script(
            "const n = document.querySelector(`.chart[data-model='${arguments[0]}'][data-chart='${arguments[1]}']`);"
            "return n ? n.dataset.points : 0;",
            model,
            chart,
        )
    )


def shown_rate(driver, model: str) -> float:
    """The examples/s figure of the model's row in the models table (as displayed)."""
    text = driver.execute_script(
        "const c = document.querySelector(`#models-table tr[data-model='${arguments[0]}'] "
        "td[data-figure='examples_per_s']`); return c ? c.textContent : '';",
        model,
    )
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def replay(server, path: Path, *args: str) -> subprocess.Popen:
    """``svmstream replay`` into ``server`` in the background (output discarded)."""
    return subprocess.Popen(
        [*CLI, "replay", str(path), "--url", server.url, "--no-progress", *args],
        cwd=REPO,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def watch_learning(driver, server, model: str) -> None:
    """Load the dashboard while a producer streams into ``model``; the acceptance assertions."""
    driver.get(server.url + "/")
    wait_for(
        lambda: driver.find_elements("css selector", f".model[data-model='{model}']"), 30, "the model card"
    )
    first = wait_for(lambda: chart_points(driver, model, "accuracy"), 90, "a first accuracy point")
    wait_for(lambda: shown_rate(driver, model) > 0, 60, "an examples/s figure > 0")
    later = wait_for(
        lambda: (n := chart_points(driver, model, "accuracy")) >= first + 3 and n, 30, "more accuracy points"
    )
    assert later >= first + 3
    accuracy = driver.execute_script(
        "return document.querySelector(`#models-table tr[data-model='${arguments[0]}'] "
        "td[data-figure='accuracy']`).textContent;",
        model,
    )
    assert accuracy.endswith("%") and float(accuracy.split()[0]) > 50.0, accuracy
    assert driver.find_element("id", "status").get_attribute("data-state") == "live"
    errors = console_errors(driver)
    assert errors == [], errors


def stop(producer: subprocess.Popen) -> None:
    if producer.poll() is None:
        producer.kill()
    producer.wait(timeout=30)


def test_dashboard_follows_a_replay_of_generated_raw_data(start_server, browser, tmp_path):
    """Raw unscaled features and string labels (no hyperparameters): what a new user sends."""
    X, y = two_moons_like(40_000, d=6, seed=3)
    X = X * [1, 1000, 0.01, 5, 1, 300]  # raw, unscaled columns
    path = write_libsvm(tmp_path / "moons.libsvm", X, y)
    server = start_server()
    driver = browser()
    # 40 passes: the stream lasts well beyond the test's observation (killed at the end)
    producer = replay(server, path, "--model", "moons", "--passes", "40", "--batch", "500")
    try:
        watch_learning(driver, server, "moons")
    finally:
        stop(producer)
    server.terminate()


@pytest.mark.skipif(not (DATA / "ijcnn1.bz2").exists(), reason=f"ijcnn1.bz2 not in SVMSTREAM_DATA ({DATA})")
def test_dashboard_follows_an_ijcnn1_replay(start_server, browser):
    server = start_server(args=("--default-model", "ijcnn1"))  # the one model on the page
    driver = browser(width=1400, height=1000)
    producer = replay(server, DATA / "ijcnn1.bz2", "--model", "ijcnn1", "--passes", "60")
    shot = os.environ.get("SVMSTREAM_SCREENSHOT")
    try:
        watch_learning(driver, server, "ijcnn1")
        if shot:  # let the curves grow, then take the picture while the stream still runs
            wait_for(lambda: chart_points(driver, "ijcnn1", "accuracy") >= 40, 120, "40 accuracy points")
            driver.save_screenshot(shot)
    finally:
        stop(producer)
    server.terminate()


def test_api_docs_render_offline(start_server, browser):
    """Swagger UI and ReDoc load their scripts from the app: with no other host resolvable
    (the page is opened under a non-loopback name, so Swagger UI would also try its online
    validator if it were on) they render the API and the console stays clean."""
    server = start_server()
    driver = browser(OFFLINE)
    base = f"http://svmstream.test:{server.port}"
    driver.get(base + "/docs")
    wait_for(
        lambda: driver.find_elements("css selector", ".swagger-ui .opblock"), 60, "Swagger UI operations"
    )
    title = driver.find_element("css selector", ".swagger-ui .info .title").text
    assert "svmstream" in title
    ops = driver.find_elements("css selector", ".swagger-ui .opblock-summary-path")
    assert any(op.text.startswith("/learn") for op in ops)
    assert console_errors(driver) == []
    driver.get(base + "/redoc")
    wait_for(lambda: driver.find_elements("css selector", ".api-content h1"), 60, "ReDoc's content")
    assert "svmstream" in driver.find_element("css selector", ".api-content h1").text
    # ReDoc's bundle hard-codes one image, its "API docs by Redocly" logo, on cdn.redoc.ly
    # (it hides itself when the load fails): that failure is the only one allowed
    errors = [e for e in console_errors(driver) if "cdn.redoc.ly/redoc/logo-mini.svg" not in e["message"]]
    assert errors == []
    server.terminate()


def test_with_a_token_the_page_asks_for_it(start_server, browser):
    """``SVMSTREAM_API_TOKEN`` set: the page loads, /events answers 401, the page shows its
    token form; a wrong token is refused, the right one connects (sent as a header by fetch)."""
    server = start_server(env={"SVMSTREAM_API_TOKEN": "dash-token"})
    driver = browser()
    driver.get(server.url + "/dashboard")
    form = wait_for(
        lambda: (f := driver.find_element("id", "token-form")).is_displayed() and f, 30, "the token form"
    )
    assert driver.find_element("id", "status").get_attribute("data-state") == "auth"
    field = driver.find_element("id", "token")
    field.send_keys("not-the-token")
    form.submit()
    wait_for(lambda: "refused" in driver.find_element("id", "token-error").text, 30, "the refusal")
    field.clear()
    field.send_keys("dash-token")
    form.submit()
    wait_for(
        lambda: driver.find_elements("css selector", ".model[data-model='default']"), 30, "the model card"
    )
    assert driver.find_element("id", "status").get_attribute("data-state") == "live"
    assert not driver.find_element("id", "token-form").is_displayed()
    # the only console errors: Chromium's notes of the two refused /events requests
    errors = console_errors(driver)
    assert len(errors) == 2 and all("/events" in e["message"] and "401" in e["message"] for e in errors), (
        errors
    )
    server.terminate()


def test_dashboard_shows_promotions(start_server, browser):
    """A challenger promoted on evidence (docs/challengers.md) appears on the page: the totals and
    the models table count it, the model's card lists it with the challenger's settings and the
    evidence, the drift chart draws the promotions; no console error."""
    from tests.conftest import learn_all
    from tests.test_challengers import GOOD

    X, y = two_moons_like(3000, d=6, seed=4)
    server = start_server()
    driver = browser()
    cell = "#models-table tr[data-model='m'] td[data-figure='promotions']"

    def shown(selector: str) -> str:
        # read in one script: the table re-renders between a find and a .text (a stale element)
        script = "const n = document.querySelector(arguments[0]); return n ? n.innerText.trim() : '';"
        return driver.execute_script(script, selector)

    with server.client() as c:
        r = c.put(
            "/models/m", json={**GOOD, "gamma": 1000.0, "challengers": [{"gamma": 1.0}, {"gamma": 50.0}]}
        )
        assert r.status_code == 201, r.text
        driver.get(server.url + "/")
        wait_for(lambda: shown(cell) == "0 (2 challengers)", 60, "no promotion yet, two challengers")
        assert driver.find_element("css selector", ".promotions[data-model='m']").get_attribute("hidden")
        learn_all(c, "m", X, y)
        info = c.get("/models/m").json()
    assert info["promotion"]["promotions"] == 1, info["promotion"]
    (event,) = [e for e in info["promotion"]["history"] if e["event"] == "promoted"]
    wait_for(lambda: shown(cell) == "1 (1 challengers)", 60, "the promotion in the models table")
    (item,) = driver.find_elements("css selector", ".promotions[data-model='m'] li")
    assert item.get_attribute("data-at") == str(event["at"]) and item.get_attribute("data-manual") == "false"
    text = item.text
    assert "gamma = 1" in text and "promoted on evidence (user challenger)" in text, text
    assert f"threshold {event['evidence']['threshold']:g}" in text and "wins" in text, text
    assert shown("[data-total='promotions']") == "1"
    wait_for(lambda: chart_points(driver, "m", "drift") >= 1, 30, "a point of the promotions series")
    errors = console_errors(driver)
    assert errors == [], errors
    server.terminate()


def card_order(driver) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#charts .model')].map(n => n.dataset.model);"
    )


def table_order(driver) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#models-table tbody tr')].map(n => n.dataset.model);"
    )


def test_the_streamed_model_comes_first_and_a_race_shows_its_leader(start_server, browser, tmp_path):
    """Three models; the one receiving examples (a no-settings model, last by name) has its card
    first — and its row first in the table — within 5 s of its first learned batch, the idle ones
    are collapsed, its race panel names the leader once the warm-up window closes, and no time
    axis shows a label outside the years of the data (one point once read "2027 2028 2029")."""
    import datetime

    X, y = two_moons_like(40_000, d=6, seed=3)
    path = write_libsvm(tmp_path / "moons.libsvm", X * [1, 1000, 0.01, 5, 1, 300], y)
    server = start_server()  # its model "default" is the first of the three
    with server.client() as c:
        assert c.put("/models/alpha", json={"selection": False}).status_code == 201
        assert c.put("/models/zeta", json={}).status_code == 201
    driver = browser()
    driver.get(server.url + "/")
    wait_for(lambda: len(card_order(driver)) == 3, 30, "three model cards")
    years = {datetime.date.today().year}
    labels = driver.execute_script(
        "return [...document.querySelectorAll('.chart[data-chart=accuracy]')].map(n => n.dataset.xLabels || '[]');"
    )
    producer = replay(server, path, "--model", "zeta", "--passes", "40", "--batch", "500")
    try:
        with server.client() as c:
            wait_for(lambda: c.get("/models/zeta").json()["n_seen"] > 0, 120, "zeta's first batch")
        wait_for(lambda: card_order(driver)[0] == "zeta", 5, "zeta's card first within 5 s")
        wait_for(lambda: table_order(driver)[0] == "zeta", 5, "zeta's row first within 5 s")
        collapsed = driver.execute_script(
            "return [...document.querySelectorAll('#charts .model')].map(n => n.dataset.collapsed);"
        )
        assert collapsed[0] == "false" and collapsed[1:] == ["true", "true"], collapsed
        leader = wait_for(
            lambda: driver.find_elements("css selector", ".race[data-model='zeta'] tr[data-leader='true']"),
            120,
            "the race panel's leader",
        )
        summary = driver.find_element("css selector", ".race[data-model='zeta'] .race-summary").text
        assert "candidates" in summary and "leader" in summary, summary
        assert "★" in leader[0].text
        assert driver.find_element("css selector", ".race[data-model='alpha']").get_attribute("hidden")
        kind = driver.find_element("css selector", ".model[data-model='alpha'] .kind").text
        assert "BSGD pipeline" in kind, kind
        wait_for(lambda: chart_points(driver, "zeta", "accuracy") >= 2, 60, "two accuracy points")
        labels += driver.execute_script(
            "return [...document.querySelectorAll('.chart')].map(n => n.dataset.xLabels || '[]');"
        )
        legend = driver.execute_script(
            "return [...document.querySelectorAll('.u-legend .u-value')].map(n => n.textContent);"
        )
        assert "--" not in legend, legend
    finally:
        stop(producer)
    import json

    shown_years = {
        int(w)
        for text in labels
        for label in json.loads(text)
        for w in label.split()
        if len(w) == 4 and w.isdigit()
    }
    assert shown_years <= years, (shown_years, labels[:3])
    errors = console_errors(driver)
    assert errors == [], errors
    server.terminate()


def test_a_regression_race_shows_its_squared_errors(start_server, browser):
    """A regression model with no settings races γ: its race panel scores the candidates by
    their recent prequential squared error (numbers, not the classifier's accuracy column) and
    marks the serving candidate."""
    import numpy as np
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=1500, noise=1.0, random_state=0)
    server = start_server()
    with server.client() as c:
        assert c.put("/models/price", json={"task": "regression"}).status_code == 201
        for lo in range(0, 1500, 250):  # 1,500 rows: both candidates still race (the rung is at 2,000)
            body = {
                "model": "price",
                "X": (X[lo : lo + 250] * 100).tolist(),
                "y": (y[lo : lo + 250] * 10).tolist(),
            }
            assert c.post("/learn", json=body).status_code == 200
        race = c.get("/models/price").json()["statistics"]["selection"]
        assert all(cand["racing"] for cand in race["candidates"])
    driver = browser()
    driver.get(server.url + "/")
    # read in one script each time: the panel re-renders on every live event (a stale element)
    panel = """const p = document.querySelector(".race[data-model='price']");
      if (!p || !p.querySelector("tr[data-leader='true']")) return null;
      return {heads: [...p.querySelectorAll("th")].map(n => n.innerText.trim()),
              leader: p.querySelector("tr[data-leader='true']").innerText,
              cells: [...p.querySelectorAll("tr[data-candidate]")].map(r => r.lastElementChild.innerText.trim())};"""
    seen = wait_for(lambda: driver.execute_script(panel), 60, "the regression race's leader")
    assert seen["heads"][-1] == "recent prequential squared error", seen
    shown = [float(v) for v in seen["cells"]]  # numbers, not "–"
    assert shown == [pytest.approx(cand["recent_mse"], abs=1e-4) for cand in race["candidates"]], (seen, race)
    assert "★" in seen["leader"] and not np.isnan(shown).any()
    assert not [e for e in console_errors(driver) if e.get("level") == "SEVERE"]
