"""The executed notebooks kept in docs/runs are the committed notebooks: a change to a notebook's code needs a new
recording (issue 24, item 4). The parameters cell and the cell papermill injects are what a run may change."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import series

RUNS = series.ROOT / "docs" / "runs"
RUN_PARAMETERS = {"parameters", "injected-parameters"}


def code_cells(path: Path) -> list[str]:
    """The code cells' sources of a notebook, without its parameters cell and papermill's injected one."""
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and not RUN_PARAMETERS & set(c["metadata"].get("tags", []))]


def stale_cells(recorded: Path, committed: Path) -> list[str]:
    """One line per code cell where a recorded notebook differs from the committed one (empty when they agree)."""
    ran, now = code_cells(recorded), code_cells(committed)
    found = [f"code cell {i}: recorded {a[:60]!r}... committed {b[:60]!r}..."
             for i, (a, b) in enumerate(zip(ran, now)) if a != b]
    if len(ran) != len(now):
        found.append(f"{len(ran)} code cells recorded, {len(now)} committed")
    return found


def recorded_notebooks() -> list[Path]:
    """Every executed notebook kept under docs/runs/<run>/."""
    return sorted(RUNS.glob("*/*.ipynb"))


def test_there_are_recorded_runs_of_every_notebook_on_cpu_and_of_10_to_14_on_gpu():
    names = {p.parent.name: {q.stem for q in p.parent.glob("*.ipynb")} for p in recorded_notebooks()}
    cpu = [run for run in names if run.startswith("ci-")]
    gpu = [run for run in names if run.startswith("h200-")]
    assert cpu and gpu, sorted(names)
    assert {nb.stem for nb in series.notebooks()} <= set().union(*(names[r] for r in cpu)), "a CPU run lacks a notebook"
    assert {nb.stem for nb in series.notebooks() if "10" <= nb.stem[:2] <= "14"} <= set().union(*(names[r] for r in gpu))


@pytest.mark.parametrize("recorded", recorded_notebooks(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_recorded_notebook_runs_the_committed_code(recorded):
    committed = series.NOTEBOOK_DIR / recorded.name
    assert committed.exists(), f"{recorded} records a notebook that is no longer in notebooks/"
    stale = stale_cells(recorded, committed)
    assert not stale, f"{recorded} was recorded from other code than {committed.name}: re-record it\n" + "\n".join(stale)


def test_the_staleness_check_sees_a_changed_cell(tmp_path):
    committed = series.notebooks()[0]
    nb = json.loads(committed.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", []))
    cell["source"] = ["".join(cell["source"]) + "\nprint('one more line')\n"]
    changed = tmp_path / committed.name
    changed.write_text(json.dumps(nb))
    assert stale_cells(committed, committed) == []
    assert len(stale_cells(changed, committed)) == 1
