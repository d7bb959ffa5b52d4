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


def _record_module():
    """scripts/record_run.py, imported as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("record_run", series.ROOT / "scripts" / "record_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_recording_a_run_writes_a_readers_paths_the_committed_markdown_and_the_data(tmp_path, monkeypatch):
    record_run = _record_module()
    monkeypatch.setattr(record_run, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(record_run, "DATA", tmp_path / "data")
    (tmp_path / "data").mkdir()
    committed = series.NOTEBOOK_DIR / "10_resnet18_torchscript.ipynb"
    nb = json.loads(committed.read_text())
    run_dir, device_root, binaries = tmp_path / "h200run", Path("/root/checkout"), Path("/opt/kit/bin")
    markdown = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    markdown["source"] = ["an older text of this cell\n"]
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [
        f"model at {run_dir}/models/resnet18\n", f"server {binaries}/tritonserver from {device_root}/helpers\n"]}]
    (run_dir / "results").mkdir(parents=True)
    (run_dir / committed.name).write_text(json.dumps(nb))
    (run_dir / "report.md").write_text(f"| 10 | ok | {run_dir}/10_resnet18_torchscript.ipynb |\n")
    (run_dir / "results" / "10_resnet18_torchscript.json").write_text(json.dumps({"log": f"{run_dir}/logs/x.log"}))
    (run_dir / "10_latency.csv").write_text("a,b\n1,2\n")

    written = record_run.record(run_dir, "h200-test", data_prefix="h200_test", roots=[device_root], bin_dirs=[binaries])
    kept = json.loads((tmp_path / "runs" / "h200-test" / committed.name).read_text())
    text = "".join(next(c for c in kept["cells"] if c["cell_type"] == "code")["outputs"][0]["text"])
    assert text == "model at runs/h200-test/models/resnet18\nserver tritonserver from $PWD/helpers\n"
    assert next(c for c in kept["cells"] if c["cell_type"] == "markdown")["source"] == \
        next(c for c in json.loads(committed.read_text())["cells"] if c["cell_type"] == "markdown")["source"]
    assert stale_cells(tmp_path / "runs" / "h200-test" / committed.name, committed) == []
    assert "runs/h200-test/10_resnet18_torchscript.ipynb" in (tmp_path / "runs" / "h200-test" / "report.md").read_text()
    assert json.loads((tmp_path / "data" / "h200_test_10_results.json").read_text()) == {"log": "runs/h200-test/logs/x.log"}
    assert (tmp_path / "data" / "h200_test_10_latency.csv").read_text() == "a,b\n1,2\n"
    assert len(written) == 4
    with pytest.raises(FileNotFoundError, match="no executed notebook matching"):
        record_run.record(run_dir, "h200-test", only=["99"])
