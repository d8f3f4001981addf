"""Jupyter servers (JupyterLab, Notebook 7) on localhost and a headless Chromium for the
browser tests, and the page helpers that open a notebook, run it and click through the
explorer (tests/test_browser.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"
CHAIN = Path(__file__).resolve().parent / "_browser_pipeline.ipynb"
CENSUS = Path(__file__).resolve().parent / "_browser_census.ipynb"
DIFF = Path(__file__).resolve().parent / "_browser_diff.ipynb"
CHROMIUM = os.environ.get("TENSPROV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
TOKEN = "tensprov-browser-test"
RUN_ALL_TIMEOUT_S = 600

#: what installs the prerequisites (.ci/run)
INSTALL_HINT = (
    'apt-get install -y chromium  &&  .venv/bin/pip install -e ".[test,browser]" '
    "(never `playwright install`: the system chromium is used)"
)


# ---------------------------------------------------------------------------------------------
# prerequisites: fail loudly


def _require_prerequisites(*apps: str) -> None:
    problems = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        problems.append(f"python package playwright cannot be imported ({exc})")
    for mod in (*apps, "anywidget", "ipykernel", "jupyterlab_widgets"):
        try:
            __import__(mod)
        except ImportError as exc:
            problems.append(f"python package {mod} cannot be imported ({exc})")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        problems.append(f"no chromium executable at {CHROMIUM}")
    if problems:
        pytest.fail(
            "browser test prerequisites missing: "
            + "; ".join(problems)
            + f". Install with: {INSTALL_HINT}",
            pytrace=False,
        )


# ---------------------------------------------------------------------------------------------
# Jupyter servers: JupyterLab and Notebook 7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write_settings(settings: Path) -> None:
    """Lab user settings for a quiet, deterministic page: every cell in the DOM (no
    windowing), no autosave, no news or update checks."""
    for plugin, values in {
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
        "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
        "@jupyterlab/apputils-extension/notification": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
    }.items():
        pkg, name = plugin.rsplit("/", 1)
        path = settings / pkg / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@contextmanager
def _server(app: str, tmp: Path) -> Iterator[dict[str, Any]]:
    """A Jupyter server (``app``: ``lab`` for JupyterLab, ``notebook`` for Notebook 7) on a
    free localhost port, serving copies of the notebooks (so that running them in the browser
    never touches the committed files)."""
    root = tmp / "notebooks"
    root.mkdir()
    shutil.copy(QUICKSTART, root / QUICKSTART.name)
    shutil.copy(CHAIN, root / "chain100.ipynb")
    shutil.copy(CENSUS, root / "census.ipynb")
    shutil.copy(DIFF, root / "versions.ipynb")

    # kernelspec running this interpreter, first on JUPYTER_PATH (as tests/test_notebooks.py)
    jpath = tmp / "jupyter"
    spec_dir = jpath / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (tensprov-lab tests)",
                "language": "python",
            }
        )
    )
    settings = tmp / "lab-settings"  # Notebook 7 reads the same JupyterLab settings
    _write_settings(settings)
    env = {
        **os.environ,
        "JUPYTER_PATH": os.pathsep.join(filter(None, [str(jpath), os.environ.get("JUPYTER_PATH")])),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # the kernel's Spark needs little memory: keep the JVMs (tests + kernels) light
        "TENSPROV_DRIVER_MEMORY": os.environ.get("TENSPROV_DRIVER_MEMORY", "1g"),
    }
    port = _free_port()
    name = {"lab": "JupyterLab", "notebook": "Notebook 7"}[app]
    cmd = [
        sys.executable,
        "-m",
        "jupyter" if app == "lab" else "notebook",
        *(["lab"] if app == "lab" else []),
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.token={TOKEN}",
        f"--ServerApp.root_dir={root}",
    ]
    if app == "lab":
        cmd += ["--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log_path = tmp / f"{app}.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"{name} exited ({proc.returncode}); log: {log_path.read_text()[-3000:]}",
                    pytrace=False,
                )
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{name} did not answer on {base} within 120 s; log: "
                    f"{log_path.read_text()[-3000:]}",
                    pytrace=False,
                )
            time.sleep(0.5)
        yield {"app": app, "base": base, "root": root, "tmp": tmp, "log": log_path}
    finally:
        # the server's process group: the server and the kernels (with their JVMs) it started
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """JupyterLab."""
    _require_prerequisites("jupyterlab")
    with _server("lab", tmp_path_factory.mktemp("lab")) as server:
        yield server


@pytest.fixture(scope="module")
def nb7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Notebook 7 (the ``notebook`` package)."""
    _require_prerequisites("notebook")
    import notebook

    major = int(notebook.__version__.split(".")[0])
    if major < 7:
        pytest.fail(f"notebook {notebook.__version__} installed, 7 or newer needed. "
                    f"{INSTALL_HINT}", pytrace=False)  # fmt: skip
    with _server("notebook", tmp_path_factory.mktemp("nb7")) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _require_prerequisites()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        try:
            b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        except Exception as exc:  # noqa: BLE001 - a clear failure, never a skip
            pytest.fail(
                f"cannot launch {CHROMIUM} with playwright: {exc}. {INSTALL_HINT}", pytrace=False
            )
        try:
            yield b
        finally:
            b.close()


# ---------------------------------------------------------------------------------------------
# page helpers

EXPLORER = ".tp-explorer"

JS_NODES = """el => el.__tensprov_cy.nodes().map(n => ({
    id: n.id(), kind: n.data('kind'), label: n.data('label'), display: n.data('display'),
    classes: n.classes()}))"""

# page coordinates of a node's centre; pans (and zooms in) first when it is not well visible
JS_NODE_POINT = """([el, id]) => {
    const cy = el.__tensprov_cy;
    const n = cy.getElementById(id);
    if (n.empty()) return null;
    const box = cy.container().getBoundingClientRect();
    let p = n.renderedPosition();
    const inside = p.x > 10 && p.y > 10 && p.x < box.width - 10 && p.y < box.height - 10;
    if (!inside || n.renderedWidth() < 12) {
        if (cy.zoom() < 0.8) cy.zoom(0.8);
        cy.center(n);
        p = n.renderedPosition();
    }
    return {x: box.left + p.x, y: box.top + p.y};
}"""


# each node's label as drawn at the current zoom: its font size on screen, and the box of
# its text beside the box of the node (model units)
JS_LABELS = """el => {
    const cy = el.__tensprov_cy;
    const z = cy.zoom();
    return cy.nodes().map(n => {
        const text = n.boundingBox({includeNodes: false, includeEdges: false,
                                    includeLabels: true, includeOverlays: false});
        return {label: n.data('display'), px: z * parseFloat(n.style('font-size')),
                tw: text.w, th: text.h, w: n.width(), h: n.height()};
    });
}"""

#: the smallest a node label may be drawn at the first view (px on screen)
LEGIBLE_PX = 10.0


def _check_legible(el: Any, shot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """At the explorer's first view every node label is drawn at >= LEGIBLE_PX and its
    text fits inside its box; the view is kept as a screenshot (path printed)."""
    labels = el.evaluate(JS_LABELS)
    assert labels
    small = [(lb["label"], round(lb["px"], 1)) for lb in labels if lb["px"] < LEGIBLE_PX]
    assert not small, small
    spill = [lb for lb in labels if lb["tw"] > lb["w"] + 1 or lb["th"] > lb["h"] + 1]
    assert not spill, spill
    el.screenshot(path=str(shot))
    with capsys.disabled():
        px = sorted({round(lb["px"], 1) for lb in labels})
        print(f"\nfirst view: labels drawn at {px} px; screenshot: {shot}")


def _open(browser: Any, server: dict[str, Any], name: str) -> Any:
    page = browser.new_page(viewport={"width": 1600, "height": 1100})
    page.set_default_timeout(60_000)
    if server["app"] == "lab":
        # a workspace of its own: only this notebook open (no tab restored from another test)
        ws = re.sub(r"\W", "-", Path(name).stem)
        page.goto(f"{server['base']}/lab/workspaces/{ws}/tree/{name}?token={TOKEN}&reset")
    else:  # Notebook 7: one notebook per page, no workspaces
        page.goto(f"{server['base']}/notebooks/{name}?token={TOKEN}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    if server["app"] == "lab":
        # the kernel is up when the status bar says so
        page.locator(
            ".jp-StatusBar-Widget", has_text=re.compile(r"tensprov-lab tests\)\s*\|\s*Idle")
        ).first.wait_for(timeout=120_000)
    else:
        # Notebook 7 has no status bar: the notebook toolbar names the kernel and its state
        page.locator(".jp-Toolbar-kernelName", has_text="tensprov-lab tests").wait_for(
            timeout=120_000
        )
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(
            timeout=120_000
        )
    page.wait_for_timeout(1000)
    return page


def _shutdown_kernels(server: dict[str, Any]) -> None:
    """End the notebook sessions (and their kernels' Spark JVMs) a test started."""

    def call(method: str, path: str) -> Any:
        req = urllib.request.Request(
            f"{server['base']}{path}", method=method, headers={"Authorization": f"token {TOKEN}"}
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
        return json.loads(body) if body else None

    for session in call("GET", "/api/sessions") or []:
        call("DELETE", f"/api/sessions/{session['id']}")


def _run_all(page: Any, *, but_last: bool = False, before: str | None = None) -> None:
    """Run > Run All Cells (or, with ``but_last``, select the last cell, with ``before`` the
    first cell showing that text, and Run > Run All Above Selected Cell), then wait until
    those code cells have run (or one failed)."""
    item = "Run All Cells"
    n_code = None  # how many code cells (from the top) the command runs; None: all
    if but_last or before is not None:
        cells = page.locator(".jp-Notebook .jp-Cell")
        cell = cells.last if before is None else cells.filter(has_text=before).first
        n_code = cell.evaluate(
            "c => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].filter("
            "x => c.compareDocumentPosition(x) & Node.DOCUMENT_POSITION_PRECEDING).length"
        )
        cell.locator(".jp-InputPrompt").click()
        item = "Run All Above Selected Cell"
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()
    deadline = time.monotonic() + RUN_ALL_TIMEOUT_S
    settled_since = None
    started = False
    while True:
        prompts = page.eval_on_selector_all(
            ".jp-CodeCell .jp-InputArea-prompt", "els => els.map(e => e.textContent.trim())"
        )
        if n_code is not None:
            prompts = prompts[:n_code]
        numbered = [bool(re.fullmatch(r"\[\d+\]:", p)) for p in prompts]
        if prompts and all(numbered):
            return
        started = started or any(p != "[ ]:" for p in prompts)
        if not started and time.monotonic() > deadline - RUN_ALL_TIMEOUT_S + 60:
            prompts_all = page.eval_on_selector_all(
                ".jp-CodeCell .jp-InputArea-prompt", "els => els.map(e => e.textContent.trim())"
            )
            pytest.fail(
                f"Run > {item} did not start any cell within 60 s: {prompts_all}", pytrace=False
            )
        if started and "[*]:" not in prompts:  # nothing queued, something never ran
            settled_since = settled_since or time.monotonic()
            if time.monotonic() - settled_since > 5:
                errors = page.eval_on_selector_all(
                    ".jp-OutputArea-output", "els => els.map(e => e.innerText)"
                )
                errors = [e for e in errors if "Traceback" in e or "Error" in e]
                pytest.fail(
                    f"Run All Cells stopped; prompts {prompts}; errors: "
                    f"{errors[-1][-3000:] if errors else '(none shown)'}",
                    pytrace=False,
                )
        else:
            settled_since = None
        if time.monotonic() > deadline:
            pytest.fail(
                f"cells still running after {RUN_ALL_TIMEOUT_S} s: {prompts}", pytrace=False
            )
        time.sleep(0.5)


def _explorer(page: Any) -> Any:
    el = page.locator(EXPLORER).first
    el.wait_for(state="attached", timeout=60_000)
    el.scroll_into_view_if_needed()
    page.wait_for_function(
        "el => el.__tensprov_cy && el.__tensprov_cy.nodes().length > 0",
        arg=el.element_handle(),
        timeout=60_000,
    )
    return el


def _nodes(el: Any) -> list[dict[str, Any]]:
    return el.evaluate(JS_NODES)


def _click_node(page: Any, el: Any, node_id: str) -> None:
    """A real mouse click at the node's centre on the cytoscape canvas.

    The output area can still move while Lab settles (scrolling, late outputs), so the
    point is taken once it is stable, and the click is retried when it did not select
    the node (a few times at most: a node that cannot be selected fails the test).
    """
    picked = "([el, id]) => el.__tensprov_cy.getElementById(id).hasClass('picked')"
    handle = el.element_handle()
    for _ in range(5):
        el.locator(".tp-graph").scroll_into_view_if_needed()
        point = page.evaluate(JS_NODE_POINT, [handle, node_id])
        assert point is not None, f"no node {node_id} in the graph"
        page.wait_for_timeout(200)  # let cytoscape draw a pan/zoom, the page settle
        again = page.evaluate(JS_NODE_POINT, [handle, node_id])
        if again != point:
            continue
        page.mouse.click(point["x"], point["y"])
        try:
            page.wait_for_function(picked, arg=[handle, node_id], timeout=3_000)
            return
        except Exception:  # noqa: BLE001 - missed: the page moved under the pointer
            continue
    pytest.fail(f"clicking node {node_id} on the canvas never selected it", pytrace=False)


def _node_by(nodes: list[dict[str, Any]], kind: str | None, label: str) -> dict[str, Any]:
    found = [n for n in nodes if (kind is None or n["kind"] == kind) and label in n["label"]]
    assert found, f"no {kind or ''} node labelled {label!r} in {[n['label'] for n in nodes]}"
    return found[0]


def _wait_rows(el: Any, n: int) -> None:
    """Wait for ``n`` rows in the records table; fail with what the panel shows instead."""
    try:
        el.locator(".tp-records tbody tr").nth(n - 1).wait_for(timeout=30_000)
    except Exception:  # noqa: BLE001
        pytest.fail(
            f"records table has no {n} rows; panel: {el.locator('.tp-records').inner_text()!r}"
            f"; error bar: {el.locator('.tp-error').inner_text()!r}",
            pytrace=False,
        )


def _count(display: str) -> int | None:
    m = re.search(r"●\s*([\d,]+)", display or "")
    return int(m.group(1).replace(",", "")) if m else None
