"""The rendered site of an executed run, opened in headless Chromium: every page renders, plots show, links hold."""
from __future__ import annotations

import fcntl
import functools
import http.server
import json
import os
import re
import select
import shutil
import subprocess
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from helpers import recordings, series, site


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is needed (Debian/Ubuntu: apt-get install chromium; .ci/run installs it)"
    return found


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=5000"]


class _Chromium:
    """One headless Chromium for many pages, driven over its DevTools pipe (`--remote-debugging-pipe`: JSON
    messages, each ending in a NUL byte, read by Chromium on fd 3 and written on fd 4): one launch instead of one
    per page (a launch costs about 2 s of CPU on 2 cores)."""

    def __init__(self, profile: Path, timeout: float = 120.0):
        to_chromium, self._send = os.pipe()
        self._receive, from_chromium = os.pipe()

        def on_fds_3_and_4() -> None:  # through copies above 9: either end may itself be fd 3 or 4 here
            reads, writes = fcntl.fcntl(to_chromium, fcntl.F_DUPFD, 10), fcntl.fcntl(from_chromium, fcntl.F_DUPFD, 10)
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        self.timeout, self._buffer, self._id = timeout, b"", 0
        flags = [f for f in CHROMIUM_FLAGS if not f.startswith("--virtual-time-budget")]  # it holds page loads back
        self.proc = subprocess.Popen([_chromium(), *flags, f"--user-data-dir={profile}",
                                      "--remote-debugging-pipe", "about:blank"], preexec_fn=on_fds_3_and_4,
                                     pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chromium)
        os.close(from_chromium)
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Page.enable", session=self.session)
        except BaseException:
            self.close()  # no browser left behind
            raise

    def _message(self) -> dict:
        while b"\0" not in self._buffer:
            if not select.select([self._receive], [], [], self.timeout)[0]:
                raise TimeoutError(f"Chromium sent nothing for {self.timeout:.0f} s")
            chunk = os.read(self._receive, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed its DevTools pipe (exit {self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        """Send one DevTools command and return its result (events that arrive meanwhile are dropped)."""
        self._id += 1
        os.write(self._send, json.dumps({"id": self._id, "method": method, "params": params,
                                         **({"sessionId": session} if session else {})}).encode() + b"\0")
        while (got := self._message()).get("id") != self._id:
            pass
        if "error" in got:
            raise RuntimeError(f"{method}: {got['error']}")
        return got["result"]

    def dom(self, url: str) -> str:
        """The page's DOM once it has loaded (its scripts run), as --dump-dom prints it."""
        self.call("Page.navigate", session=self.session, url=url)
        while self._message().get("method") != "Page.loadEventFired":
            pass
        return self.call("Runtime.evaluate", session=self.session,
                         expression="document.documentElement.outerHTML")["result"]["value"]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._send)
        os.close(self._receive)


@pytest.fixture(scope="module")
def served_site(ci_run, tmp_path_factory):
    """The site of the ci run, built into a temporary folder and served on localhost."""
    out = tmp_path_factory.mktemp("site")
    site.build(ci_run, out)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield out, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _pages(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("index.html") if "search" not in p.parts)


@pytest.mark.notebooks
def test_every_page_renders_in_chromium(served_site, tmp_path):
    out, url = served_site
    pages = _pages(out)
    recorded = len(list((series.ROOT / "docs" / "runs").glob("*/*.ipynb")))
    archived = len(list((series.ROOT / "docs" / "data").rglob("*.md")))  # the archived runs' reports, published as kept
    # home, four docs pages, this run's notebooks, the recorded runs' notebooks, the archived reports
    assert len(pages) == 5 + len(series.notebooks()) + recorded + archived
    browser = _Chromium(tmp_path / "chromium-profile")
    try:
        for page in pages:
            path = "/" + str(page.parent.relative_to(out)).replace(".", "") + "/"
            dom = browser.dom(url + path.replace("//", "/"))
            heading = re.search(r'<h1 id="([^"]+)"', page.read_text())
            assert heading and f'id="{heading.group(1)}"' in dom and "</body>" in dom, f"{path} did not render"
    finally:
        browser.close()


@pytest.mark.notebooks
def test_plots_are_in_the_notebook_pages(served_site):
    out, _ = served_site
    for name in ("07_local_vs_triton", "11_baseline_benchmark", "13_dynamic_batching_compare", "14_near_the_limit",
                 "16_saturation_and_knee"):
        html = (out / "notebooks" / name / "index.html").read_text()
        assert html.count("data:image/png;base64,") >= 1, f"{name} shows no plot"


@pytest.mark.notebooks
def test_no_internal_link_is_broken(served_site):
    out, _ = served_site
    broken = []
    for page in _pages(out):
        for href in re.findall(r'href="([^"#?]+)', page.read_text()):
            if urlparse(href).scheme or href.startswith(("mailto:", "//")):
                continue
            target = (page.parent / unquote(href)).resolve()
            if not (target.exists() or (target / "index.html").exists()):
                broken.append(f"{page.relative_to(out)} -> {href}")
    assert not broken, broken


@pytest.mark.notebooks
def test_screenshot_of_a_notebook_page(served_site, ci_run, tmp_path):
    out, url = served_site
    shot = ci_run / "site_13.png"
    subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                    f"--screenshot={shot}", "--window-size=1280,2400",
                    f"{url}/notebooks/13_dynamic_batching_compare/"], capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000


@pytest.mark.notebooks
def test_site_shows_the_request_path_the_glossary_and_the_recaps(served_site, tmp_path):
    out, url = served_site
    glossary = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                               f"{url}/glossary/"], capture_output=True, text=True, timeout=120).stdout
    assert "request_path.png" in glossary and (out / "img" / "request_path.png").stat().st_size > 10_000
    assert "knee" in glossary and "instance group" in glossary
    for name in ("07_local_vs_triton", "11_baseline_benchmark", "13_dynamic_batching_compare", "16_saturation_and_knee"):
        html = (out / "notebooks" / name / "index.html").read_text()
        assert html.count("data:image/png;base64,") >= 2, f"{name}: the request path and its own plots"
    near = (out / "notebooks" / "14_near_the_limit" / "index.html").read_text()  # its one plot: the variants
    assert near.count("data:image/png;base64,") >= 1, "14_near_the_limit: the variants' plot"
    for page in sorted((out / "notebooks").glob("*/index.html")):
        assert ">Recap" in page.read_text(), f"{page.parent.name} shows no recap"
    recap = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                            f"{url}/notebooks/13_dynamic_batching_compare/"], capture_output=True, text=True,
                           timeout=120).stdout
    assert ">Recap" in recap and "Check your understanding" in recap


@pytest.mark.notebooks
def test_recorded_gpu_runs_are_published_with_their_label(served_site):
    out, _ = served_site
    pages = sorted((out / "recorded").glob("*/*/index.html"))
    runs = {p.parent.name for p in (series.ROOT / "docs" / "runs").glob("*/*.ipynb")}
    assert runs and {p.parent.parent.name for p in pages} == runs
    gpu = (out / "recorded" / "gpu" / "14_near_the_limit" / "index.html").read_text()
    assert "Recorded run <code>gpu</code>" in gpu and gpu.count("data:image/png;base64,") >= 1  # 14's variants
    assert recordings.label("gpu").split(";")[0] in gpu  # "recorded at <commit>", and what changed since


def _recorded_pages() -> list[str]:
    return [f"recorded/{p.parent.name}/{p.name}" for p in sorted((series.ROOT / "docs" / "runs").glob("*/*.ipynb"))]


def test_recorded_runs_are_grouped_under_their_own_section(tmp_path):
    """Issue 24, what to build 7: the recorded runs' notebooks sit under one labelled section, one group per run
    folder, never beside this run's notebooks with the same title (a fast check of the mkdocs.yml written)."""
    import yaml

    pages = ["index.md", *site._DOCS.values(), *[f"notebooks/{nb.name}" for nb in series.notebooks()],
             *_recorded_pages()]
    (tmp_path / "src").mkdir()
    nav = yaml.safe_load(site.config(pages, Path("runs/ci"), tmp_path / "src").read_text())["nav"]

    def leaves(entries) -> list[tuple[str, str]]:
        return [(title, value) for entry in entries for title, value in entry.items() if isinstance(value, str)]

    assert all("recorded/" not in page for _, page in leaves(nav))  # top level: the docs pages only
    sections = {title: value for entry in nav for title, value in entry.items() if isinstance(value, list)}
    this_run = leaves(sections.pop("Notebooks (run ci)"))
    assert [page for _, page in this_run] == [f"notebooks/{nb.name}" for nb in series.notebooks()]
    recorded = sections.pop(site.RECORDED_SECTION, [])
    assert not sections, sections
    grouped = {title: leaves(value) for entry in recorded for title, value in entry.items()}
    assert sorted(page for group in grouped.values() for _, page in group) == _recorded_pages()
    for title, group in grouped.items():  # each group is one run folder, named in its label
        folders = {page.split("/")[1] for _, page in group}
        folder = folders.pop()
        assert not folders and title == f"{folder} (recorded, {site._card(folder)})", (title, group)
    titles = [title for entry in recorded for title in entry]  # each group names what its run.json says it ran on
    cards = {world: (recordings.load(world).get("machine") or {}) for world in recordings.WORLDS}
    assert f"gpu (recorded, {cards['gpu']['gpu']})" in titles and f"cpu (recorded, {cards['cpu']['cpu_cores']} CPU cores)" in titles
    for group in [this_run, *grouped.values()]:  # no title twice within one list a reader scans
        titles = [title for title, _ in group]
        assert len(titles) == len(set(titles)), titles


# Warnings a recorded notebook may show, each with the words its page must contain to explain it: the warning class
# and the start of its message, then the phrase (in the notebook's markdown) that says why it is there.
EXPLAINED_WARNINGS = {
    # filtered in helpers/__init__.py since notebook 10 says why; where it still shows, the page must say it too
    ("FutureWarning", "`torch.jit."): "torch.jit.load is deprecated",
    # notebook 12 traces notebook 10's TorchScript module (a no-op) and exports it to ONNX (no Python signature)
    ("UserWarning", "The input to trace is already a ScriptModule"): "tracing it is a no-op",
    ("UserWarning", "no signature found for <torch.ScriptMethod"): "\"no signature found\", from the ONNX exporter",
}
# Recordings made before the source of a warning was fixed; the re-recording of issue 24 (what to build 4) replaces
# them. strict: a listed recording that no longer shows the warning fails, so the list cannot go stale.
STALE_RECORDINGS: dict[str, str] = {
    # none since the 2026-12-02c H200 recording and the 2026-12-02 CPU recording (TqdmWarning: ipywidgets now in the
    # environments that record; UserWarning: helpers/export.py filters the TorchScript exporter's note)
}


def _warnings(notebook: dict) -> list[tuple[str, str]]:
    """(class, message) of every Python warning printed in a notebook's outputs (streams, errors, text results)."""
    found = []
    for cell in notebook["cells"]:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            if out.get("output_type") == "error":
                text += f"\n{out.get('ename', '')}: {out.get('evalue', '')}"
            found += re.findall(r"\b([A-Z]\w*Warning): ([^\n]*)", text)
    return found


def _unexplained(path: Path) -> list[tuple[str, str]]:
    import json

    notebook = json.loads(path.read_text())
    markdown = re.sub(r"\s+", " ", " ".join("".join(c["source"]) for c in notebook["cells"]
                                             if c["cell_type"] == "markdown"))
    return [(kind, message) for kind, message in _warnings(notebook)
            if not any(kind == k and message.startswith(m) and phrase in markdown
                       for (k, m), phrase in EXPLAINED_WARNINGS.items())]


def _stale(path: Path) -> set[str]:
    """The warning classes a recording shows that STALE_RECORDINGS accounts for."""
    return {kind for kind, _ in _unexplained(path) if kind in STALE_RECORDINGS}


@pytest.mark.parametrize("path", [pytest.param(p, id=f"{p.parent.name}/{p.stem}") for p in
                                  sorted((series.ROOT / "docs" / "runs").glob("*/*.ipynb"))])
def test_recorded_outputs_show_no_warning_their_page_does_not_explain(path):
    """Issue 24, what to build 7: a warning in a recorded notebook's outputs is either explained in its page or
    listed above as stale (a recording made before its source was fixed), by name and reason; nothing else."""
    unexplained = [(kind, message) for kind, message in _unexplained(path) if kind not in STALE_RECORDINGS]
    assert not unexplained, f"{path.name}: {unexplained}"
    if _stale(path):
        pytest.xfail("; ".join(f"{kind}: {STALE_RECORDINGS[kind]}" for kind in sorted(_stale(path))))


def test_every_stale_warning_listed_is_still_recorded():
    """STALE_RECORDINGS names only warnings some recording still shows: once the runs are re-recorded without them,
    this fails until the entry is removed."""
    shown = set().union(*(_stale(p) for p in (series.ROOT / "docs" / "runs").glob("*/*.ipynb")))
    assert set(STALE_RECORDINGS) <= shown, f"no recording shows {set(STALE_RECORDINGS) - shown}: remove it"


def test_the_warning_check_catches_a_planted_warning(tmp_path):
    """The check above can fail: a recorded notebook with an unexplained warning is caught; explained, it is not."""
    import json

    source = sorted((series.ROOT / "docs" / "runs").glob("*/*.ipynb"))[0]
    notebook = json.loads(source.read_text())
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "source": [], "outputs": [
        {"output_type": "stream", "name": "stderr",
         "text": ["x.py:1: FutureWarning: `torch.jit.load` is deprecated. Please switch to `torch.export`.\n"]}]})
    planted = tmp_path / source.name
    planted.write_text(json.dumps(notebook))
    assert ("FutureWarning", "`torch.jit.load` is deprecated. Please switch to `torch.export`.") in _unexplained(planted)
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["why: torch.jit.load is deprecated"]})
    planted.write_text(json.dumps(notebook))
    assert ("FutureWarning", "`torch.jit.load` is deprecated. Please switch to `torch.export`.") not in _unexplained(planted)
