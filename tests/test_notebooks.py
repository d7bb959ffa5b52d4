"""Every notebook, executed in order by papermill with the `ci` profile (local runtime, CPU, random weights)."""
from __future__ import annotations

import json

import pytest

from helpers import nearlimit, recordings, series
from conftest import CI_RUN_TAG, triton_processes


def test_notebooks_are_committed_without_outputs_and_with_a_parameters_cell():
    names = [nb.stem for nb in series.notebooks()]
    assert len(names) == len(set(n[:2] for n in names)) >= 15 and "15_model_analyzer" in names  # one notebook a number
    for path in [*series.notebooks(), *sorted((series.ROOT / "solutions").glob("*.ipynb"))]:
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert nb["cells"][0]["cell_type"] == "markdown" and nb["cells"][0]["source"][0].startswith("# "), path.name
        assert not any(c["outputs"] or c["execution_count"] for c in code), f"{path.name} has outputs"
        tagged = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
        assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"


def test_profiles_only_set_parameters_the_notebooks_declare():
    import papermill

    for path in series.notebooks():
        declared = papermill.inspect_notebook(str(path))
        for profile in ("ci", "gpu-local", "docker-ci"):
            own = series.profile_parameters(profile, path.stem)
            shared = series.profile_parameters(profile, "all")
            assert set(own) - set(shared) <= set(declared), (profile, path.name)


def _results(run_dir, name):
    return json.loads((run_dir / "results" / f"{name}.json").read_text())


def _printed(notebook) -> str:
    """What an executed notebook's code cells printed (stream text and plain-text results), not their source."""
    cells = json.loads(notebook.read_text())["cells"]
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for c in cells if c["cell_type"] == "code" for o in c.get("outputs", []))


@pytest.mark.notebooks
def test_series_runs_and_writes_report(ci_run):
    report = (ci_run / "report.md").read_text()
    assert report.count("| ok |") == len(series.notebooks()) and "FAILED" not in report
    assert all((ci_run / nb.name).exists() for nb in series.notebooks())
    assert not triton_processes(tag=CI_RUN_TAG), "a notebook left a Triton process running"


@pytest.mark.notebooks
def test_keras_track_numbers(ci_run):
    assert _results(ci_run, "00_environment_check")["runtime"] == "local"
    parity = _results(ci_run, "02_export_onnx")["parity_keras_vs_onnxruntime"]
    assert parity["top1_agreement"] == 1.0 and parity["max_abs_diff"] < 1e-3
    assert _results(ci_run, "03_tensorrt_engine")["built"] is False
    # issue 33: Triton's own ONNX Runtime backend, built by set-up, serves the Keras model; the server completed a
    # two-line config from the ONNX file (its default batch limit, the dynamic batcher)
    repo = _results(ci_run, "04_model_repository")
    assert repo["served"] == ["resnet50_auto: native (onnxruntime backend)", "resnet50_onnx: native (onnxruntime backend)"]
    assert "max_batch_size: 4" in repo["autocompleted"] and 'name: "input_1"' in repo["autocompleted"]
    assert "dynamic_batching" in repo["autocompleted"] and 'format: FORMAT_NHWC' in repo["resnet50_onnx_config"]
    served = _results(ci_run, "06_http_client")
    assert served["model"] == "resnet50_onnx" and served["batch"] == [32, 224, 224, 3]
    assert served["served"] == ["resnet50_onnx: native (onnxruntime backend)"]
    assert served["parity_http_vs_local"] == {"max_abs_diff": 0.0, "top1_agreement": 1.0}  # the same library, in Triton
    assert served["parity_grpc_vs_http"]["max_abs_diff"] == 0.0
    assert all("accepted" != said and "resnet50_onnx" in said for said in served["server_said"].values())
    local_vs = _results(ci_run, "07_local_vs_triton")
    assert local_vs["served"] == "resnet50_onnx_cpu: native (onnxruntime backend)"
    assert all(row["p50_ms"] > 0 for row in local_vs["latency_ms"].values()) and len(local_vs["latency_ms"]) == 4


@pytest.mark.notebooks
def test_resnet18_track_numbers(ci_run):
    ten = _results(ci_run, "10_resnet18_torchscript")
    assert ten["parity_torchscript_vs_eager"]["top1_agreement"] == 1.0
    # issue 24, item 31: the server completed the minimal config (platform, file name, instance group), and its
    # PyTorch backend said it completes nothing itself
    assert 'platform: "pytorch_libtorch"' in ten["autocompleted"] and "KIND_CPU" in ten["autocompleted"]
    assert 'default_model_filename: "model.pt"' in ten["autocompleted"] and "model_warmup" not in ten["autocompleted"]
    assert any("not supported for pytorch backend" in line for line in ten["autocomplete_log"])
    eleven = _results(ci_run, "11_baseline_benchmark")
    baseline = eleven["table"]
    assert [row["concurrency"] for row in baseline] == [1, 4]
    # what 13 sets its own baseline beside: the models 11's server held, its warm-up and its memory limit
    assert eleven["server_models"] == ["resnet18_pytorch"] and eleven["memory_limit_gb"] > 0, eleven
    assert eleven["warmup_requests"] == 10
    # the ci profile checks the pipeline, not speed: on a busy 2-core runner a level may see a window in which no
    # request completed; it is then marked unstable with that reason, and the sweep goes on
    assert any(row["stable"] for row in baseline)
    for row in baseline:
        assert (row["throughput"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0) if row["stable"] else row["error"], row
    optimized = _results(ci_run, "12_optimize_tensorrt")
    assert optimized["optimized"] == "resnet18_opt"
    assert {c["variant"] for c in optimized["candidates"]} == {"fp32_frozen", "fp32_nhwc_frozen"}
    assert optimized["winner"] in {"fp32_frozen", "fp32_nhwc_frozen"}
    # the winner rule: both finalists measured three times each, in turns; a tie keeps the simpler (fp32_frozen)
    contest = optimized["contest"]
    assert [r["variant"] for r in contest["runs"]] == ["fp32_frozen", "fp32_nhwc_frozen", "fp32_nhwc_frozen",
                                                      "fp32_frozen", "fp32_frozen", "fp32_nhwc_frozen"]
    other = "the simplest setting left:" in contest["verdict"]  # the simpler one gave no stable run, or was beaten
    assert contest["kept"] == optimized["winner"] == (contest["winner"] or ("fp32_nhwc_frozen" if other else "fp32_frozen"))
    assert all("native (pytorch backend)" in s for s in optimized["served"]), optimized["served"]
    assert optimized["parity_vs_baseline"]["resnet18_opt"]["top1_agreement"] == 1.0
    printed = json.dumps(json.loads((ci_run / "12_optimize_tensorrt.ipynb").read_text())["cells"])
    assert "--- compile_ts.py" in printed and "torch_tensorrt.compile(" in printed  # the script its command runs
    compare = _results(ci_run, "13_dynamic_batching_compare")
    assert set(compare["at_top_concurrency"]) == {"baseline", "baseline + dynamic batching",
                                                  "resnet18_opt + dynamic batching"}
    assert all("native (pytorch backend)" in s for s in compare["served"].values()), compare["served"]
    assert all(v["throughput"] > 0 for v in compare["at_top_concurrency"].values())
    assert {k["knob"] for k in compare["knobs"]} == {"instances", "preferred batch sizes", "queue delay (us)", "transport",
                                                     "backend parameters"}
    transports = {k["value"]: k for k in compare["knobs"] if k["knob"] == "transport"}
    assert all(transports[t]["stable"] for t in ("HTTP", "gRPC")), transports  # count windows sized to the limit: measured
    assert compare["best"]["stable"] and compare["best"]["throughput"] > 0
    # the best settings adopted only by the winner rule: both finalists three times each, in turns, on one server
    final = compare["best"]["contest"]
    assert [r["setting"] for r in final["runs"]] == ["start configuration", "best settings", "best settings",
                                                   "start configuration", "start configuration", "best settings"], final
    other = "the simplest setting left:" in final["verdict"]
    assert final["kept"] == (final["winner"] or ("best settings" if other else "start configuration")), final
    assert {"instances", "preferred batch sizes", "queue delay (us)", "transport"} <= set(compare["best"]["settings"])
    # the ratio to the baseline multiplies two ratios of one server each (or, without the sweep's twin row, says two)
    assert compare["best"]["vs_baseline"] is None or compare["best"]["vs_baseline_how"].startswith(
        ("one server per factor: kept / start", "two servers")), compare["best"]
    recap = _printed(ci_run / "13_dynamic_batching_compare.ipynb")  # outputs only: the source holds these words too
    assert "in notebook 11's server (it held resnet18_pytorch)" in recap or "stable row at concurrency 4" in recap
    assert "perf_analyzer settings: warmup_requests 10 there, 0 here" in recap or "stable row" in recap
    assert 0 < recap.index("x the baseline (") < recap.index("; in the finalists' server ")  # which run is which
    for png in ("13_sweep.png", "13_bars_c4.png", "11_baseline.png", "07_local_vs_triton.png", "12_candidates.png",
                "13_latency_split.png"):
        assert (ci_run / png).stat().st_size > 10_000, png


@pytest.mark.notebooks
def test_near_the_limit_numbers(ci_run):
    near = _results(ci_run, "14_near_the_limit")
    assert near["uint8_vs_fp32"]["top1_agreement"] == 1.0          # UINT8 in, normalized inside: same answers
    assert near["ensemble_error"] == "" and near["ensemble_top5_equal"] == near["photos"] == 6  # JPEG in, top-5 out
    rows = {r["variant"]: r for r in near["variants"]}
    assert "JPEG ensemble, gRPC" in rows and "UINT8 + batching, system shm, 2 instances" in rows
    for label, row in rows.items():
        assert row["stable"] and row["throughput"] > 0, label
        assert 0 < row["peak_rss_mb"] < 4096, label                 # every row carries perf_analyzer's peak
    batched = [r for label, r in rows.items() if "+ batching" in label and "instances" not in label]
    assert all(r["server avg_batch"] > 1 for r in batched)          # the server's metrics: batches were formed
    assert rows["article baseline: FP32, no batching, gRPC"]["server avg_batch"] == 1.0
    assert near["variants_contest"] is None                         # ci: repeats=1, so no winner is named
    # what notebook 16 reads: the variant kept, its model, bytes and options, and the settings it was served with
    assert near["best"] in rows and set(near["specs"]) == set(rows) and near["concurrency"] == 4
    assert near["specs"][near["best"]][0] == rows[near["best"]]["model"] and near["max_batch_size"] == 8
    assert (ci_run / "14_variants.csv").exists()
    for png in ("14_variants.png", "11_perf_analyzer_memory.png"):
        assert (ci_run / png).stat().st_size > 10_000, png


@pytest.mark.notebooks
def test_saturation_and_knee_numbers(ci_run):
    """16 drives the variant 14 kept: knee searches, the levers at 14's images in flight and the knee's, and served
    against in-process with one stream per instance of the kept model."""
    near, knee16 = _results(ci_run, "14_near_the_limit"), _results(ci_run, "16_saturation_and_knee")
    assert knee16["best"] == near["best"] and knee16["model"] == near["specs"][near["best"]][0]
    assert knee16["instances"] == (2 if near["best"].endswith("2 instances") else 1)
    levels = [r["concurrency"] for r in knee16["saturation"]]  # the knee search: doubling from 2, at most 4
    assert levels[0] == 2 and set(levels) <= {2, 3, 4} and levels == sorted(levels), levels
    assert knee16["knee_search"] and (knee16["above_knee"] is None or knee16["above_knee"] > knee16["knee"]["concurrency"])
    assert knee16["knee"] is not None                               # the ci budget (1000 ms) is one two cores meet
    # a knee search per instance count and with client batching (ci: 2 instances; 4 images per request, c from 1)
    knees = {k["search"]: k for k in knee16["knees"]}
    assert list(knees) == [near["best"], "UINT8 + batching, system shm, 2 instances",
                           f"{near['best']}, 4 images per request"] or near["best"].endswith("2 instances"), list(knees)
    batched_knee = knees[f"{near['best']}, 4 images per request"]
    assert batched_knee["levels (in order)"][0] == 1 and batched_knee["images/request"] == 4, batched_knee
    assert all(k["stopped because"] for k in knees.values())
    flight = int(knee16["knee"]["concurrency"])
    knee_levers = {r["lever"]: r for r in knee16["knee_levers"]}
    named = "the knee" if knee16["above_knee"] is not None else "the top level searched, no knee reached"
    assert list(knee_levers)[0] == f"1 image per request, concurrency {flight} ({named}, section 1)", list(knee_levers)
    # the knee search may stop low on two busy cores (throughput flat from the first level): client batching at the
    # knee's images in flight needs a lever batch that divides them (the lever_batches: 4, 16)
    dividing = [b for b in (4, 16) if b <= 8 and flight % b == 0]
    assert all(r["stable"] for r in knee_levers.values()) and len(knee_levers) == 1 + len(dividing), knee_levers
    first, *others = knee16["levers"]  # the batch-1 reference measured on 16's own server, so each ratio is same-server
    assert first["lever"] == "1 image per request, concurrency 4" and first["x batch-1"] == pytest.approx(1.0)
    assert all(r["x batch-1"] == pytest.approx(r["throughput"] / first["throughput"], abs=1e-3)
               for r in others if r["stable"])
    c_api = [r for r in knee16["levers"] if r["lever"].startswith("C API")]
    if near["best"].startswith("JPEG ensemble"):  # a model of one step only: left out, and the page says why
        assert not c_api and "C API row left out: the kept variant is the JPEG ensemble" in _printed(
            ci_run / "16_saturation_and_knee.ipynb")
    else:
        windows = series.profile_parameters("ci", "16_saturation_and_knee")["measurement_request_count"]
        assert c_api[0]["stable"] and c_api[0]["window_requests"] == windows  # count windows of the profile's size
        assert c_api[0]["requests"] >= 20                                     # what perf_analyzer's summary counted
    # the in-process reference: one stream per instance, around the server's mean batch at the knee (and the lever's)
    assert knee16["inprocess_skipped"] == "" and knee16["inprocess_streams"] == knee16["instances"]
    around = nearlimit.around(knee16["knee_batch"])  # the whole batches on either side of the server's mean
    assert {str(b) for b in around} | {"8"} <= set(knee16["inprocess"]) and knee16["inprocess_at_knee"] > 0, knee16
    assert knee16["knee_lever_batch"] is None or {str(b) for b in nearlimit.around(knee16["knee_lever_batch"])} == set(
        knee16["inprocess_lever"])
    assert 1 <= knee16["inprocess_lever_streams"] <= knee16["instances"]
    assert all(v > 0 for v in knee16["inprocess"].values()) and knee16["inprocess_cuda_graph"] == {}  # a CPU: no graphs
    assert (ci_run / "16_saturation.png").stat().st_size > 10_000
    assert {"16_saturation.csv", "16_knee_searches.csv"} <= {p.name for p in ci_run.glob("16_*.csv")}


def test_14_and_16_are_at_most_250_code_lines():
    """Issue 34 item 5: a page a learner can follow; 14 split into 14 (bytes, transport, variants) and 16 (knee)."""
    for stem in ("14_near_the_limit", "16_saturation_and_knee"):
        cells = json.loads((series.NOTEBOOK_DIR / f"{stem}.ipynb").read_text())["cells"]
        lines = sum(len("".join(c["source"]).splitlines()) for c in cells if c["cell_type"] == "code")
        assert lines <= 250, f"{stem}: {lines} code lines"


@pytest.mark.notebooks
def test_model_analyzer_numbers(ci_run):
    ma = _results(ci_run, "15_model_analyzer")
    assert ma["analyzer_version"] == "1.58.0" and ma["search_mode"] == "brute"
    # the ci profile's space: 14's own config (Model Analyzer's default variant), then 1 and 2 instances with a delay
    assert sorted(r["config_name"] for r in ma["results"]) == [
        "resnet18_uint8_config_0", "resnet18_uint8_config_1", "resnet18_uint8_config_default"]
    assert all(r["throughput"] > 0 for r in ma["results"]) and 0 < ma["perf_peak_mb"] < 4096
    assert ma["picks"]["resnet18_uint8"] in {r["config_name"] for r in ma["results"]}
    picks = [r for r in ma["comparison"] if r["model"] == "resnet18_uint8"]
    assert [r["config"] for r in picks] == ["resnet18_uint8_analyzer", "resnet18_uint8_series"]
    assert all(r["stable"] and r["throughput"] > 0 for r in picks)   # both measured in the same run
    assert picks[0]["search_s"] > 0 and picks[1]["search_s"] > 0      # 14 ran before it: both searches timed
    assert "resnet18_uint8" in ma["verdicts"]
    # the winner rule ran (ci: one run each, so no winner is named); Model Analyzer's own figure beside the re-measurement
    assert [r["runs"] for r in picks] == [ma["finalist_runs"]] * 2 and ma["finalist_runs"] == 1
    assert ma["contests"]["resnet18_uint8"]["winner"] is None and "no winner is named below 3 runs" in \
        ma["contests"]["resnet18_uint8"]["verdict"]
    assert picks[0]["analyzer_throughput"] > 0 and picks[1]["analyzer_throughput"] != picks[1]["analyzer_throughput"]  # NaN


@pytest.mark.notebooks
def test_client_notebook_against_a_shared_server(ci_run_through, tmp_path):
    """A workshop room's plan: one server, attendees' notebooks pointed at it with server_url (06 reads only). It
    starts as soon as the ci run's notebook 04 has written the model repository."""
    ci_run_through("04_model_repository")
    from helpers.launchers import free_port
    from helpers.server import TritonServer, port_busy

    port = next(p for p in iter(free_port, None) if not port_busy(p + 1) and not port_busy(p + 2) and p < 65000)
    with TritonServer(series.ROOT / "models", "local", models=["resnet50_onnx"], http_port=port, grpc_port=port + 1,
                      metrics_port=port + 2) as shared:  # Triton's default layout: HTTP, then gRPC, then metrics
        run = series.run_series(tmp_path, "ci", only=["06"], overrides={
            "server_url": f"{shared.host}:{shared.http_port}"})
        assert shared.running
    served = _results(run, "06_http_client")
    assert served["served"] == [f"resnet50_onnx: shared (on the server at {shared.url})"]
    assert served["parity_grpc_vs_http"]["max_abs_diff"] == 0.0


@pytest.mark.notebooks
def test_baseline_notebook_against_a_shared_server(ci_run_through, tmp_path):
    """The workshop guide's step 3: notebook 11 pointed at a shared server with shared_memory "none" measures the
    tensors-in-requests trace only (system shared memory needs both on one machine) and its sweep over gRPC."""
    ci_run_through("10_resnet18_torchscript")
    from helpers.launchers import free_port
    from helpers.server import TritonServer, port_busy

    port = next(p for p in iter(free_port, None) if not port_busy(p + 1) and not port_busy(p + 2) and p < 65000)
    with TritonServer(series.ROOT / "models", "local", models=["resnet18_pytorch"], http_port=port,
                      grpc_port=port + 1, metrics_port=port + 2) as shared:
        run = series.run_series(tmp_path, "ci", only=["11"], overrides={
            "server_url": f"{shared.host}:{shared.http_port}", "shared_memory": "none"})
        assert shared.running  # the notebook's stop() leaves a server that is not its own
    baseline = _results(run, "11_baseline_benchmark")
    assert baseline["served"] == f"resnet18_pytorch: shared (on the server at {shared.url})"
    assert list(baseline["memory_peak_mb"]) == ["none"] and baseline["settings"]["shared_memory"] == "none"
    assert baseline["server_models"] is None  # what a shared server holds is not this notebook's to know
    assert any(row["stable"] and row["throughput"] > 0 for row in baseline["table"])


@pytest.mark.notebooks
def test_kubernetes_notebook_numbers(ci_run):
    k8s = _results(ci_run, "20_kubernetes")
    assert k8s["manifests"][:2] == ["01-persistentvolumeclaim-triton-resnet18-models.yaml",
                                    "02-deployment-triton-resnet18.yaml"] and len(k8s["manifests"]) == 7
    assert k8s["threshold_us"] >= 100 and [r["concurrency"] for r in k8s["signal"]] == [1, 2, 4]
    planned = [r for r in k8s["plan"] if r["planned"]]
    # the GPU recording's card is planned only when notebook 13's gRPC row in docs/runs/gpu is stable (numbers review 15)
    assert {r["rate from"].split(" (")[0] for r in planned} == ({"this machine", recordings.card("gpu")} if k8s["gpu"]["stable"]
                                                                 else {"this machine"})
    assert k8s["gpu"]["stable"] or k8s["gpu"]["error"]  # a skipped GPU plan says why
    assert k8s["warmup_batch_sizes"] == list(range(1, 65))  # the pods' warm-up: every size up to max_batch_size 64
    assert all(r["utilization"] <= 0.7 + 1e-9 for r in planned)  # the 30 % headroom rule
    assert k8s["settings"]["instance_count"] >= 1  # the configuration 13 kept, deployed
    # issue 24, item 32: measured here on the CPU, exported for the GPU pods the manifests request
    assert k8s["pod_gpus"] == 1 and k8s["exported"] == ["resnet18: KIND_GPU in pods with 1 GPU(s)"]
    hpa = next((series.ROOT / "build" / "k8s" / "plain").glob("*horizontalpodautoscaler*")).read_text()
    assert f"maxReplicas: {k8s['max_replicas']}" in hpa  # the ceiling the recap checks each plan against
    for png in ("20_queue_signal.png", "20_capacity.png"):
        assert (ci_run / png).stat().st_size > 10_000, png
