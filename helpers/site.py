"""A static site of the series (MkDocs Material + mkdocs-jupyter): the README, the docs and the notebooks as one run
executed them, outputs and plots included. `python -m helpers.site [RUN_DIR]`, or `./tutorial docs [RUN_DIR]`."""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .series import ROOT, notebooks

SITE_SOURCE = ROOT / "build" / "site-src"
SITE = ROOT / "build" / "site"
_DOCS = {"docs/benchmarks.md": "benchmarks.md", "docs/workshop.md": "workshop.md", "docs/glossary.md": "glossary.md",
         "docs/cluster.md": "cluster.md"}


def latest_run(runs: Path = ROOT / "runs") -> Path:
    """The newest run folder that executed every notebook (it has report.md and every numbered notebook)."""
    names = {nb.name for nb in notebooks()}
    done = [d for d in runs.iterdir() if (d / "report.md").exists() and names <= {p.name for p in d.glob("*.ipynb")}] \
        if runs.is_dir() else []
    if not done:
        raise FileNotFoundError(f"no complete run in {runs}: run `./tutorial series` first, or pass a run folder")
    return max(done, key=lambda d: d.stat().st_mtime)


def _index(readme: str) -> str:
    """The README as the site's home page, its links to docs/ (and to recorded runs) pointed at the site's pages."""
    for source, page in _DOCS.items():
        readme = readme.replace(f"]({source})", f"]({page})")
    for run in sorted((ROOT / "docs" / "runs").iterdir()):  # a recorded run's folder: its first notebook's page
        first = sorted(run.glob("*.ipynb"))
        if first:
            readme = readme.replace(f"](docs/runs/{run.name})", f"](recorded/{run.name}/{first[0].name})")
    return readme


def assemble(run_dir: Path, target: Path = SITE_SOURCE) -> list[str]:
    """Lay out the pages (markdown and executed notebooks) in `target`; returns the nav entries' files."""
    executed = [run_dir / nb.name for nb in notebooks()]
    missing = [p.name for p in executed if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{run_dir} lacks executed notebooks {missing}: run `./tutorial series` first")
    shutil.rmtree(target, ignore_errors=True)
    (target / "notebooks").mkdir(parents=True)
    (target / "index.md").write_text(_index((ROOT / "README.md").read_text()))
    for source, page in _DOCS.items():
        shutil.copyfile(ROOT / source, target / page)
    for folder in ("img", "data"):
        shutil.copytree(ROOT / "docs" / folder, target / folder)
    shutil.copytree(ROOT / "docs" / "runs", target / "runs", ignore=shutil.ignore_patterns("*.ipynb", "*.md"))
    from . import recordings
    for path in executed:  # papermill's injected-parameters cell stays: it shows what this run used
        shutil.copyfile(path, target / "notebooks" / path.name)
    recorded = []  # the two recordings kept in docs/runs (cpu, gpu), published beside this run, each labelled with its run
    for path in sorted((ROOT / "docs" / "runs").glob("*/*.ipynb")):
        page = Path("recorded") / path.parent.name / path.name
        (target / page).parent.mkdir(parents=True, exist_ok=True)
        notebook = json.loads(path.read_text())
        world = path.parent.name
        said = recordings.label(world) if world in recordings.WORLDS else "not one of the current recordings"
        label = (f"**Recorded run `{world}`**: executed on {_card(world)} (its run.json; conditions in "
                 f"docs/benchmarks.md), "
                 f"kept in the repository under docs/runs/{world}; not this site's CI run; {said}.")
        notebook["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": [label]})
        (target / page).write_text(json.dumps(notebook))
        recorded.append(str(page))
    return ["index.md", *_DOCS.values(), *[f"notebooks/{p.name}" for p in executed], *recorded]


def _title(page: str) -> str:
    """A page's title in the navigation: a notebook's number and name, or the docs page's name."""
    if page.endswith(".ipynb"):
        return re.sub(r"^(\d+)_", r"\1 ", Path(page).stem).replace("_", " ")
    return {"index.md": "Home", "benchmarks.md": "Benchmarks (measured)", "workshop.md": "Instructor's guide",
            "glossary.md": "Glossary", "cluster.md": "Going to a cluster"}[page]


RECORDED_SECTION = "Recorded runs (docs/runs)"


def _card(world: str) -> str:
    """What a recorded folder ran on, from its run.json ('NVIDIA H200', '2 CPU cores')."""
    from . import recordings
    if world not in recordings.WORLDS:
        return "a machine of an older recording"
    machine = recordings.load(world).get("machine") or {}
    return machine.get("gpu") or (f"{machine['cpu_cores']} CPU cores" if machine.get("cpu_cores")
                                  else "machines its run.json names per notebook")


def nav(pages: list[str], run_dir: Path) -> list[dict]:
    """The site's navigation: the docs pages, this run's notebooks under one section, and the recorded runs under
    another, one group per run folder, so a notebook recorded on another machine never sits beside this run's copy
    with the same title."""
    docs = [{_title(p): p} for p in pages if not p.startswith(("notebooks/", "recorded/"))]
    this_run = [{_title(p): p} for p in pages if p.startswith("notebooks/")]
    runs: dict[str, list[dict]] = {}
    for page in (p for p in pages if p.startswith("recorded/")):
        runs.setdefault(Path(page).parent.name, []).append({_title(page): page})
    recorded = [{f"{name} (recorded, {_card(name)})": entries} for name, entries in runs.items()]
    return [*docs, {f"Notebooks (run {run_dir.name})": this_run},
            *([{RECORDED_SECTION: recorded}] if recorded else [])]


def config(pages: list[str], run_dir: Path, source: Path = SITE_SOURCE) -> Path:
    """mkdocs.yml for the assembled pages (written beside them)."""
    import yaml

    path = source.parent / "mkdocs.yml"
    path.write_text(yaml.safe_dump({
        "site_name": "Image classifiers on NVIDIA Triton", "site_description": f"executed notebooks of run {run_dir.name}",
        "docs_dir": str(source), "theme": {"name": "material"},
        "plugins": ["search", {"mkdocs-jupyter": {"execute": False, "include_source": True}}],
        "nav": nav(pages, run_dir)}, sort_keys=False, allow_unicode=True))
    return path


def build(run_dir: Path | None = None, out: Path = SITE) -> Path:
    """Assemble and build the site into `out`; returns its index.html."""
    run_dir = Path(run_dir).resolve() if run_dir else latest_run()
    # the pages are assembled beside `out` when it is not the default: two builds at once (CI's two test workers)
    # must not share one source folder, which each empties first
    out = Path(out)
    source = SITE_SOURCE if out.resolve() == SITE.resolve() else out.resolve().parent / f"{out.name}-src"
    pages = assemble(run_dir, source)
    cfg = config(pages, run_dir, source)
    # from build/: mkdocs-jupyter keeps its conversion cache (.cache/) in the working directory
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(cfg), "-d", str(Path(out).resolve())],
                          capture_output=True, text=True, cwd=cfg.parent)
    if done.returncode != 0:
        raise RuntimeError(f"mkdocs build failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    print(f"site of run {run_dir.name}: {out / 'index.html'} ({len(pages)} pages)")
    return out / "index.html"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", help="an executed run folder (default: the newest complete one in runs/)")
    parser.add_argument("--out", type=Path, default=SITE)
    ns = parser.parse_args()
    build(ns.run_dir, ns.out)
