"""docs/benchmarks.md is rendered whole from the recordings, and every generated block equals its rendering
(scripts/benchmark_numbers.py)."""
from __future__ import annotations

import importlib.util
import inspect
import json
import re

import pytest

from helpers import series

spec = importlib.util.spec_from_file_location("benchmark_numbers", series.ROOT / "scripts" / "benchmark_numbers.py")
numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(numbers)


def test_every_generated_page_equals_its_rendering():
    """benchmarks.md whole and the blocks of README and docs: run `python scripts/benchmark_numbers.py --write`
    (last, before committing: the labels name the files changed since each recording)."""
    for page, text in numbers.rendered().items():
        assert page.read_text() == text, f"{page.relative_to(series.ROOT)} differs from its rendering: " \
                                         f"python scripts/benchmark_numbers.py --write"


def test_a_hand_edited_number_is_caught():
    text = numbers.DOC.read_text()
    row = re.search(r"^\| article baseline[^|]*\| (\d+) \|", text, re.M)
    assert row, "benchmarks.md has no article-baseline row in 14's table"
    assert numbers.benchmarks() != text.replace(row.group(0), row.group(0).replace(row.group(1), "99999"), 1)


def test_one_renderer_and_no_function_per_recording():
    names = [name for name, _ in inspect.getmembers(numbers, inspect.isfunction)]
    assert not [n for n in names if re.search(r"20\d\d|12_0|_0[1-9][a-z]?$|ma$", n)], names
    source = (series.ROOT / "scripts" / "benchmark_numbers.py").read_text()
    assert not re.search(r"(?:h200|gpu|cpu)[-_]20\d\d", source), "the renderer names a dated recording"


def test_a_section_whose_data_is_absent_says_so(tmp_path):
    folder = tmp_path / "gpu"
    (folder / "results").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"profile": "gpu-local", "machine": {"cpu_cores": 1},
                                                 "notebooks": {"13_dynamic_batching_compare": {"seconds": 1.0}}}))
    page = numbers.benchmarks(gpu=folder, cpu=folder)
    assert "Not in this recording: no results of notebook 14" in page
    assert "Not in this recording: no results hold saturation" in page and "no results hold levers" in page
    assert "Not in this recording: no results of notebook 15" in page


def test_the_knee_and_levers_are_found_in_16_or_in_a_recording_from_before_the_split(tmp_path):
    """Notebook 14 was split (issue 34 item 5): the knee, levers and saturation plot are 16's now and 14's in older
    recordings; the renderer finds them by what the results hold and the plot by its name's suffix."""
    knee = {"saturation": [{"concurrency": 16}, {"concurrency": 32}], "knee": {"concurrency": 16, "throughput": 900.0},
            "levers": [{"lever": "1 image per request", "throughput": 800.0, "x batch-1": 1.0}],
            "inprocess": {"8": 1200.0}, "inprocess_streams": 2, "inprocess_comparable": True, "knee_batch": 8}
    for notebook, stem in (("16", "16_saturation_and_knee"), ("14", "14_near_the_limit")):
        folder = tmp_path / notebook / "gpu"
        (folder / "results").mkdir(parents=True)
        (folder / "results" / f"{stem}.json").write_text(json.dumps(knee))
        (folder / f"{notebook}_saturation.png").write_bytes(b"png")
        rec = numbers.recording(folder)
        rec["folder"] = numbers.ROOT / "docs" / "runs" / "gpu"  # links are made relative to docs/
        knee_lines, lever_lines = numbers.knee(rec), numbers.levers(rec)
        assert knee_lines[0].startswith(f"Notebook {notebook}. Knee") and "900 infer/s at c=16" in knee_lines[0]
        assert "In-process at batch 8, 2 stream(s): 1200 img/s." == knee_lines[1]
        assert knee_lines[-1] == f"![{notebook}_saturation.png](runs/gpu/{notebook}_saturation.png)"
        assert lever_lines[0].startswith(f"Notebook {notebook},") and "| 1 image per request | 800 |" in "\n".join(lever_lines)
        assert "two servers" not in lever_lines[-1]
    # a recording with the in-process rate at the server's mean batch (linear between the whole batches around it)
    (folder / "results" / f"{stem}.json").write_text(json.dumps({**knee, "knee_batch": 6.61, "inprocess_at_knee": 1150.0,
                                                                 "above_knee": 32}))
    assert numbers.knee({**numbers.recording(folder), "folder": rec["folder"]})[1] == (
        "In-process at the server's mean batch at the knee, 6.61 (time per batch linear between the whole batches around it), "
        "2 stream(s): 1150 img/s.")
    # a search that ended at its top level within the budget, at a whole mean batch
    (folder / "results" / f"{stem}.json").write_text(json.dumps({**knee, "knee_batch": 2.0, "inprocess_at_knee": 48.0,
                                                                 "above_knee": None}))
    assert numbers.knee({**numbers.recording(folder), "folder": rec["folder"]})[1] == (
        "In-process at the server's mean batch at the top level searched (no knee reached), 2 (a whole batch), "
        "2 stream(s): 48 img/s.")
    # a reference slower than the server's own batches is not set against the served rate, and the page says so
    (folder / "results" / f"{stem}.json").write_text(json.dumps({**knee, "inprocess_comparable": False}))
    assert numbers.knee({**numbers.recording(folder), "folder": rec["folder"]})[1].startswith(
        "In-process is not set against the served rate: the reference took longer per batch")
    # slower because the server kept fewer instances busy: the rates compare, the page says there is no split
    (folder / "results" / f"{stem}.json").write_text(json.dumps({**knee, "knee_batch": 6.61, "inprocess_at_knee": 1150.0, "above_knee": 32, "inprocess_comparable": False,
                                                                 "inprocess_rates_compare": True}))
    assert numbers.knee({**numbers.recording(folder), "folder": rec["folder"]})[1].endswith(
        "2 stream(s): 1150 img/s. Its batches took longer than the server's compute, and the server kept fewer of its "
        "instances busy than the reference ran streams: the rates compare, and notebook 16 prints the ratio as the busy "
        "share times in-process batch time over an instance's time per execution, not split by stage.")
    knee["levers"].append({"lever": "C API", "throughput": 900.0, "x batch-1": 1.125, "server": "perf_analyzer's own server"})
    (folder / "results" / f"{stem}.json").write_text(json.dumps(knee))
    said = numbers.levers(numbers.recording(folder))[-1]
    assert said.endswith("The C API row ran in perf_analyzer's own server, the others in notebook 14's: its ratio also "
                         "holds whatever differs between two servers (that server holds this model only), and its "
                         "inputs go in host memory, not over gRPC."), said  # 14 kept no shared-memory row here
    (folder / "results" / f"{stem}.json").write_text(json.dumps({**knee, "best": "UINT8 + batching, system shm"}))
    said = numbers.levers(numbers.recording(folder))[-1]  # numbers review s26b F2: the transport 14 kept is named
    assert said.endswith("and its inputs go in host memory, not shared memory."), said


def _latency_row(label: str, throughput: float, mean_ms: float, concurrency: int = 16) -> dict:
    """A stable batch-1 row whose latency parts add up to mean_ms."""
    return {"variant": label, "concurrency": concurrency, "throughput": throughput, "stable": True,
            **{part: 0.0 for part in numbers.LATENCY_PARTS}, "queue_ms": mean_ms}


def test_each_row_shows_concurrency_over_mean_latency_beside_its_printed_rate():
    # 16 / 2 ms = 8000/s; a row of 4 images per request at concurrency 4 and 2 ms: 8000 images/s; an unstable row: none
    rows = [_latency_row("gRPC", 7000, 2.0), {**_latency_row("x4", 7900, 2.0, concurrency=4), "images/request": 4},
            {**_latency_row("unstable", 7900, 2.0), "stable": False}]
    assert numbers._little_column(rows) == [numbers.LITTLE_COLUMN]
    assert [r["c_over_latency"] for r in rows] == [pytest.approx(8000), pytest.approx(8000), None]
    assert numbers._little_column([{"variant": "no latency parts kept", "throughput": 10.0}]) == []
    assert numbers._little_ratio(rows[0], _latency_row("base", 700, 20.0)) == pytest.approx(10.0)
    page = numbers.DOC.read_text()
    assert "| c / latency |" in page and numbers.LITTLE_NOTE in page  # 13's knobs, 14's variants, 16's levers


def test_the_cause_of_a_gap_to_littles_law_is_printed_only_where_rows_lie_far_below_it():
    """Numbers review s22 #4 and its fix review P2: the note names the rows that lie far below c / latency; the cause
    (tensors copied before the clock starts) only where every one of them carries its tensors; otherwise the span."""
    name, carries = (lambda r: r["variant"]), (lambda r: "shm" not in r["variant"])  # noqa: E731
    apart = [_latency_row("shm a", 7968, 2.0), _latency_row("shm b", 7960, 2.0), _latency_row("gRPC", 7300, 2.0)]
    numbers._little_column(apart)
    said = numbers._little_note(apart, name, carries)[0]
    assert said.startswith(numbers.LITTLE_NOTE) and "Far below it: gRPC (8.8%)" in said and "infer_context.cc" in said
    odd = [_latency_row("shm a", 7968, 2.0), _latency_row("shm b", 7960, 2.0), _latency_row("shm c", 7300, 2.0)]
    numbers._little_column(odd)
    said = numbers._little_note(odd, name, carries)[0]
    assert "Far below it: shm c (8.8%)" in said and "infer_context" not in said and "does not measure why" in said
    near = [_latency_row("shm", 7900, 2.0), _latency_row("gRPC", 7820, 2.0)]
    numbers._little_column(near)
    said = numbers._little_note(near, name, carries)[0]
    assert said.endswith("Every row here printed 1.2% to 2.2% below it.") and "infer_context" not in said
    assert numbers._little_note([{"variant": "none", "throughput": 1.0}], name, carries) == []
    # a repeated row of two runs: the median rate can lie above the middle run's c / latency; its own rate cannot
    pair = [{**_latency_row("shm", 8100, 2.0), "middle_throughput": 7900}, _latency_row("gRPC", 7820, 2.0)]
    numbers._little_column(pair)
    assert numbers._little_note(pair, name, carries)[0].endswith("Every row here printed 1.2% to 2.2% below it.")


def test_the_history_table_lists_every_archived_recording():
    page = numbers.DOC.read_text()
    history = page[page.index("## History"):]
    for folder in numbers.ARCHIVE.iterdir():
        assert f"| {folder.name} |" in history, folder.name
    assert "2026" not in page[:page.index("## History")].replace("Note: retrofitted", ""), \
        "an older recording is cited outside the history table"


def test_14s_table_shows_each_rows_screening_run_and_a_dash_where_a_recording_lacks_it(tmp_path):
    """A finalist's screening run (results `screened`) beside its median; a single run is its own screening run;
    a finalist of a recording made before `screened` was kept shows '-'."""
    variants = [{"variant": "article baseline: FP32", "concurrency": 16, "throughput": 600.0, "p99_ms": 9.0,
                 "repeats": 3, "throughput_min": 500.0, "throughput_max": 700.0, "screened": 650.0},
                {"variant": "FP32 + batching", "concurrency": 16, "throughput": 5600.0, "p99_ms": 4.0},
                {"variant": "UINT8, 2 instances", "concurrency": 16, "throughput": 5400.0, "p99_ms": 4.0,
                 "repeats": 3, "throughput_min": 4700.0, "throughput_max": 5500.0}]  # recorded before `screened`
    folder = tmp_path / "gpu"
    (folder / "results").mkdir(parents=True)
    (folder / "results" / "14_near_the_limit.json").write_text(json.dumps({"variants": variants}))
    rec = numbers.recording(folder)
    rec["folder"] = numbers.ROOT / "docs" / "runs" / "gpu"
    text = "\n".join(numbers.variants_14(rec))
    assert "| infer/s (median) | runs | screening run | p99 (ms) |" in text
    assert "| article baseline: FP32 | 600 | 500-700 (3 runs, 40% apart) | 650 |" in text
    assert "| FP32 + batching | 5600 | one run | 5600 |" in text
    assert "| UINT8, 2 instances | 5400 | 4700-5500 (3 runs, 17% apart) | - |" in text


def test_14_with_one_run_each_says_the_winner_rule_did_not_run(tmp_path):
    """The ci profile's 14 (repeats 1): no contest; the page says the kept row is one run's pick, and by how much."""
    variants = [{"variant": "article baseline: FP32", "stable": True, "throughput": 31.3, "p99_ms": 200.0},
                {"variant": "FP32 + batching, system shm", "stable": True, "throughput": 46.94, "p99_ms": 150.0},
                {"variant": "UINT8, 2 instances", "stable": True, "throughput": 46.63, "p99_ms": 140.0}]
    folder = tmp_path / "cpu"
    (folder / "results").mkdir(parents=True)
    (folder / "results" / "14_near_the_limit.json").write_text(json.dumps(
        {"variants": variants, "best": "FP32 + batching, system shm", "variants_contest": None}))
    rec = numbers.recording(folder) | {"folder": numbers.ROOT / "docs" / "runs" / "cpu"}
    text = "\n".join(numbers.variants_14(rec))
    assert ("The winner rule did not run (one run of each variant): the kept row is the fastest single run within the "
            "p99 budget, a pick within one run's noise; the fastest other stable row served 47 infer/s (-0.7%).") in text
    assert "The winner rule (" not in text


def test_13_without_a_stable_baseline_says_why_there_is_no_ratio(tmp_path):
    """A baseline row that gave no stable measurement at the knobs' concurrency: no 'nanx' and no '-x', the reason."""
    best = {"settings": {"instances": 2}, "stable": True, "throughput": 5600.0, "p99_ms": 3.8, "concurrency": 16,
            "vs_baseline": None, "no_baseline_ratio": "the baseline at concurrency 16 gave no stable measurement (x)"}
    knobs = [{"knob": "instances", "value": "1", "stable": True, "throughput": 4000.0, "p99_ms": 4.0}]
    folder = tmp_path / "gpu"
    (folder / "results").mkdir(parents=True)
    (folder / "results" / "13_dynamic_batching_compare.json").write_text(json.dumps({"knobs": knobs, "best": best}))
    rec = numbers.recording(folder)
    rec["folder"] = numbers.ROOT / "docs" / "runs" / "gpu"
    text = "\n".join(numbers.knobs_13(rec))
    assert "no ratio to this run's baseline (the baseline at concurrency 16 gave no stable measurement (x))" in text
    assert "x this run's baseline" not in text
    best["vs_baseline"] = 1.5
    (folder / "results" / "13_dynamic_batching_compare.json").write_text(json.dumps({"knobs": knobs, "best": best}))
    assert "1.5x this run's baseline" in "\n".join(numbers.knobs_13(numbers.recording(folder) | {"folder": rec["folder"]}))


def test_13s_spread_counts_the_knob_rows_at_the_start_configurations_own_values(tmp_path):
    """The rows that measure the start configuration are found from the settings 13 saved, not from a fixed list."""
    knobs = [{"knob": "instances", "value": "1", "stable": True, "throughput": 1000.0, "p99_ms": 4.0},
             {"knob": "instances", "value": "2", "stable": True, "throughput": 1300.0, "p99_ms": 4.0},
             {"knob": "preferred batch sizes", "value": "[4]", "stable": True, "throughput": 1100.0, "p99_ms": 4.0},
             {"knob": "preferred batch sizes", "value": "[8, 16]", "stable": True, "throughput": 1500.0, "p99_ms": 4.0}]
    best = {"settings": {"instances": 1}, "stable": True, "throughput": 1000.0, "p99_ms": 4.0, "concurrency": 16}
    folder = tmp_path / "gpu"
    (folder / "results").mkdir(parents=True)
    saved = {"knobs": knobs, "best": best, "start_settings": {"instances": 1, "preferred batch sizes": [4]}}
    (folder / "results" / "13_dynamic_batching_compare.json").write_text(json.dumps(saved))
    rec = numbers.recording(folder) | {"folder": numbers.ROOT / "docs" / "runs" / "gpu"}
    assert "served 1000-1100 infer/s (10% apart, one run each)" in "\n".join(numbers.knobs_13(rec))


def test_13s_knob_row_stopped_by_the_memory_guard_says_so_not_unstable(tmp_path):
    """13's results keep no error text: the table reads it from 13_knobs.csv, so a guard stop is not called noise."""
    knobs = [{"knob": "transport", "value": "gRPC", "stable": False, "throughput": None, "p99_ms": None},
             {"knob": "transport", "value": "HTTP", "stable": False, "throughput": None, "p99_ms": None}]
    folder = tmp_path / "gpu"
    (folder / "results").mkdir(parents=True)
    (folder / "results" / "13_dynamic_batching_compare.json").write_text(json.dumps({"knobs": knobs, "best": {}}))
    (folder / "13_knobs.csv").write_text(
        "knob,value,stable,error\n"
        "transport,gRPC,False,\"'m' at concurrency 16: perf_analyzer passed the memory limit of 24 GB "
        "(24594 MB resident after 17 s) and was stopped; see x.log\"\n"
        "transport,HTTP,False,\"perf_analyzer found no stable measurement for 'm' at concurrency 16\"\n")
    rec = numbers.recording(folder)
    assert numbers._why_knob_13(rec, knobs[0]) == "stopped by the memory guard: 24594 MB after 17 s (limit 24 GB)"
    assert numbers._why_knob_13(rec, knobs[1]) == "not stable"
    (folder / "13_knobs.csv").unlink()
    assert numbers._why_knob_13(rec, knobs[0]) == "no stable measurement (no 13_knobs.csv to say why)"


def test_the_history_table_names_the_concurrency_of_each_kept_row():
    """The CPU world's 14 measures at concurrency 4, the GPU's at 16: the kept row says which."""
    text = "\n".join(numbers.history())
    assert "kept at c=16" not in text
    rows = [line for line in text.splitlines() if line.startswith("| 20")]
    assert rows and all(re.search(r"\| \d+ at c=\d+ \(|\| - \|", row) for row in rows), rows[:3]
    assert any(" at c=4 (" in row for row in rows if "| cpu-" in row)


def test_16s_levers_set_14s_kept_row_beside_the_same_configuration_in_16s_server(tmp_path):
    """Two servers of one configuration can differ by more than one server's runs: the page shows both rows."""
    folder = tmp_path / "gpu"
    (folder / "results").mkdir(parents=True)
    (folder / "results" / "16_saturation_and_knee.json").write_text(json.dumps({
        "saturation": [{"concurrency": 16}], "levers": [
            {"lever": "1 image per request", "throughput": 4500.0, "x batch-1": 1.0, "repeats": 3,
             "throughput_min": 4400.0, "throughput_max": 4700.0}]}))
    (folder / "results" / "14_near_the_limit.json").write_text(json.dumps({"best": "UINT8", "variants": [
        {"variant": "UINT8", "throughput": 6200.0, "throughput_min": 6000.0, "throughput_max": 6500.0, "repeats": 3}]}))
    said = numbers.levers(numbers.recording(folder))[2]
    assert said == ("Notebook 14's kept row (UINT8) served 6200 infer/s in 14's server (6000-6500 (3 runs, 8% apart)); "
                    "the same configuration, this table's first row, served 4500 in notebook 16's (4400-4700 (3 runs, "
                    "7% apart)): each ratio here divides by 16's own row."), said
    # chained calls of the series runner into one folder: the conditions name them, and 14 and 16 of two calls say so
    (folder / "run.json").write_text(json.dumps({"profile": "gpu-local", "machine": {"cpu_cores": 16}, "notebooks": {
        stem: {"seconds": 1.0, "status": "ok", "call": call} for stem, call in (
            ("13_dynamic_batching_compare", "2026-12-05T08:00:00Z"), ("14_near_the_limit", "2026-12-05T08:00:00Z"),
            ("16_saturation_and_knee", "2026-12-05T08:10:00Z"))}}))
    rec = numbers.recording(folder)
    assert "another call of the series runner): each ratio" in numbers.levers(rec)[2]
    conditions = "\n".join(numbers.conditions(rec))
    assert "ran in 2 calls of the series runner, one after another, into this folder (13, 14; 16;" in conditions
    assert "| 16_saturation_and_knee | ok | 1 | unknown | 2 |" in conditions
    mixed = {**json.loads((folder / "run.json").read_text()), "machine": None}  # notebooks of two machines
    (folder / "run.json").write_text(json.dumps(mixed))
    assert "machines differ (see each notebook's `machine` in run.json)" in numbers.conditions(numbers.recording(folder))[0]


def test_a_history_knee_over_its_own_budget_is_marked():
    """Review 18: an older search kept a level whose confirmed p99 left the budget; History says so beside the rate."""
    results = {"knee": {"concurrency": 128, "throughput": 20975.9, "p99_ms": 11.609},
               "saturation": [{"concurrency": 64}, {"concurrency": 128}, {"concurrency": 192}],
               "knees": [{"stopped because": "p99 15.28 ms at concurrency 192 is over the 10 ms budget"}]}
    assert numbers._knee_short(results) == ("20976 at c=128 (its p99 11.6 ms is over the 10 ms budget: no knee by this "
                                            "page's rule)")
    results["knee"]["p99_ms"] = 9.9
    assert numbers._knee_short(results) == "20976 at c=128"
    results["knees"].append({"stopped because": "p99 500 ms at concurrency 8 is over the 400 ms budget"})
    assert numbers._budget_ms(results) is None  # two budgets named: none assumed


def test_a_confirmed_knee_shows_its_runs_p99_range_beside_the_median_runs():
    """The knee's p99 is its median run's; one of the runs may sit over the budget, and the page shows it."""
    results = {"knee": {"concurrency": 32, "throughput": 7000.0, "p99_ms": 9.6},
               "saturation": [{"concurrency": 16}, {"concurrency": 32, "repeats": 3, "throughput_min": 6800.0,
                                                    "throughput_max": 7200.0, "p99_min": 9.2, "p99_max": 10.4},
                              {"concurrency": 48}]}
    assert numbers._knee(results) == ("7000 infer/s at c=32 (median of 3 runs, 6800-7200; p99 9.60 ms, the runs' "
                                      "9.20-10.40)")


def test_12s_candidates_show_each_rows_runs_and_say_when_a_recording_kept_none(tmp_path, monkeypatch):
    monkeypatch.setattr(numbers, "_plots", lambda rec, notebook: [])  # a folder outside docs/ has no page links
    folder = tmp_path / "gpu"
    (folder / "results").mkdir(parents=True)
    rows = [{"variant": "fp16", "stable": True, "throughput": 3393.0, "p99_ms": 7.7, "runs": 1},
            {"variant": "fp16_frozen", "stable": True, "throughput": 3602.0, "p99_ms": 6.7, "runs": 4,
             "throughput_min": 3299.0, "throughput_max": 4181.0}]
    (folder / "results" / "12_optimize_tensorrt.json").write_text(json.dumps({"candidates": rows}))
    page = "\n".join(numbers.candidates_12(numbers.recording(folder)))
    assert "| fp16 | 3393 | one run | 7.70 | True |" in page
    assert "| fp16_frozen | 3602 | 3299-4181 (4 runs, 27% apart) | 6.70 | True |" in page
    for row in rows:  # results from before the runs were saved
        row.pop("runs")
    (folder / "results" / "12_optimize_tensorrt.json").write_text(json.dumps({"candidates": rows}))
    assert "| fp16 | 3393 | not recorded | 7.70 | True |" in "\n".join(numbers.candidates_12(numbers.recording(folder)))


def test_a_section_states_the_load_its_notebook_ran_with(tmp_path):
    """Numbers review s26 N5: 12's candidates, 13's knobs and 15's comparison print their concurrency, transport and
    windows, read from the recorded notebook's parameters cell with papermill's injected values over it."""
    cells = [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["knob_concurrency = 16\n",
              "measurement_request_count = 100\n", "p99_budget_ms = 10.0\n", "protocol = \"grpc\"\n"]},
             {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]},
              "source": ["knob_concurrency = 4\n", "measurement_request_count = 10\n"]}]
    (tmp_path / "13_dynamic_batching_compare.ipynb").write_text(json.dumps({"cells": cells, "metadata": {}}))
    rec = {"folder": tmp_path}
    assert numbers.ran_with(rec, "13") == {"knob_concurrency": 4, "measurement_request_count": 10,
                                          "p99_budget_ms": 10.0, "protocol": "grpc"}
    assert numbers._load(rec, "13", "knob_concurrency", "gRPC") == "Concurrency 4 over gRPC, count windows of 10 requests"
    assert numbers._load(rec, "12", "candidate_concurrency", "gRPC") == ""  # no notebook 12 in the folder
