"""Measuring without losing the article's transport: a request count that fits the memory limit, warm-up passes,
repeated headline rows with their spread, backend parameters and warm-up in a derived config, and the in-process
reference with the input on the device."""
from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import pytest

from helpers import bench, perf, repository


def test_a_request_count_bounds_what_perf_analyzer_keeps():
    args = perf.perf_args("m", "127.0.0.1:8001", concurrency="16", request_count=3000)
    assert args[args.index("--request-count") + 1] == "3000"
    fp32, uint8 = perf.bounded_requests(602_112, 3.5), perf.bounded_requests(150_528, 3.5)
    # sized from the tensor's bytes plus perf_analyzer's own per request (measured on the H200), under 80 % of the limit
    for nbytes, options in ((602_112, fp32), (150_528, uint8)):
        held = options["request_count"] * (nbytes + perf.REQUEST_FIXED_BYTES) * perf.REQUEST_MARGIN
        assert 0.7 * 3.5 * 2**30 < held <= 0.8 * 3.5 * 2**30, (nbytes, options)
    assert uint8["request_count"] > 2 * fp32["request_count"]
    assert perf.bounded_requests(602_112, 3.5, most=47, least=20) == {"request_count": 47}  # a CPU's rate caps it
    with pytest.raises(ValueError, match="leave .* requests under 0.1 GB .*use shared memory"):
        perf.bounded_requests(602_112, 0.1)


def test_the_warm_up_pass_is_the_level_itself_unmeasured(tmp_path, monkeypatch):
    monkeypatch.setattr(perf, "find_perf_analyzer", lambda: perf.PerfAnalyzer(tmp_path / "perf_analyzer", "test", {}))
    command, _ = perf.warmup_command("m", "h:1", tmp_path / "x.csv", 16, None, 2.0, protocol="grpc",
                                     measurement_interval_ms=5000, max_trials=10, stability_percentage=10)
    assert command[command.index("--concurrency-range") + 1] == "16"
    assert command[command.index("--measurement-interval") + 1] == "2000"
    assert command[command.index("--max-trials") + 1] == "1" and command[-1].endswith("x_warmup.csv")
    counted, _ = perf.warmup_command("m", "h:1", tmp_path / "x.csv", 16, None, 2.0, request_count=3000)
    assert counted[counted.index("--request-count") + 1] == "300"  # a tenth: the memory bound holds for it too


def _rows(*ranges):
    return pd.DataFrame([{"variant": f"v{i}", "stable": True, "throughput": (lo + hi) / 2, "throughput_min": lo,
                          "throughput_max": hi} for i, (lo, hi) in enumerate(ranges)])


def test_a_winner_must_clear_the_runner_ups_range():
    won = perf.verdict(_rows((900, 1000), (700, 800), (100, 200)))
    assert won.loc[0, "verdict"].startswith("wins: 1.1-1.4x") and won.loc[1, "verdict"] == ""
    tied = perf.verdict(_rows((900, 1000), (950, 980), (100, 200)))
    assert list(tied["verdict"][:2]) == ["tie within noise (2 rows' ranges overlap)"] * 2 and tied.loc[2, "verdict"] == ""
    assert (perf.verdict(_rows((900, 1000)).drop(columns=["throughput_min"]))["verdict"] == "").all()


def test_each_knob_gets_its_fastest_stable_setting_and_a_knob_with_none_is_set_apart_with_its_errors():
    nan = float("nan")
    knobs = pd.DataFrame({
        "knob": ["instances", "instances", "queue delay (us)", "queue delay (us)", "transport"],
        "value": ["1", "2", "0", "100", "HTTP"],
        "stable": [True, True, True, True, False],
        "throughput": [100.0, 150.0, 90.0, 120.0, nan],
        "p99_ms": [5.0, 12.0, 20.0, 30.0, nan],
        "error": ["", "", "", "", "no stable measurement: windows 3 to 90 infer/s"]})
    chosen, unstable = perf.best_per_knob(knobs, p99_budget_ms=10.0)
    assert chosen["instances"]["value"] == "1"  # 2 is faster, but over the budget
    assert chosen["queue delay (us)"]["value"] == "100"  # none within the budget: the fastest overall
    assert unstable == {"transport": "no stable measurement: windows 3 to 90 infer/s"}
    assert perf.best_per_knob(knobs.drop(columns="error").query("knob == 'transport'")) == (
        {}, {"transport": "no stable measurement"})


def test_derive_sets_backend_parameters_and_a_warm_up_per_batch_size(tiny_repo):
    config = repository.derive(tiny_repo, "tiny", "tiny_b", parameters={"ENABLE_JIT_PROFILING": "false"},
                               warmup_batch_sizes=[1, 8])
    again = repository.read_config(tiny_repo / "tiny_b")
    assert again.parameters["ENABLE_JIT_PROFILING"].string_value == "false" and again == config
    assert [(w.batch_size, w.count) for w in again.model_warmup] == [(1, 2), (8, 2)]
    assert list(again.model_warmup[0].inputs["X"].dims) == [8] and again.model_warmup[0].inputs["X"].zero_data
    with pytest.raises(ValueError, match="warm-up batch size 9 is outside 1..8"):
        repository.derive(tiny_repo, "tiny", "tiny_c", warmup_batch_sizes=[9])


def test_the_in_process_reference_times_the_forward_pass_on_the_device(tmp_path):
    import torch

    module = torch.jit.script(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3)).eval())
    module.save(str(tmp_path / "m.pt"))
    sample = np.ones((1, 3, 4), np.float32)
    assert bench.device_throughput(tmp_path / "m.pt", "cpu", sample, 8, seconds=0.2) > 0
    with pytest.raises(ValueError, match="cuda_graph needs a CUDA device; got 'cpu'"):
        bench.device_throughput(tmp_path / "m.pt", "cpu", sample, 8, cuda_graph=True)


def test_the_clients_busy_cores_are_its_cpu_time_over_its_run():
    assert perf.Watched(0, [], 1.0, [], cpu_s=3.0, wall_s=2.0).client_cores == 1.5
    assert perf.Watched(0, [], 1.0, []).client_cores == 0.0


def test_an_unstable_level_says_how_far_apart_its_windows_were():
    """perf_analyzer runs with -v, so its windows are printed; a level that did not stabilize is reported with its
    last three windows' spread (the measured reason), not only a remedy. Lines from perf_analyzer 2.50 on this CPU."""
    assert "-v" in perf.perf_args("m", "127.0.0.1:8001")
    lines = ["Request concurrency: 1\n",
             "  Pass [1] throughput: 0.415289 infer/sec. Avg latency: 2332317 usec (std 18446744073709551615 usec). \n",
             "  Pass [2] throughput: 0.41578 infer/sec. Avg latency: 1922850 usec (std 18446744073709551615 usec). \n",
             "  Pass [3] throughput: 0.414787 infer/sec. Avg latency: 2229129 usec (std 18446744073709551615 usec). \n",
             "Failed to obtain stable measurement within 3 measurement windows for concurrency 1.\n"]
    assert perf.window_spread(lines) == ("its last three windows: 0.4-0.4 infer/s (0% apart), "
                                         "average latency 1922.85-2332.32 ms (21% apart)")
    assert perf.window_spread(lines[:2]).startswith("1 window(s) printed")


def test_the_c_api_row_loads_only_its_model_with_the_local_servers_library_and_backends(tmp_path, monkeypatch):
    """perf_analyzer's C API mode wants a Triton install folder (lib/libtritonserver.so, backends/) and a repository:
    the local server's own, linked, and a repository of the one model measured; a model without config is refused."""
    from helpers.runtime import LocalTriton

    lib, backends = tmp_path / "libs" / "libtritonserver-abc.so", tmp_path / "backends"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    (backends / "pytorch").mkdir(parents=True)
    local = LocalTriton(tmp_path / "bin" / "tritonserver", backends, "test", {"LD_LIBRARY_PATH": "/x"})
    repo = tmp_path / "models"
    for name in ("wanted", "other"):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(f'name: "{name}"')
    import helpers.native_backends

    monkeypatch.setattr(helpers.native_backends, "server_library", lambda _local: lib)
    install = perf.c_api_layout(local, repo, ["wanted"], tmp_path / "capi")
    with pytest.raises(FileNotFoundError, match="no config.pbtxt"):
        perf.c_api_layout(local, repo, ["missing"], tmp_path / "capi2")
    assert (install / "lib" / "libtritonserver.so").resolve() == lib.resolve()
    assert (install / "backends").resolve() == backends.resolve()
    assert sorted(p.name for p in (install.parent / "repository").iterdir()) == ["wanted"]
    command, env = perf.c_api_command("wanted", install, tmp_path / "c.csv", local, concurrency=16, batch_size=1)
    assert "--service-kind=triton_c_api" in command and f"--triton-server-directory={install}" in command
    assert f"--model-repository={install.parent / 'repository'}" in command
    assert "--shared-memory" not in command and "-u" not in command  # no network, no shared memory in this mode
    assert env["LD_LIBRARY_PATH"].split(":")[:2] == [str(lib.parent.resolve()), "/x"]
    assert "--request-count" not in command
    # perf_analyzer keeps its requests in this mode too (7290 MB after 18 s on an H200): a bounded count, when given
    bounded, _ = perf.c_api_command("wanted", install, tmp_path / "c.csv", local, concurrency=16,
                                    **perf.bounded_requests(150_528, 7.0))
    count = int(bounded[bounded.index("--request-count") + 1])
    assert count == perf.request_budget(150_528, 7.0) and count * (150_528 + perf.REQUEST_FIXED_BYTES) < 7 * 2**30


# --- GPU sampling (helpers.gpu): the no-GPU path, and nvidia-smi's CSV parsed from a fake nvidia-smi on PATH ---

FAKE_NVIDIA_SMI = """#!/bin/sh
# prints what `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total
#   --format=csv,noheader,nounits -lms 200` prints on a two-GPU machine, until it is stopped
echo "$@" > "$(dirname "$0")/args"
i=0
while true; do
  echo "2026/12/02 06:40:0$i.100, 0, $((40 + i)), 1200, 143771"
  echo "2026/12/02 06:40:0$i.101, 1, [N/A], 900, 143771"
  i=$((i + 1))
  [ $i -gt 8 ] && i=8
  sleep 0.1
done
"""


def test_gpu_sampler_without_a_gpu_says_so(monkeypatch, tmp_path):
    from helpers import gpu

    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi anywhere
    with gpu.Sampler() as sampler:
        pass
    assert not sampler.available and "nvidia-smi is not on PATH" in sampler.summary()
    assert sampler.table.empty and sampler.per_gpu().empty
    assert all(v != v for v in sampler.columns().values())  # NaN, not a made-up number
    gpu.save(sampler, tmp_path / "gpu.csv")
    assert not (tmp_path / "gpu.csv").exists()


def test_gpu_sampler_parses_nvidia_smi(monkeypatch, tmp_path):
    from helpers import gpu

    fake = tmp_path / "nvidia-smi"
    fake.write_text(FAKE_NVIDIA_SMI)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    with gpu.Sampler(interval_ms=100) as sampler:
        time.sleep(0.5)
    assert sampler.available, sampler.reason
    assert (tmp_path / "args").read_text().split() == gpu.command(100)[1:]
    per = sampler.per_gpu().set_index("gpu")
    assert list(per.index) == [0, 1]
    assert per.loc[0, "util_max_pct"] >= 42 and per.loc[0, "memory_max_mb"] == 1200
    assert per.loc[1, "util_mean_pct"] != per.loc[1, "util_mean_pct"]  # [N/A] stays empty
    assert sampler.table["seconds"].max() > 0
    assert "GPU 0: utilization mean" in sampler.summary() and "143,771 MiB" in sampler.summary()
    assert sampler.columns()["gpu_memory_mb"] == 2100.0
    table = gpu.parse("2026/12/02 06:40:00.100, 0, 97, 5000, 143771\n2026/12/02 06:40:00.3")  # a cut-off last line
    assert table[["gpu", "util_pct", "memory_used_mb"]].values.tolist() == [[0, 97, 5000]]


def test_run_keeps_each_levels_console_output(tmp_path, monkeypatch):
    def fake_level(model, url, csv_file, docker_tag, kwargs, limit):
        level = int(kwargs["concurrency"])
        if level == 3:
            raise perf.UnstableMeasurement("no stable measurement")
        pd.DataFrame({"concurrency": [level], "throughput": [10.0 * level], "stable": [True]}).to_csv(csv_file, index=False)
        return perf.Watched(0, [f"*** Measurement Settings ***\n", f"Concurrency: {level}, throughput: {10 * level} infer/sec\n"],
                            5.0, [])

    monkeypatch.setattr(perf, "_run_level", fake_level)
    table = perf.run("m", "localhost:8001", tmp_path / "m.csv", concurrency="1:3:1", progress=False)
    assert perf.console(table, 2) == "*** Measurement Settings ***\nConcurrency: 2, throughput: 20 infer/sec\n"
    with pytest.raises(KeyError, match=r"kept: \[1, 2\]"):
        perf.console(table, 3)


def test_a_request_count_row_takes_its_rate_from_the_mean_latency_not_whole_seconds(tmp_path, monkeypatch):
    """perf_analyzer's rate in --request-count mode is the count over whole seconds: 3162 requests at concurrency 16
    and 5.85 ms each took 1.16 s, and it printed 1580.41 infer/s (3162 / 2 s) on an H200 (2026-12-02d, the first call
    of notebook 13; git history keeps that recording)."""
    printed = ["  Sending 3162 benchmark requests\n",
               "  Pass [1] throughput: 1580.41 infer/sec. Avg latency: 5848 usec (std 1683 usec). \n"]

    def fake_level(model, url, csv_file, docker_tag, kwargs, limit):
        pd.DataFrame({"concurrency": [16], "throughput": [1580.41], "stable": [True]}).to_csv(csv_file, index=False)
        return perf.Watched(0, printed, 900.0, [])

    monkeypatch.setattr(perf, "_run_level", fake_level)
    counted = perf.run("m", "localhost:8001", tmp_path / "m.csv", concurrency="16", progress=False, request_count=3162)
    assert counted["throughput_reported"].iloc[0] == 1580.41
    assert counted["throughput"].iloc[0] == pytest.approx(16 / 0.005848)           # 2736 infer/s: Little's law
    timed = perf.run("m", "localhost:8001", tmp_path / "t.csv", concurrency="16", progress=False)
    assert timed["throughput"].iloc[0] == 1580.41 and "throughput_reported" not in timed  # windows: its own rate
    with pytest.raises(ValueError, match="Avg latency"):
        perf.closed_loop_throughput(["no pass line\n"], 16)


def test_a_window_where_no_request_completed_marks_the_level_unstable(tmp_path, monkeypatch):
    """The docker world beside the ci run on 2 cores (2026-12-02): ResNet18 at concurrency 1 took 0.35-0.96 s a
    request, a 500 ms window saw none, and perf_analyzer exited 3: that level is unstable (the sweep goes on), not a
    crash of the notebook."""
    printed = ["  Pass [5] throughput: 3.32854 infer/sec. Avg latency: 457245 usec (std 342991 usec). \n",
               "  Pass [6] throughput: 3.3289 infer/sec. Avg latency: 352591 usec (std 288849 usec). \n",
               "  Pass [7] cb::Error: No valid requests recorded within time interval. Please use a larger time window.\n",
               "  Pass [8] throughput: 1.65153 infer/sec. Avg latency: 955961 usec (std 18446744073709551615 usec). \n",
               "No valid requests recorded within time interval. Please use a larger time window.\n"]
    monkeypatch.setattr(perf, "watch", lambda *a, **k: perf.Watched(3, printed, 20.0, []))
    with pytest.raises(perf.UnstableMeasurement, match=r"completed within a 500 ms window \(its last three windows"):
        perf._run_level("m", "127.0.0.1:8001", tmp_path / "m.csv", None,
                        {"concurrency": "1", "measurement_interval_ms": 500}, 3.5)
