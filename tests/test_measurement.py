"""Measuring without losing the article's transport: count windows sized to the memory limit, warm-up passes,
repeated headline rows with their spread, the knee search and the winner rule on synthetic rows, backend parameters
and warm-up in a derived config, and the in-process reference with the input on the device."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import bench, ngc, perf, repository


def test_every_level_is_measured_in_count_windows_unless_time_windows_are_asked_for():
    """perf_analyzer's count windows end when N requests completed (its CLI reference): never empty on a slow machine,
    and the rate is perf_analyzer's own. Time windows only when asked for alone; --request-count is gone."""
    args = perf.perf_args("m", "127.0.0.1:8001", concurrency="16", measurement_request_count=300, max_trials=6)
    assert args[args.index("--measurement-mode") + 1] == "count_windows"
    assert args[args.index("--measurement-request-count") + 1] == "300" and args[args.index("--max-trials") + 1] == "6"
    default = perf.perf_args("m", "127.0.0.1:8001")
    assert default[default.index("--measurement-request-count") + 1] == str(perf.DEFAULT_WINDOW_REQUESTS)
    assert "--measurement-interval" not in args + default and "--request-count" not in args + default
    timed = perf.perf_args("m", "127.0.0.1:8001", measurement_interval_ms=1500)
    assert timed[timed.index("--measurement-interval") + 1] == "1500" and "--measurement-mode" not in timed
    with pytest.raises(ValueError, match="not both"):
        perf.perf_args("m", "127.0.0.1:8001", measurement_request_count=300, measurement_interval_ms=1500)
    with pytest.raises(TypeError):
        perf.perf_args("m", "127.0.0.1:8001", request_count=3000)  # noqa: the mode is gone


def test_a_count_window_is_sized_from_the_memory_limit():
    """N x trials requests of the tensor's bytes plus perf_analyzer's own per request (measured on the H200) stay under
    80 % of the limit; a bigger request gives a smaller N; shared memory keeps nothing per request: N is `most`."""
    fp32 = perf.count_window(602_112, trials=6, limit_gb=3.5)
    uint8 = perf.count_window(150_528, trials=6, limit_gb=3.5)
    for nbytes, options in ((602_112, fp32), (150_528, uint8)):
        assert options["max_trials"] == 6
        held = options["measurement_request_count"] * 6 * (nbytes + perf.REQUEST_FIXED_BYTES) * perf.REQUEST_MARGIN
        assert 0.79 * 3.5 * 2**30 < held <= 0.8 * 3.5 * 2**30, (nbytes, options)
    assert uint8["measurement_request_count"] > 2 * fp32["measurement_request_count"]
    assert perf.count_window(602_112, trials=3, limit_gb=3.5)["measurement_request_count"] == perf.request_budget(602_112, 3.5) // 3
    assert perf.count_window(602_112, trials=6, limit_gb=3.5, most=47) == {"measurement_request_count": 47, "max_trials": 6}
    assert perf.count_window(0, trials=6, most=1000) == {"measurement_request_count": 1000, "max_trials": 6}  # shared memory
    with pytest.raises(ValueError, match="give `most`"):
        perf.count_window(0, trials=6)
    with pytest.raises(ValueError, match=r"expected at least 20 requests per window; found \d+: 602,112 bytes .* under "
                                         r"0.1 GB.*shared memory"):
        perf.count_window(602_112, trials=6, limit_gb=0.1)
    args = perf.perf_args("m", "h:1", concurrency="16", **fp32)  # the kwargs go straight into perf_args
    assert args[args.index("--measurement-request-count") + 1] == str(fp32["measurement_request_count"])


def test_a_fast_rows_windows_are_sized_from_its_rate():
    """A window sleeps whole seconds, so at `rate` requests/s it keeps rate x ceil(N / rate) requests, whatever N is:
    the trials are lowered to what the limit holds, and a row with room for fewer than three windows is refused,
    with the rate, the bytes and the gigabytes three windows would hold."""
    sized = perf.count_window(602_112, trials=6, limit_gb=3.5, most=2000)
    half = sized["measurement_request_count"] / 2  # a window of N lasts two seconds at N / 2 per second: N's size
    assert perf.count_window(602_112, trials=6, limit_gb=3.5, most=2000, rate=half) == sized
    assert perf.count_window(602_112, trials=6, limit_gb=3.5, most=2000, rate=half + 1)["max_trials"] == 5  # more than N per window
    total = perf.request_budget(602_112, 24)
    fast = perf.count_window(602_112, trials=6, limit_gb=24, most=2000, rate=5000)
    assert fast["measurement_request_count"] == 2000 and fast["max_trials"] == total // 5000 < 6
    held = fast["max_trials"] * 5000 * (602_112 + perf.REQUEST_FIXED_BYTES) * perf.REQUEST_MARGIN
    assert held <= 0.8 * 24 * 2**30
    assert perf.count_window(602_112, trials=2, limit_gb=24, most=2000, rate=5000)["max_trials"] == 2  # never raised
    with pytest.raises(ValueError, match=r"expected room for 3 count windows under 80 % of the 3.5 GB limit; found "
                                         r"0: at 5,000 requests/s .* 5,000 requests of 602,112 bytes.*shared memory"):
        perf.count_window(602_112, trials=6, limit_gb=3.5, most=2000, rate=5000)
    assert perf.count_window(0, trials=6, most=2000, rate=5000)["max_trials"] == 6  # shared memory keeps nothing


def test_the_warm_up_pass_is_the_level_itself_unmeasured(tmp_path, monkeypatch):
    monkeypatch.setattr(perf, "find_perf_analyzer", lambda: perf.PerfAnalyzer(tmp_path / "perf_analyzer", "test", {}))
    command, _ = perf.warmup_command("m", "h:1", tmp_path / "x.csv", 16, None, 200, protocol="grpc",
                                     measurement_request_count=500, max_trials=10, stability_percentage=10)
    assert command[command.index("--concurrency-range") + 1] == "16"
    assert command[command.index("--measurement-mode") + 1] == "count_windows"
    assert command[command.index("--measurement-request-count") + 1] == "200"
    assert command[command.index("--max-trials") + 1] == "1" and command[-1].endswith("x_warmup.csv")
    small, _ = perf.warmup_command("m", "h:1", tmp_path / "x.csv", 16, None, 200, measurement_request_count=40)
    assert small[small.index("--measurement-request-count") + 1] == "40"  # never more than the level's own window
    timed, _ = perf.warmup_command("m", "h:1", tmp_path / "x.csv", 16, None, 200, measurement_interval_ms=500)
    assert "--measurement-interval" not in timed  # a warm-up is a count window too


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
    # as many copies as the server has instances, each in its own thread: their images per second together
    assert bench.device_throughput(tmp_path / "m.pt", "cpu", sample, 8, seconds=0.2, streams=2) > 0
    with pytest.raises(ValueError, match="streams must be at least 1 .*got 0"):
        bench.device_throughput(tmp_path / "m.pt", "cpu", sample, 8, streams=0)
    with pytest.raises(ValueError, match="cuda_graph replays one graph on one stream; got streams=3"):
        bench.device_throughput(tmp_path / "m.pt", "cuda", sample, 8, cuda_graph=True, streams=3)


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
    assert command[command.index("--measurement-mode") + 1] == "count_windows"
    # perf_analyzer keeps its requests in this mode too (7290 MB after 18 s on an H200): count windows sized for it
    sized, _ = perf.c_api_command("wanted", install, tmp_path / "c.csv", local, concurrency=16,
                                  **perf.count_window(150_528, trials=5, limit_gb=7.0))
    count = int(sized[sized.index("--measurement-request-count") + 1])
    assert sized[sized.index("--max-trials") + 1] == "5" and count == perf.request_budget(150_528, 7.0) // 5
    assert "--request-count" not in command + sized
    # the page prints the layout and the command's library path: the printed lines rebuild the same folders
    lines = perf.c_api_shell(command, install, local)
    assert lines[-1].startswith(f"LD_LIBRARY_PATH={lib.parent.resolve()}:/x") and lines[-1].endswith(ngc.as_shell(command))
    assert "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} " in lines[-1]  # the terminal's own path kept, as the helper's run does
    shutil.rmtree(install.parent)
    subprocess.run(["bash", "-ec", "\n".join(lines[:-1])], check=True)
    assert (install / "lib" / "libtritonserver.so").resolve() == lib.resolve()
    assert (install / "backends").resolve() == backends.resolve()
    assert [p.resolve() for p in (install.parent / "repository").iterdir()] == [(repo / "wanted").resolve()]


def test_the_printed_export_line_lets_the_local_perf_analyzer_start_in_a_terminal():
    """Teaching review s22 F1: the helpers run the local binary with two library folders on its path; the line
    notebook 11 prints gives a terminal the same, so the printed commands run there too."""
    line = perf.shell_setup()
    unpacked = Path(sys.prefix) / "opt" / "perf_analyzer" / "bin" / "perf_analyzer"
    if not line or not unpacked.exists():
        pytest.skip("no perf_analyzer unpacked by ./tutorial setup in this environment")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    bare = subprocess.run([str(unpacked), "--version"], capture_output=True, text=True, env=env)
    ran = subprocess.run(["bash", "-c", f"{line}; {shlex.quote(str(unpacked))} --version"], capture_output=True,
                         text=True, env=env)
    assert "error while loading shared libraries" not in ran.stderr, ran.stderr
    assert "error while loading shared libraries" in bare.stderr or bare.returncode == ran.returncode


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


def test_a_count_window_row_keeps_perf_analyzers_own_rate_and_says_what_it_counted(tmp_path, monkeypatch):
    """The rate of a count-window level is perf_analyzer's (completed requests over the windows' real duration), as
    printed; the row says the window's size and the requests its summary counted."""
    printed = ["  Pass [1] throughput: 1580.41 infer/sec. Avg latency: 5848 usec (std 1683 usec). \n",
               "  Client: \n", "    Request count: 9482\n", "    Throughput: 1580.41 infer/sec\n"]

    def fake_level(model, url, csv_file, docker_tag, kwargs, limit):
        pd.DataFrame({"concurrency": [16], "throughput": [1580.41], "stable": [True]}).to_csv(csv_file, index=False)
        return perf.Watched(0, printed, 900.0, [])

    monkeypatch.setattr(perf, "_run_level", fake_level)
    counted = perf.run("m", "localhost:8001", tmp_path / "m.csv", concurrency="16", progress=False,
                       measurement_request_count=500)
    assert counted["throughput"].iloc[0] == 1580.41 and "throughput_reported" not in counted
    assert counted["window_requests"].iloc[0] == 500 and counted["requests"].iloc[0] == 9482
    default = perf.run("m", "localhost:8001", tmp_path / "d.csv", concurrency="16", progress=False)
    assert default["window_requests"].iloc[0] == perf.DEFAULT_WINDOW_REQUESTS
    assert perf.measured_requests(["no summary\n"]) == 0


def test_an_unstable_count_window_level_names_the_remedies_of_count_windows(tmp_path, monkeypatch):
    """Count windows can still fail to stabilize within --max-trials: the error keeps the windows' spread and says
    what helps there (more requests per window, more trials, or a looser stability percentage)."""
    printed = ["  Pass [1] throughput: 40.1 infer/sec. Avg latency: 99000 usec (std 1 usec). \n",
               "  Pass [2] throughput: 20.3 infer/sec. Avg latency: 190000 usec (std 1 usec). \n",
               "  Pass [3] throughput: 35.2 infer/sec. Avg latency: 110000 usec (std 1 usec). \n",
               "Failed to obtain stable measurement within 3 measurement windows for concurrency 4.\n"]
    monkeypatch.setattr(perf, "watch", lambda *a, **k: perf.Watched(2, printed, 20.0, []))
    with pytest.raises(perf.UnstableMeasurement) as err:
        perf._run_level("m", "127.0.0.1:8001", tmp_path / "m.csv", None,
                        {"concurrency": "4", "measurement_request_count": 20, "max_trials": 3,
                         "stability_percentage": 10}, 3.5)
    text = str(err.value)
    assert "count windows of 20 requests, at most 3 of them" in text and "(98% apart)" in text
    assert "raise --measurement-request-count (longer windows) or --max-trials" in text
    assert "--stability-percentage" in text and "measurement-interval" not in text


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
    with pytest.raises(perf.UnstableMeasurement, match=r"500 ms time windows.* completed within a window \(its last three windows"):
        perf._run_level("m", "127.0.0.1:8001", tmp_path / "m.csv", None,
                        {"concurrency": "1", "measurement_interval_ms": 500}, 3.5)


# --- the knee search and the winner rule, on synthetic rows ---

def _measure(table: dict[int, tuple[float, float]]):
    """A measuring function over a synthetic machine: concurrency -> (throughput, p99 ms); it records what it was
    asked."""
    asked = []

    def measure(level: int) -> dict:
        asked.append(level)
        throughput, p99 = table[level]
        return {"stable": True, "throughput": throughput, "p99_ms": p99}

    return measure, asked


def test_the_knee_search_doubles_until_p99_passes_the_budget_then_bisects_once():
    machine = {1: (1000, 2.0), 2: (1900, 2.2), 4: (3600, 2.5), 8: (6500, 3.0), 16: (11000, 4.0), 32: (17000, 6.0),
               64: (21000, 8.5), 128: (23000, 14.0), 96: (22500, 10.5)}
    measure, asked = _measure(machine)
    found = perf.find_knee(measure, 10.0, most=1024)
    assert asked == [1, 2, 4, 8, 16, 32, 64, 128, 96]  # doubling, then one level between 64 and 128
    assert found["knee"]["concurrency"] == 64 and found["above"]["concurrency"] == 96
    assert "p99 10.50 ms at concurrency 96 is over the 10 ms budget" == found["why"]
    inside = {**machine, 96: (22800, 9.5)}  # the bisection level within budget and rising: it is the knee
    measure, asked = _measure(inside)
    found = perf.find_knee(measure, 10.0)
    assert asked[-1] == 96 and found["knee"]["concurrency"] == 96 and found["above"]["concurrency"] == 128
    assert [r["concurrency"] for r in found["rows"]] == asked


def test_a_knee_search_stopped_by_the_budget_says_when_throughput_had_flattened_too():
    """Review s24 (GPU, 16): a level over the budget whose throughput had also stopped rising named only the budget."""
    flat = {1: (1000, 2.0), 2: (1900, 2.2), 4: (1910, 12.0), 3: (1905, 11.0)}
    found = perf.find_knee(_measure(flat)[0], 10.0, most=4)
    assert found["why"].startswith("p99 11.00 ms at concurrency 3 is over the 10 ms budget, and throughput had stopped "
                                   "rising there too (+0.3% against 1900.0 at concurrency 2, 3% needed)")
    rising = {1: (1000, 2.0), 2: (1900, 2.2), 4: (3600, 12.0), 3: (2800, 11.0)}
    assert perf.find_knee(_measure(rising)[0], 10.0, most=4)["why"] == "p99 11.00 ms at concurrency 3 is over the 10 ms budget"


def test_a_confirmed_knee_search_measures_the_knee_and_the_level_above_again_and_goes_on_where_they_say():
    single = {16: (5000, 3.0), 32: (9000, 5.0), 64: (12000, 10.7), 48: (10100, 9.4), 128: (20500, 12.5)}
    again = {48: (15600, 4.9), 64: (17000, 6.0), 128: (20000, 12.0)}  # medians: 64 was one noisy window
    measure, asked = _measure(single)
    confirm, confirmed = _measure(again)
    found = perf.find_knee(measure, 10.0, start=16, confirm=confirm)
    assert asked == [16, 32, 64, 48, 128] and confirmed == [48, 64, 128]  # the search went on past 64 once confirmed
    assert found["knee"]["concurrency"] == 64 and found["knee"]["throughput"] == 17000
    assert found["knee"]["search_run"] == 12000 and found["above"]["concurrency"] == 128
    assert "p99 12.00 ms at concurrency 128" in found["why"]
    plain = perf.find_knee(_measure(single)[0], 10.0, start=16)  # without confirm: the noisy window sets the knee
    assert plain["knee"]["concurrency"] == 48 and "search_run" not in plain["knee"]


def test_the_knee_search_stops_where_throughput_stops_rising():
    flat = {16: (11000, 3.0), 32: (17000, 4.0), 64: (17300, 7.0), 48: (17100, 5.5)}  # +1.8 % at 64: not rising
    measure, asked = _measure(flat)
    found = perf.find_knee(measure, 10.0, start=16)
    assert asked == [16, 32, 64, 48]
    assert found["knee"]["concurrency"] == 32 and found["above"]["concurrency"] == 48
    assert found["why"].startswith("throughput stopped rising at concurrency 48") and "3% needed" in found["why"]


def test_the_knee_search_over_budget_at_the_first_level_has_no_knee():
    measure, asked = _measure({16: (900, 25.0)})
    found = perf.find_knee(measure, 10.0, start=16)
    assert asked == [16] and found["knee"] is None and found["above"]["concurrency"] == 16
    assert "over the 10 ms budget" in found["why"]
    unstable = perf.knee([{"concurrency": 16, "stable": False, "throughput": float("nan"), "p99_ms": float("nan"),
                           "error": "passed the memory limit"}], 10.0)
    assert unstable["knee"] is None and "no stable measurement (passed the memory limit)" in unstable["why"]


def test_the_knee_search_never_over_budget_stops_at_most():
    rising = {c: (1000.0 * c ** 0.9, 1.0 + c / 100) for c in (1, 2, 4, 8, 16, 32, 64, 100)}
    measure, asked = _measure(rising)
    found = perf.find_knee(measure, 10.0, most=100)
    assert asked == [1, 2, 4, 8, 16, 32, 64, 100]  # the last doubling capped at `most`
    assert found["knee"]["concurrency"] == 100 and found["above"] is None and "at least there" in found["why"]
    assert perf.next_level(found["rows"], 10.0, most=100) is None
    assert "throughput rising up to the highest level measured" in found["why"]
    one = perf.knee([{"concurrency": 1, "stable": True, "throughput": 37.0, "p99_ms": 5.0}], 10.0)
    assert one["knee"]["concurrency"] == 1 and "rising" not in one["why"]
    assert one["why"] == "p99 within 10 ms at the only level measured, concurrency 1: the knee is at least there"
    assert perf.next_level([], 10.0, start=4) == 4
    assert perf.next_level(pd.DataFrame(found["rows"][:3]).to_dict("records"), 10.0, most=100) == 8  # tables work too


def test_the_winner_rule_names_a_winner_only_beyond_noise():
    tie = perf.winner({"defaults": [4355, 4733, 4302], "INFERENCE_MODE false": [4807, 4410, 4650]}, simpler="defaults")
    assert tie["winner"] is None and tie["kept"] == "defaults" and tie["verdict"].startswith("tie within noise")
    apart = perf.winner({"1 instance": [4294, 4310, 4350], "2 instances": [5942, 6190, 6568]}, simpler="1 instance")
    assert apart["winner"] == apart["kept"] == "2 instances" and apart["ranges"]["2 instances"] == (5942, 6568)
    assert "clears every other's" in apart["verdict"] and "1.37-1.53x" in apart["verdict"]
    latency = perf.winner({"a": [3.1, 3.3, 3.2], "b": [4.0, 4.4, 4.2]}, higher_is_better=False, simpler="b")
    assert latency["winner"] == "a"
    behind = perf.winner({"simple": [1, 2, 3], "x": [10, 12, 11], "y": [11, 13, 12]}, simpler="simple")
    assert behind["winner"] is None and behind["kept"] == "y"  # x and y tie; the simpler one is clearly behind both
    with pytest.raises(ValueError, match=r"expected at least 3 measurements of each setting; found 2 of 'b'"):
        perf.winner({"a": [1, 2, 3], "b": [4, 5]}, simpler="a")
    with pytest.raises(ValueError, match="not one of the settings"):
        perf.winner({"a": [1, 2, 3], "b": [4, 5, 6]}, simpler="c")


def test_settings_are_measured_in_turns_so_drift_reaches_all_alike():
    order = []
    found = perf.alternate(lambda name: order.append(name) or {"stable": True, "throughput": 1.0}, ["a", "b", "c"], runs=3)
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert {name: len(rows) for name, rows in found.items()} == {"a": 3, "b": 3, "c": 3}
    with pytest.raises(ValueError, match="at least one setting"):
        perf.alternate(lambda name: {}, [], runs=3)


def test_screening_sends_the_two_fastest_stable_runs_on_and_fills_up_with_the_simplest():
    stable = lambda rate: {"stable": True, "throughput": rate}  # noqa: E731
    unstable = {"stable": False, "throughput": float("nan")}
    # notebook 12 on an H200: two of three screening runs unstable; one finalist made perf.contest raise
    assert perf.finalists({"fp16": unstable, "fp16_frozen": stable(3000.0), "fp16_nhwc": unstable}) == [
        "fp16", "fp16_frozen"]
    assert perf.finalists({"a": stable(100.0), "b": stable(300.0), "c": stable(200.0)}) == ["b", "c"]
    assert perf.finalists({"a": unstable, "b": unstable, "c": unstable}) == ["a", "b"]
    with pytest.raises(ValueError, match="at least 2 screened settings; found 1"):
        perf.finalists({"a": stable(1.0)})


def test_a_contest_names_a_winner_only_beyond_noise_and_never_from_unstable_runs():
    def rates(table):
        runs = {name: iter(values) for name, values in table.items()}
        return lambda name: {"stable": True, "throughput": next(runs[name])}

    apart = perf.contest(rates({"simple": [100, 102, 101], "fast": [150, 149, 152]}), ["simple", "fast"], simpler="simple")
    assert apart["winner"] == apart["kept"] == "fast" and len(apart["runs"]) == 6
    assert list(apart["runs"]["setting"]) == ["simple", "fast", "fast", "simple", "simple", "fast"]
    tie = perf.contest(rates({"simple": [100, 120, 110], "fast": [115, 105, 125]}), ["simple", "fast"], simpler="simple")
    assert tie["winner"] is None and tie["kept"] == "simple" and tie["verdict"].startswith("tie within noise")
    flaky = iter([{"stable": True, "throughput": 100}, {"stable": True, "throughput": 300},
                  {"stable": True, "throughput": 300}, {"stable": True, "throughput": 100},
                  {"stable": True, "throughput": 100}, {"stable": False, "throughput": float("nan")}])
    short = perf.contest(lambda name: next(flaky), ["simple", "fast"], simpler="simple")
    assert short["winner"] is None and "fast: 2 of 3" in short["verdict"]
    assert short["kept"] == "fast" and short["verdict"].endswith(
        "keeping fast, the simplest setting left: every stable run of simple is behind all of fast's")
    overlap = iter([{"stable": True, "throughput": 100}, {"stable": True, "throughput": 300},
                    {"stable": True, "throughput": 300}, {"stable": True, "throughput": 100},
                    {"stable": True, "throughput": 310}, {"stable": False, "throughput": float("nan")}])
    short = perf.contest(lambda name: next(overlap), ["simple", "fast"], simpler="simple")
    assert short["winner"] is None and short["kept"] == "simple" and short["verdict"].endswith("the simpler setting")
    # the simpler setting is the short one, and every run of the other clears its stable runs: the other wins
    slow = iter([{"stable": True, "throughput": 100}, {"stable": True, "throughput": 300},
                 {"stable": True, "throughput": 310}, {"stable": False, "throughput": float("nan")},
                 {"stable": True, "throughput": 110}, {"stable": True, "throughput": 290}])
    fair = perf.contest(lambda name: next(slow), ["simple", "fast"], simpler="simple")
    assert fair["winner"] == "fast" and fair["kept"] == "fast" and "simple 2 of 3" in fair["verdict"]


def test_a_short_contest_never_keeps_a_setting_below_every_run_of_another():
    # notebook 14 on an H200: the two UINT8 finalists tied, one had an unstable run; the article baseline, far behind
    # both, was kept as "the simpler setting" and notebook 16 drove a variant with no dynamic batcher
    table = {"baseline": [600, 610, 620], "uint8 i2": [20000, 21000, None], "uint8 i3": [20500, 20800, 21500]}
    runs = {name: iter(values) for name, values in table.items()}

    def measure(name: str) -> dict:
        rate = next(runs[name])
        return {"stable": rate is not None, "throughput": float("nan") if rate is None else float(rate)}

    result = perf.contest(measure, list(table), simpler=list(table))
    assert result["winner"] is None and result["kept"] == "uint8 i2", result["verdict"]
    assert "uint8 i2: 2 of 3" in result["verdict"] and result["verdict"].endswith(
        "the simplest setting left: every stable run of baseline is behind all of uint8 i2's")


def _measured(table: dict[str, list]):
    """A measure function that returns each setting's rates in turn; None is an unstable run."""
    runs = {name: iter(values) for name, values in table.items()}

    def measure(name: str) -> dict:
        rate = next(runs[name])
        return {"stable": rate is not None, "throughput": float("nan") if rate is None else float(rate)}

    return measure


def test_what_a_contest_without_a_winner_keeps():
    # a finalist with no stable run is passed over while another has one
    none = perf.contest(_measured({"simple": [None] * 3, "fast": [300, 310, None]}), ["simple", "fast"], simpler="simple")
    assert none["kept"] == "fast" and none["verdict"].endswith("the simplest setting left: simple gave no stable run")
    # one stable run beats nothing: a single window is noise
    once = perf.contest(_measured({"simple": [100, 110, 120], "fast": [300, None, None]}), ["simple", "fast"],
                        simpler="simple")
    assert once["kept"] == "simple" and once["verdict"].endswith("keeping simple, the simpler setting")
    # below three runs no winner is named, but a setting behind every run of another is not kept either
    two = perf.contest(_measured({"simple": [100, 100], "fast": [300, 300]}), ["simple", "fast"], simpler="simple", runs=2)
    assert two["winner"] is None and two["kept"] == "fast" and "no winner is named below 3 runs" in two["verdict"]
    one = perf.contest(_measured({"simple": [100], "fast": [300]}), ["simple", "fast"], simpler="simple", runs=1)
    assert one["kept"] == "simple" and one["verdict"].endswith("keeping simple, the simpler setting")
    # a tie with the best does not keep a setting that a third one beats in every run
    tie = perf.contest(_measured({"baseline": [600, 610, 620], "i2": [20000, 20500, 21000], "i3": [500, 25000, 26000]}),
                       ["baseline", "i2", "i3"], simpler=["baseline", "i2", "i3"])
    assert tie["winner"] is None and tie["kept"] == "i2" and tie["verdict"].startswith("tie within noise")
    assert tie["verdict"].endswith("(the simpler setting; every run of baseline is behind all of i2's)")
    with pytest.raises(ValueError, match="simpler='c' is not one of the settings to measure"):
        perf.contest(_measured({"a": [1], "b": [2]}), ["a", "b"], simpler="c", runs=1)
    assert perf.beaten({"a": [1, 2], "b": [3, 4], "c": [5]}) == {"a": "b"}  # c's single run beats nothing
    assert perf.beaten({"a": [1, 2], "b": [3, 4]}, higher_is_better=False) == {"b": "a"}  # latency: lower is ahead


def test_a_tie_keeps_the_simplest_of_the_tied_settings_in_the_order_given():
    tie = perf.winner({"baseline": [10, 11, 12], "fp32 shm": [50, 56, 53], "uint8 shm": [52, 58, 55]},
                      simpler=["baseline", "fp32 shm", "uint8 shm"])
    assert tie["winner"] is None and tie["kept"] == "fp32 shm", tie  # the baseline is clearly behind: not kept


def test_the_shown_command_is_the_one_a_level_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(perf, "find_perf_analyzer", lambda: perf.PerfAnalyzer(Path("/opt/pa/perf_analyzer"), "test"))
    line = perf.shown_command("m", "127.0.0.1:8001", tmp_path / "x.csv", 8, memory_limit_gb=2.0, warmup_requests=50,
                              measurement_request_count=40, max_trials=6, shared_memory="system", batch_size=4)
    assert line.startswith("/opt/pa/perf_analyzer -m m -u 127.0.0.1:8001") and "--concurrency-range 8" in line
    assert "--measurement-request-count 40" in line and "-b 4" in line and "--shared-memory system" in line
    assert "memory" not in line.replace("--shared-memory", "") and "warmup" not in line


def test_a_contest_of_fewer_than_three_runs_names_no_winner():
    fast = perf.contest(lambda name: {"stable": True, "throughput": 100.0 if name == "simple" else 900.0},
                        ["simple", "fast"], simpler="simple", runs=1)
    assert fast["winner"] is None and fast["kept"] == "simple" and "no winner is named" in fast["verdict"]


def test_several_runs_as_one_row_keep_the_median_throughput_and_the_middle_runs_latencies():
    runs = [{"stable": True, "throughput": t, "p99_ms": p} for t, p in ((4662.6, 5.2), (5719.5, 4.1))]
    runs.append({"stable": False, "throughput": 9000.0, "p99_ms": 1.0})  # an unstable run counts for nothing
    row = perf.median_run(runs)
    assert row["throughput"] == pytest.approx((4662.6 + 5719.5) / 2) and row["repeats"] == 2
    assert row["p99_ms"] == 5.2 and (row["throughput_min"], row["throughput_max"]) == (4662.6, 5719.5)
    assert row["middle_throughput"] == 4662.6  # the rate of the run whose latencies the row shows
    assert perf.median_run(runs[2:])["repeats"] == 0
