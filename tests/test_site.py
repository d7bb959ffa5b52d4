"""The rendered site of an executed run, opened in headless Chromium: every page renders, plots show, links hold."""
from __future__ import annotations

import functools
import http.server
import re
import shutil
import subprocess
import threading
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from helpers import series, site


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is needed (Debian/Ubuntu: apt-get install chromium; .ci/run installs it)"
    return found


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=5000"]


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
    assert len(pages) == 19 + recorded  # home, four docs pages, fourteen notebooks, the recorded GPU runs' notebooks
    profile = tmp_path / "chromium-profile"
    for page in pages:
        path = "/" + str(page.parent.relative_to(out)).replace(".", "") + "/"
        dom = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                              url + path.replace("//", "/")], capture_output=True, text=True, timeout=120).stdout
        heading = re.search(r'<h1 id="([^"]+)"', page.read_text())
        assert heading and f'id="{heading.group(1)}"' in dom and "</body>" in dom, f"{path} did not render"


@pytest.mark.notebooks
def test_plots_are_in_the_notebook_pages(served_site):
    out, _ = served_site
    for name in ("07_local_vs_triton", "11_baseline_benchmark", "13_dynamic_batching_compare"):
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
    for name in ("07_local_vs_triton", "11_baseline_benchmark", "13_dynamic_batching_compare", "14_near_the_limit"):
        html = (out / "notebooks" / name / "index.html").read_text()
        assert html.count("data:image/png;base64,") >= 2, f"{name}: the request path and its own plots"
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
    assert {p.parent.parent.name for p in pages} >= {"h200-2026-12-01", "h200-2026-12-01c"}
    h200 = (out / "recorded" / "h200-2026-12-01c" / "14_near_the_limit" / "index.html").read_text()
    assert "Recorded run <code>h200-2026-12-01c</code>" in h200 and h200.count("data:image/png;base64,") >= 2
