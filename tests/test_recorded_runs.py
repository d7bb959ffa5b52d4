"""The two recordings, docs/runs/cpu and docs/runs/gpu, name the code they ran (run.json: commit and git trees),
and scripts/record_run.py keeps only runs of one committed state of notebooks/, helpers/ and scripts/ (issue 34)."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import recordings, series

RUN_PARAMETERS = {"parameters", "injected-parameters"}
GIT = shutil.which("git") and recordings.git_output("rev-parse", "HEAD") is not None
needs_git = pytest.mark.skipif(not GIT, reason="needs git and the repository's history")


def code_cells(text: str) -> list[str]:
    """The code cells' sources of a notebook's JSON text, without its parameters cell and papermill's injected one."""
    cells = json.loads(text)["cells"]
    return ["".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and not RUN_PARAMETERS & set(c["metadata"].get("tags", []))]


def _head_trees() -> dict[str, str]:
    return {f: recordings.git_output("rev-parse", f"HEAD:{f}").strip() for f in recordings.TRACKED}


def _record_module():
    """scripts/record_run.py, imported as a module."""
    spec = importlib.util.spec_from_file_location("record_run", series.ROOT / "scripts" / "record_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_both_recordings_exist_with_fixed_names_and_a_run_json():
    assert sorted(p.name for p in recordings.RUNS.iterdir()) == ["cpu", "gpu"]
    cpu, gpu = recordings.load("cpu"), recordings.load("gpu")
    assert {nb.stem for nb in series.notebooks()} <= set(cpu["notebooks"]), "the CPU recording lacks a notebook"
    assert {nb.stem for nb in series.notebooks() if "10" <= nb.stem[:2] <= "16"} <= set(gpu["notebooks"])
    for world, run in (("cpu", cpu), ("gpu", gpu)):
        assert run["profile"] == {"cpu": "ci", "gpu": "gpu-local"}[world]
        assert {"cpu_cores", "gpu", "driver"} <= set(run["machine"])
        for stem, entry in run["notebooks"].items():
            assert (recordings.folder(world) / f"{stem}.ipynb").exists(), (world, stem)
            assert set(entry["trees"]) == set(recordings.TRACKED) and entry["seconds"] > 0, (world, stem)


@needs_git
def test_tree_ids_are_gits_own(tmp_path):
    """Computed from the files alone (a device machine's copy has a stale .git), they equal git's tree ids."""
    archive = subprocess.run(["git", "archive", "HEAD", *recordings.TRACKED], cwd=series.ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    assert recordings.tree_ids(tmp_path) == _head_trees()  # no git there: the folder walked
    clean = [f for f in recordings.TRACKED if not recordings.git_output("status", "--porcelain", "--", f)]
    now = recordings.tree_ids()
    assert {f: now[f] for f in clean} == {f: _head_trees()[f] for f in clean}  # git's file list, where clean


def test_a_planted_helpers_change_changes_the_trees(tmp_path):
    for folder in recordings.TRACKED:
        shutil.copytree(series.ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    before = recordings.tree_ids(tmp_path)
    with open(tmp_path / "helpers" / "perf.py", "a") as handle:
        handle.write("\n# planted\n")
    after = recordings.tree_ids(tmp_path)
    assert after["helpers"] != before["helpers"] and after["notebooks"] == before["notebooks"]


@needs_git
def test_the_cpu_recording_ran_the_committed_code():
    """RED until docs/runs/cpu is re-recorded at the final commit (scripts/record_cpu.sh): the CPU recording's trees
    must be HEAD's, so what docs/runs/cpu shows is what the committed notebooks and helpers do."""
    run = recordings.load("cpu")
    head = _head_trees()
    stale = {stem: entry["trees"] for stem, entry in run["notebooks"].items() if entry["trees"] != head}
    assert not stale, (f"docs/runs/cpu ran other code than HEAD ({head}): re-record it with scripts/record_cpu.sh; "
                       f"stale notebooks: {sorted(stale)}")


def test_the_cpu_recordings_notebook_20_read_the_current_gpu_recording():
    """Notebook 20 plans the GPU from docs/runs/gpu/13_knobs.csv: a new GPU recording leaves the CPU recording's 20
    telling of the old one until scripts/record_cpu.sh runs again."""
    executed = json.loads((recordings.folder("cpu") / "20_kubernetes.ipynb").read_text())
    printed = "".join("".join(out.get("text", "")) for cell in executed["cells"] if cell["cell_type"] == "code"
                      for out in cell.get("outputs", []))
    said = re.search(r"GPU recording, [^\n]*13_knobs\.csv[^\n]*\(recorded at ([0-9a-f]+)", printed)
    assert said, "docs/runs/cpu/20_kubernetes.ipynb prints no line naming the GPU recording it read"
    gpu = recordings.load("gpu")["commit"]
    assert gpu.startswith(said.group(1)), (f"docs/runs/cpu's notebook 20 read the GPU recording made at "
                                           f"{said.group(1)}, not docs/runs/gpu's ({gpu[:7]}): re-record the CPU world")


@needs_git
@pytest.mark.parametrize("world", recordings.WORLDS)
def test_a_recorded_notebook_is_the_notebook_of_the_commit_it_names(world):
    run = recordings.load(world)
    for stem, entry in run["notebooks"].items():
        commit = entry.get("commit") or run["commit"]
        assert recordings.git_output("rev-parse", f"{commit}:notebooks") .strip() == entry["trees"]["notebooks"]
        then = recordings.git_output("show", f"{commit}:notebooks/{stem}.ipynb")
        recorded = (recordings.folder(world) / f"{stem}.ipynb").read_text()
        assert then is not None and code_cells(recorded) == code_cells(then), f"{world}/{stem} is not {commit}'s"


@needs_git
def test_the_gpu_label_names_the_commit_and_what_changed_since():
    said = recordings.label("gpu")
    run = recordings.load("gpu")
    assert said.startswith("recorded at ") and all(c[:7] in said for c in recordings.commits(run))
    changed = recordings.changed_since("gpu")
    assert ("changed since: " in said) == bool(changed)
    if changed:
        assert changed[0] in said
        short = recordings.label("gpu", limit=0)  # notebook 20's labels of the GPU rows it plans from
        assert short.startswith(said.split(";")[0]) and short.endswith(f"changed since: {len(changed)} file" + "s" * (len(changed) > 1))
    assert "docs/runs/gpu" in recordings.header("14_near_the_limit")


def _run_folder(tmp_path: Path, trees_by_notebook: dict[str, dict]) -> Path:
    run_dir = tmp_path / "run"
    (run_dir / "results").mkdir(parents=True)
    for stem in trees_by_notebook:
        committed = series.NOTEBOOK_DIR / f"{stem}.ipynb"
        nb = json.loads(committed.read_text())
        code = next(c for c in nb["cells"] if c["cell_type"] == "code" and "header" not in c["metadata"].get("tags", []))
        code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [
            f"model at {run_dir}/models/resnet18\n", "server /opt/kit/bin/tritonserver from /root/checkout/helpers\n"]}]
        (run_dir / committed.name).write_text(json.dumps(nb))
        (run_dir / "results" / f"{stem}.json").write_text(json.dumps({"log": f"{run_dir}/logs/x.log"}))
    (run_dir / "10_latency.csv").write_text("a,b\n1,2\n")
    (run_dir / "report.md").write_text(f"| 10 | ok | {run_dir}/10_resnet18_torchscript.ipynb |\n")
    (run_dir / "run.json").write_text(json.dumps({
        "profile": "gpu-local", "machine": {"cpu_cores": 16, "gpu": "NVIDIA H200", "driver": "580"},
        "notebooks": {s: {"seconds": 1.0, "status": "ok", "trees": t} for s, t in trees_by_notebook.items()}}))
    return run_dir


@needs_git
def test_recording_a_run_writes_a_readers_paths_the_commit_and_replaces_the_folder(tmp_path, monkeypatch):
    record_run = _record_module()
    monkeypatch.setattr(record_run, "RUNS", tmp_path / "runs")
    (tmp_path / "runs" / "gpu").mkdir(parents=True)
    (tmp_path / "runs" / "gpu" / "old.ipynb").write_text("{}")  # an older recording's file: gone afterwards
    head = _head_trees()
    run_dir = _run_folder(tmp_path, {"10_resnet18_torchscript": head, "11_baseline_benchmark": head})
    record_run.record(run_dir, "gpu", roots=[Path("/root/checkout")], bin_dirs=[Path("/opt/kit/bin")])
    kept = tmp_path / "runs" / "gpu"
    assert not (kept / "old.ipynb").exists()
    cells = [c for c in json.loads((kept / "10_resnet18_torchscript.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    header = next(c for c in cells if "header" in c["metadata"].get("tags", []))  # printed again from the recordings
    assert "".join(header["outputs"][0]["text"]) == recordings.header("10_resnet18_torchscript") + "\n"
    text = "".join(next(c for c in cells if "header" not in c["metadata"].get("tags", []))["outputs"][0]["text"])
    assert text == "model at $PWD/runs/gpu/models/resnet18\nserver tritonserver from $PWD/helpers\n"
    run = json.loads((kept / "run.json").read_text())
    assert run["world"] == "gpu" and run["trees"] == head
    assert recordings.git_output("rev-parse", f"{run['commit']}:helpers").strip() == head["helpers"]
    assert {e["commit"] for e in run["notebooks"].values()} == {run["commit"]}
    assert json.loads((kept / "results" / "10_resnet18_torchscript.json").read_text()) == {"log": "$PWD/runs/gpu/logs/x.log"}
    assert (kept / "10_latency.csv").read_text() == "a,b\n1,2\n"


@needs_git
def test_recording_over_another_commits_recording_archives_it_and_history_lists_it(tmp_path, monkeypatch):
    record_run = _record_module()
    monkeypatch.setattr(record_run, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(record_run, "ARCHIVE", tmp_path / "archive")
    old = recordings.git_output("rev-list", "--max-parents=0", "HEAD").split()[0]  # a commit no run ran today
    date = recordings.git_output("show", "-s", "--format=%cs", old).strip()
    kept = tmp_path / "runs" / "gpu"
    (kept / "results").mkdir(parents=True)
    (kept / "run.json").write_text(json.dumps({"world": "gpu", "commit": old}))
    variants = [{"variant": "article baseline", "throughput": 100, "stable": True},
                {"variant": "FP16 + batching", "throughput": 250, "stable": True}]
    (kept / "results" / "14_near_the_limit.json").write_text(json.dumps({"best": "FP16 + batching",
                                                                         "variants": variants}))
    for name in ("report_14.md", "14_variants.csv", "14_variants.png", "14_near_the_limit.ipynb"):
        (kept / name).write_text(name)
    head = _head_trees()
    record_run.record(_run_folder(tmp_path, {"10_resnet18_torchscript": head}), "gpu")
    folder = tmp_path / "archive" / f"gpu-{date}-{old[:7]}"
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "14_variants.csv", "recorded.json", "report_14.md", "results/14_near_the_limit.json"]  # no notebook, no PNG
    recorded = json.loads((folder / "recorded.json").read_text())
    new = json.loads((kept / "run.json").read_text())["commit"]
    assert recorded == {"date": date, "commit": old,
                        "note": f"docs/runs/gpu as recorded at {old[:7]}, replaced by the recording at {new[:7]}"}
    spec = importlib.util.spec_from_file_location("benchmark_numbers", series.ROOT / "scripts" / "benchmark_numbers.py")
    numbers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(numbers)
    monkeypatch.setattr(numbers, "ARCHIVE", tmp_path / "archive")
    assert f"| {date} | gpu-{date}-{old[:7]} | {old[:7]} | - | 250 (FP16 + batching) | 2.5x | - |" in numbers.history()
    with pytest.raises(FileExistsError, match=f"gpu-{date}-{old[:7]} exists: expected a new archive folder"):
        (kept / "run.json").write_text(json.dumps({"world": "gpu", "commit": old}))  # the same recording again
        record_run.record(_run_folder(tmp_path / "again", {"10_resnet18_torchscript": head}), "gpu")


def test_a_run_whose_notebooks_ran_different_code_is_refused(tmp_path, monkeypatch):
    record_run = _record_module()
    monkeypatch.setattr(record_run, "RUNS", tmp_path / "runs")
    one = {"notebooks": "a" * 40, "helpers": "b" * 40, "scripts": "c" * 40}
    run_dir = _run_folder(tmp_path, {"10_resnet18_torchscript": one,
                                     "11_baseline_benchmark": {**one, "helpers": "d" * 40}})
    with pytest.raises(record_run.MixedRun, match=r"10_resnet18_torchscript ran with .*bbbb.*11_baseline_benchmark "
                                                  r"ran with .*dddd"):
        record_run.record(run_dir, "gpu")
    run_dir = _run_folder(tmp_path / "again", {"10_resnet18_torchscript": one})
    if GIT:
        with pytest.raises(record_run.MixedRun, match="no commit of `git log` has the trees"):
            record_run.record(run_dir, "gpu")
    assert not (tmp_path / "runs" / "gpu").exists()


def test_a_run_whose_notebooks_ran_on_different_gpus_is_refused(tmp_path, monkeypatch):
    """A run folder continued on another card is not one recording: record_run names the notebooks and the cards."""
    record_run = _record_module()
    monkeypatch.setattr(record_run, "RUNS", tmp_path / "runs")
    one = {"notebooks": "a" * 40, "helpers": "b" * 40, "scripts": "c" * 40}
    run_dir = _run_folder(tmp_path, {"10_resnet18_torchscript": one, "11_baseline_benchmark": one})
    run = json.loads((run_dir / "run.json").read_text())
    run["notebooks"]["11_baseline_benchmark"]["machine"] = {"cpu_cores": 16, "gpu": "NVIDIA H100 80GB HBM3",
                                                           "driver": "580"}
    (run_dir / "run.json").write_text(json.dumps(run))
    monkeypatch.setattr(record_run, "commit_of", lambda trees, root=None: "f" * 40)
    with pytest.raises(record_run.MixedRun, match=r"different machines.*10_resnet18_torchscript ran on .*H200.*"
                                                  r"11_baseline_benchmark ran on .*H100"):
        record_run.record(run_dir, "gpu")
    assert not (tmp_path / "runs" / "gpu").exists()
    assert record_run.one_machine({"machine": {"gpu": "X"}, "notebooks": {"10": {}}}) == {"gpu": "X"}
    with pytest.raises(record_run.MixedRun, match="names no machine"):
        record_run.one_machine({"notebooks": {"10": {}}})
    old_code = {"machine": {"gpu": "NVIDIA H200"}, "notebooks": {"10": {"call": "t1"}, "11": {"call": "t2"}}}
    with pytest.raises(record_run.MixedRun, match=r"10, 11 name no machine of their own.*several calls"):
        record_run.one_machine(old_code)  # written before each notebook kept its machine: the last call's card only
    assert record_run.one_machine({**old_code, "notebooks": {"10": {"call": "t1"}, "11": {"call": "t1"}}}) == \
        {"gpu": "NVIDIA H200"}  # one call ran on one machine


def test_a_gpu_recording_without_a_named_gpu_is_refused_and_archives_name_their_card(tmp_path, monkeypatch):
    """Review s17: a gpu-local run whose machine names no GPU (nvidia-smi silent) is not a GPU recording; an archived
    recording's History row names the card it ran on."""
    record_run = _record_module()
    monkeypatch.setattr(record_run, "RUNS", tmp_path / "runs")
    one = {"notebooks": "a" * 40, "helpers": "b" * 40, "scripts": "c" * 40}
    run_dir = _run_folder(tmp_path, {"10_resnet18_torchscript": one})
    run = json.loads((run_dir / "run.json").read_text())
    run["machine"] = {"cpu_cores": 16, "gpu": None, "driver": None}
    (run_dir / "run.json").write_text(json.dumps(run))
    monkeypatch.setattr(record_run, "commit_of", lambda trees, root=None: "f" * 40)
    with pytest.raises(record_run.MixedRun, match="made on a GPU; the run's machine names none"):
        record_run.record(run_dir, "gpu")
    assert not (tmp_path / "runs" / "gpu").exists()
    spec = importlib.util.spec_from_file_location("benchmark_numbers", series.ROOT / "scripts" / "benchmark_numbers.py")
    numbers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(numbers)
    assert numbers._archived_card("gpu-2027-01-01-abc1234", {"machine": {"gpu": "NVIDIA H100 80GB HBM3"}}) == \
        "NVIDIA H100 80GB HBM3"
    assert numbers._archived_card("h200-2026-12-02", {}) == "NVIDIA H200"
    assert numbers._archived_card("cpu-2026-12-04-abc1234", {"machine": {"cpu_cores": 2}}) == "CPU (2 cores)"
    assert numbers._archived_card("gpu-2027-01-01-abc1234", {}) == "-"


def test_a_run_whose_notebooks_ran_out_of_number_order_is_refused(tmp_path, monkeypatch):
    record_run = _record_module()
    monkeypatch.setattr(record_run, "RUNS", tmp_path / "runs")
    one = {"notebooks": "a" * 40, "helpers": "b" * 40, "scripts": "c" * 40}
    run_dir = _run_folder(tmp_path, {"14_near_the_limit": one, "15_model_analyzer": one})
    for stem, start in (("14_near_the_limit", "2026-12-04T15:22:06"), ("15_model_analyzer", "2026-12-04T15:17:18")):
        path = run_dir / f"{stem}.ipynb"
        nb = json.loads(path.read_text())
        nb["metadata"]["papermill"] = {"start_time": start}
        path.write_text(json.dumps(nb))
    assert recordings.out_of_order(run_dir) == ["15_model_analyzer", "14_near_the_limit"]
    monkeypatch.setattr(record_run, "commit_of", lambda trees, root=None: "f" * 40)
    with pytest.raises(record_run.MixedRun, match=r"order \['15', '14'\], expected their number order"):
        record_run.record(run_dir, "gpu")
    assert not (tmp_path / "runs" / "gpu").exists()
    nb = json.loads((run_dir / "15_model_analyzer.ipynb").read_text())
    nb["metadata"]["papermill"]["start_time"] = "2026-12-04T15:30:00"
    (run_dir / "15_model_analyzer.ipynb").write_text(json.dumps(nb))
    assert recordings.out_of_order(run_dir) == []
