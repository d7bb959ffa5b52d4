"""`./tutorial series`'s console: one line per notebook, kernel noise in the run's log, a failure told in a few lines,
the rest skipped or run as the profile says, and a closing table against the recorded times."""
from __future__ import annotations

import ast
import json
import re
import signal
import subprocess
import sys
import time

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers import series


def _notebook(folder, name: str, *code: str) -> None:
    cells = [new_markdown_cell(f"# {name}"), new_code_cell("run_dir = '.'\nseconds = 0.0"), *map(new_code_cell, code)]
    cells[1].metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(folder / f"{name}.ipynb"))


@pytest.fixture
def short_notebooks(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    # C-level writes to the kernel's stderr, as TensorFlow's and Triton's logs are
    _notebook(folder, "01_quick", "import os, time\nos.write(2, b'oneDNN custom operations are on\\n')\n"
                                  "time.sleep(seconds)\nprint('a result')")
    _notebook(folder, "02_fails", "x = 1\nraise ValueError('boom: the knob had no stable setting')")
    _notebook(folder, "03_after", "print('after')")
    return folder


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def test_one_line_per_notebook_noise_in_the_log_failure_in_a_few_lines(short_notebooks, tmp_path, capfd):
    run = tmp_path / "run"
    with pytest.raises(series.SeriesFailed, match="02_fails"):
        series.run_series(run, paths=sorted(short_notebooks.glob("*.ipynb")), stream=sys.stdout)
    out, err = capfd.readouterr()
    lines = _lines(out)
    assert lines[0].startswith("01_quick") and lines[0].split()[1] == "ok"
    assert lines[1].startswith("02_fails FAILED after")
    assert lines[2] == "cell 4 of 4:"  # papermill's injected-parameters cell counts
    assert lines[3:5] == ["| x = 1", "| raise ValueError('boom: the knob had no stable setting')"]
    assert lines[5] == "ValueError: boom: the knob had no stable setting"
    assert lines[6].startswith("full traceback: ") and str(run / "logs" / "series.log") in lines[6]
    assert lines[7] == "03_after skipped (after 02_fails failed)"
    table = lines[lines.index("notebook status      seconds recorded"):]
    assert [row.split()[:2] for row in table[1:5]] == [["01_quick", "ok"], ["02_fails", "FAILED"],
                                                       ["03_after", "skipped"], ["total", "1/3"]]
    assert any(line.startswith("report: ") for line in lines) and any("./tutorial docs" in line for line in lines)
    assert len(lines) <= 16, out
    noise = "oneDNN custom operations"
    assert noise not in out and noise not in err and "running over TCP" not in out + err
    assert noise in (run / "logs" / "series.log").read_text()  # kept, where a reader can look it up
    assert "| 03_after | skipped |" in (run / "report.md").read_text()
    recorded = json.loads((run / "run.json").read_text())  # written as each notebook finished; skipped ones absent
    assert {k: v["status"] for k, v in recorded["notebooks"].items()} == {"01_quick": "ok", "02_fails": "FAILED"}
    assert set(recorded["trees"]) == {"notebooks", "helpers", "scripts"} and recorded["profile"] == "article"
    assert recorded["notebooks"]["01_quick"]["trees"] == recorded["trees"] and recorded["machine"]["cpu_cores"]


def test_a_profile_may_run_the_rest_after_a_failure(short_notebooks, tmp_path, monkeypatch, capfd):
    profiles = tmp_path / "profiles.yml"
    profiles.write_text("keepgoing:\n  on_failure: continue\n  all: {seconds: 0.1}\n")
    monkeypatch.setattr(series, "PROFILES_FILE", profiles)
    with pytest.raises(series.SeriesFailed):
        series.run_series(tmp_path / "run", "keepgoing", paths=sorted(short_notebooks.glob("*.ipynb")),
                          stream=sys.stdout)
    lines = _lines(capfd.readouterr().out)
    assert next(line for line in lines if line.startswith("03_after")).split()[1] == "ok"


def test_a_chained_call_into_the_same_run_folder_adds_to_its_run_json(short_notebooks, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    first = series.update_run_file(run.resolve(), "01_quick", "ok", 1.0, "ci", {"helpers": "a"}, {"cpu_cores": 2})
    series.update_run_file(run.resolve(), "03_after", "ok", 2.0, "ci", {"helpers": "a"}, {"cpu_cores": 2})
    recorded = json.loads(first.read_text())
    assert list(recorded["notebooks"]) == ["01_quick", "03_after"] and recorded["trees"] == {"helpers": "a"}
    series.update_run_file(run.resolve(), "02_fails", "ok", 2.0, "ci", {"helpers": "b"}, {"cpu_cores": 2})
    recorded = json.loads(first.read_text())
    assert recorded["trees"] is None and recorded["commit"] is None  # notebooks that ran different code: no one tree
    series.update_run_file(run.resolve(), "04_later", "ok", 1.0, "ci", {"helpers": "b"}, {"cpu_cores": 2}, "2026-12-05T08:00:00Z")
    recorded = json.loads(first.read_text())["notebooks"]
    assert recorded["04_later"]["call"] == "2026-12-05T08:00:00Z" and "call" not in recorded["01_quick"]


def test_a_call_on_another_machine_keeps_each_notebooks_machine_and_clears_the_runs(tmp_path):
    """A chained call that lands on another card: each notebook keeps the machine it ran on, the run names none."""
    h200 = {"cpu_cores": 16, "gpu": "NVIDIA H200", "driver": "580"}
    h100 = {"cpu_cores": 16, "gpu": "NVIDIA H100 80GB HBM3", "driver": "580"}
    series.update_run_file(tmp_path, "10_a", "ok", 1.0, "gpu-local", {"helpers": "a"}, h200)
    assert json.loads((tmp_path / "run.json").read_text())["machine"] == h200
    series.update_run_file(tmp_path, "14_b", "ok", 1.0, "gpu-local", {"helpers": "a"}, h100)
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["machine"] is None and run["notebooks"]["10_a"]["machine"] == h200
    assert run["notebooks"]["14_b"]["machine"] == h100
    old = {"machine": h200, "notebooks": {"10_a": {"seconds": 1.0, "status": "ok", "trees": {"helpers": "a"}}}}
    (tmp_path / "run.json").write_text(json.dumps(old))  # written before each notebook kept its machine
    series.update_run_file(tmp_path, "14_b", "ok", 1.0, "gpu-local", {"helpers": "a"}, h100)
    run = json.loads((tmp_path / "run.json").read_text())  # the old entry keeps the run's machine, not the new call's
    assert run["machine"] is None and run["notebooks"]["10_a"]["machine"] == h200


def test_the_report_rounds_a_time_as_run_json_keeps_it(tmp_path):
    """run.json keeps a tenth of a second and the pages print it whole: report.md says the same whole seconds."""
    series.update_run_file(tmp_path, "20_kubernetes", "ok", 14.54, "ci", {"helpers": "a"}, {"cpu_cores": 2})
    kept = json.loads((tmp_path / "run.json").read_text())["notebooks"]["20_kubernetes"]["seconds"]
    report = series.write_report(tmp_path, [{"notebook": "20_kubernetes", "status": "ok", "seconds": 14.54}]).read_text()
    assert f"| 20_kubernetes | ok | {kept:.0f} |  |" in report and kept == 14.5


def test_a_later_calls_report_lists_the_earlier_calls_notebooks_and_names_the_card(tmp_path):
    """Chained calls into one folder: report.md lists every notebook run.json holds, not only the last call's."""
    h200 = {"cpu_cores": 16, "gpu": "NVIDIA H200", "driver": "580"}
    series.update_run_file(tmp_path, "10_a", "ok", 15.0, "gpu-local", {"helpers": "a"}, h200)
    series.update_run_file(tmp_path, "16_b", "ok", 220.0, "gpu-local", {"helpers": "a"}, h200)
    report = series.write_report(tmp_path, [{"notebook": "16_b", "status": "ok", "seconds": 220.0, "expected": 257}])
    text = report.read_text()
    assert "| 10_a | ok | 15 |  |" in text and "| 16_b | ok | 220 | 257 |" in text
    assert text.index("| 10_a") < text.index("| 16_b") and "Machine: NVIDIA H200, 16 CPU cores, gpu-local profile." in text


def test_expected_times_come_from_the_profiles_recorded_runs(tmp_path, monkeypatch):
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "report.md").write_text("| notebook | status | seconds |\n|---|---|---|\n"
                                                "| 01_quick | ok | 7 |\n| 02_fails | FAILED | 3 |\n")
    profiles = tmp_path / "profiles.yml"
    profiles.write_text(f"p:\n  recorded: [{tmp_path / 'rec'}]\nq:\n  on_failure: sometimes\n")
    monkeypatch.setattr(series, "PROFILES_FILE", profiles)
    assert series.recorded_seconds("p") == {"01_quick": 7.0}  # a failed row sets no expectation
    with pytest.raises(ValueError, match="on_failure must be 'stop' or 'continue'; got 'sometimes'"):
        series.on_failure("q")


def test_every_profile_names_recorded_runs_that_exist():
    for profile in ("ci", "gpu-local"):
        times = series.recorded_seconds(profile)
        assert times and set(times) <= {nb.stem for nb in series.notebooks()}, profile


def test_each_notebook_gets_a_fresh_kernel_started_while_the_one_before_runs(tmp_path, capfd):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    probe = ("import json, os, time, psutil\n"
             "print(json.dumps({'pid': os.getpid(), 'inherited': 'x' in globals(),\n"
             "                  'siblings': [p.pid for p in psutil.Process(os.getppid()).children()]}))")
    _notebook(folder, "01_first", "x = 1", probe)
    _notebook(folder, "02_second", probe)
    _notebook(folder, "03_fails", probe, "raise ValueError('stop here')")
    _notebook(folder, "04_skipped", probe)  # its kernel is started while 03 runs, then stopped unused
    run = tmp_path / "run"
    before = _kernels_of_this_process()  # none, unless another test of this worker left one
    with pytest.raises(series.SeriesFailed, match="03_fails"):
        series.run_series(run, paths=sorted(folder.glob("*.ipynb")), stream=sys.stdout)
    seen = [json.loads(next(c for c in nbformat.read(str(run / f"{name}.ipynb"), as_version=4).cells
                            if c.source == probe).outputs[0].text) for name in ("01_first", "02_second", "03_fails")]
    assert len({s["pid"] for s in seen}) == 3  # fresh kernels: 01 defined x, the next two do not see it
    assert [s["inherited"] for s in seen] == [True, False, False]
    assert seen[1]["pid"] in seen[0]["siblings"] and seen[2]["pid"] in seen[1]["siblings"]  # each started ahead
    assert not [p for p in (s["pid"] for s in seen) if psutil.pid_exists(p)]  # all exited and reaped
    assert _kernels_of_this_process() == before  # 04's kernel too
    assert "04_skipped skipped" in capfd.readouterr().out


def _kernels_of_this_process() -> set[int]:
    """Kernels this process started (its children running ipykernel), not other children such as a background run."""
    found = set()
    for child in psutil.Process().children():
        try:
            if "ipykernel_launcher" in " ".join(child.cmdline()) and child.status() != psutil.STATUS_ZOMBIE:
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def test_ctrl_c_ends_the_run_and_every_kernel_it_started(tmp_path):
    """Ctrl-C during a notebook: the line says interrupted, the report says how far the run got, and neither the
    running kernel nor the one started ahead for the next notebook is left (kernels run in sessions of their own)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    marker = tmp_path / "started.json"
    _notebook(folder, "01_long", "import json, os, time, psutil\n"
              "pids = json.dumps([p.pid for p in psutil.Process(os.getppid()).children()])\n"
              f"open({str(marker) + '.part'!r}, 'w').write(pids)\nos.replace({str(marker) + '.part'!r}, {str(marker)!r})\n"
              "time.sleep(60)")
    _notebook(folder, "02_next", "print('never')")
    script = ("import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
              f"sys.path.insert(0, {str(series.ROOT)!r})\nfrom pathlib import Path\nfrom helpers import series\n"
              f"series.run_series({str(tmp_path / 'run')!r}, paths=sorted(Path({str(folder)!r}).glob('*.ipynb')))\n")
    runner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and runner.poll() is None:
        time.sleep(0.1)
    if not marker.exists():
        runner.kill()
        pytest.fail(f"01_long did not start within 60 s (runner exit {runner.poll()}):\n{runner.communicate()[1][-2000:]}")
    kernels = json.loads(marker.read_text())
    assert len(kernels) == 2  # the running one and the next one's, started ahead
    runner.send_signal(signal.SIGINT)
    out, err = runner.communicate(timeout=30)
    assert runner.returncode != 0 and "KeyboardInterrupt" in err
    assert "01_long" in out and "interrupted" in out and "02_next" not in out
    assert "| 01_long | interrupted |" in (tmp_path / "run" / "report.md").read_text()
    assert "Task exception was never retrieved" not in err
    time.sleep(0.5)
    assert [pid for pid in kernels if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE] == []


def test_leading_imports_stop_at_the_first_other_statement(tmp_path):
    _notebook(tmp_path, "01_imports", "import os\nfrom pathlib import Path as P", "import json\nx = 1\nimport sys",
              "import re")
    assert series.leading_imports(tmp_path / "01_imports.ipynb") == ["import os", "from pathlib import Path as P",
                                                                     "import json"]
    _notebook(tmp_path, "02_magic", "import os\n%matplotlib inline\nimport re")
    _notebook(tmp_path, "03_star", "import os\nfrom os.path import *\nimport re")
    _notebook(tmp_path, "04_none", "print('no imports first')\nimport os")
    found = [series.leading_imports(tmp_path / f"{n}.ipynb") for n in ("02_magic", "03_star", "04_none")]
    assert found == [[], ["import os"], []]


def test_a_notebooks_leading_imports_run_in_its_kernel_while_the_one_before_runs(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    (folder / "slowmod.py").write_text("import time\ntime.sleep(2)\nFINISHED = time.time()\nprint('slowmod loaded')\n")
    (folder / "envmod.py").write_text("import os\nSEEN = os.environ.get('SET_BY_THE_NOTEBOOK')\n")
    _notebook(folder, "00_zero", "x = 0")
    _notebook(folder, "01_first", "import json, time\ntime.sleep(4)\nprint(json.dumps({'end': time.time()}))")
    _notebook(folder, "02_second", "import slowmod\nimport os\nos.environ['SET_BY_THE_NOTEBOOK'] = 'yes'\nimport envmod",
              "import json\nprint(json.dumps({'finished': slowmod.FINISHED, 'env': envmod.SEEN,\n"
              "                  'left': '_series_warm_up' in globals()}))")
    run = tmp_path / "run"
    series.run_series(run, paths=sorted(folder.glob("*.ipynb")), stream=sys.stdout)
    first = nbformat.read(str(run / "01_first.ipynb"), as_version=4)
    second = nbformat.read(str(run / "02_second.ipynb"), as_version=4)
    end = json.loads(first.cells[-1].outputs[0].text)["end"]
    seen = json.loads(second.cells[-1].outputs[0].text)
    assert seen["finished"] < end  # imported while 01 still ran
    assert seen["env"] == "yes"  # the import after another statement ran in its turn, not ahead
    assert seen["left"] is False
    assert [c.execution_count for c in second.cells if c.cell_type == "code"] == [1, 2, 3, 4]  # the warm-up is not one
    log = (run / "logs" / "series.log").read_text()
    assert "runs the 2 import statements 02_second.ipynb begins with" in log
    assert "02_second.ipynb's imports ran ahead" in log and "they printed:\nslowmod loaded" in log
    # 02's kernel is started before 01 waits for its own imports, so that 02's run meanwhile
    assert log.index("started for 02_second.ipynb") < log.index("01_first.ipynb's imports ran ahead")


def test_imports_that_fail_ahead_leave_the_notebook_a_fresh_kernel_and_its_own_error(tmp_path, capfd):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    _notebook(folder, "01_first", "x = 1")
    _notebook(folder, "02_missing", "import module_that_is_not_installed")
    run = tmp_path / "run"
    before = _kernels_of_this_process()
    with pytest.raises(series.SeriesFailed, match="02_missing"):
        series.run_series(run, paths=sorted(folder.glob("*.ipynb")), stream=sys.stdout)
    out = capfd.readouterr().out
    assert "ModuleNotFoundError: No module named 'module_that_is_not_installed'" in out  # met in the notebook's cell
    log = (run / "logs" / "series.log").read_text()
    assert "02_missing.ipynb's imports ahead failed (ModuleNotFoundError" in log and "a fresh kernel runs" in log
    assert _kernels_of_this_process() == before


def test_a_timed_cell_waits_for_the_imports_sent_ahead(tmp_path):
    """The next notebook's imports run while this one starts, but never during a cell that measures (tagged timed)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    (folder / "slowmod.py").write_text("import time\ntime.sleep(3)\nFINISHED = time.time()\n")
    _notebook(folder, "00_zero", "x = 0")
    _notebook(folder, "01_timed", "import json, time\nprint(json.dumps({'timed_from': time.time()}))")
    nb = nbformat.read(str(folder / "01_timed.ipynb"), as_version=4)
    nb.cells[-1].metadata["tags"] = [series.TIMED_TAG]
    nbformat.write(nb, str(folder / "01_timed.ipynb"))
    _notebook(folder, "02_next", "import slowmod\nprint(slowmod.FINISHED)")
    run = tmp_path / "run"
    series.run_series(run, paths=sorted(folder.glob("*.ipynb")), stream=sys.stdout)
    timed_from = json.loads(nbformat.read(str(run / "01_timed.ipynb"), as_version=4).cells[-1].outputs[0].text)["timed_from"]
    finished = float(nbformat.read(str(run / "02_next.ipynb"), as_version=4).cells[-1].outputs[0].text)
    assert finished <= timed_from  # the 3-s import ahead was over before the timed cell began
    assert "02_next.ipynb's imports ran ahead" in (run / "logs" / "series.log").read_text()
    assert "waited for them before 01_timed.ipynb's timed cell" in (run / "logs" / "series.log").read_text()


def _measuring(cells: list, timing: re.Pattern) -> re.Pattern:
    """Calls that measure in a notebook: the timing helpers and the notebook's own functions that call them."""
    from IPython.core.inputtransformer2 import TransformerManager

    defined = {}
    for cell in cells:
        if cell.cell_type == "code":
            source = TransformerManager().transform_cell(cell.source)  # magics as the kernel runs them
            defined.update({node.name: ast.get_source_segment(source, node)
                            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)})
    wrappers, pattern = set(), timing
    while True:  # a function that calls one that measures measures too
        found = {name for name, body in defined.items() if pattern.search(body)}
        if found == wrappers:
            return pattern
        wrappers = found
        pattern = re.compile(timing.pattern + "".join(rf"|(?<![\w.]){name}\(" for name in sorted(wrappers)))


def test_every_cell_that_measures_is_tagged_timed():
    """The runner finishes its background work before a cell tagged `timed`: a cell that calls a timing helper, or a
    function of its notebook that does, and is not tagged would share the machine with the next notebook's imports."""
    timing = re.compile(r"\b(bench\.(time_calls|device_throughput)|perf\.(run|measure_level|repeat_level|"
                        r"memory_trace|c_api_level)|analyzer\.run(_docker)?|measured\.measure|client_batches)\(")
    untagged = []
    for nb in series.notebooks():
        cells = nbformat.read(str(nb), as_version=4).cells
        measuring = _measuring(cells, timing)
        untagged += [f"{nb.name} cell {i}" for i, cell in enumerate(cells)
                     if cell.cell_type == "code" and measuring.search(cell.source)
                     and series.TIMED_TAG not in cell.metadata.get("tags", [])]
    assert untagged == []


def test_a_ci_run_executing_in_another_process_is_seen_through_its_lock(tmp_path):
    """conftest's early readers wait for a notebook only while another worker holds the ci run's lock."""
    import subprocess
    import sys

    from conftest import _held_by_another

    lock = tmp_path / "ci-run.lock"
    assert not _held_by_another(lock)  # no lock file: nobody runs it
    lock.touch()
    assert not _held_by_another(lock)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; d = os.open(sys.argv[1], os.O_RDONLY); "
                               "fcntl.flock(d, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert _held_by_another(lock)
    finally:
        holder.kill()
        holder.wait()
    assert not _held_by_another(lock)
