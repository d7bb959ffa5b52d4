"""A real local Triton server: readiness, inference over HTTP and gRPC, perf_analyzer, failures and clean-up."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from conftest import make_onnx, tagged, triton_processes
from helpers import client as tc
from helpers import export, metrics, perf, repository, series
from helpers.runtime import RuntimeChoice
from helpers.preflight import RepositoryError
from helpers.server import ServerError, SharedServer, TritonServer


@pytest.fixture
def no_leftovers():
    before = {p.pid for p in triton_processes()}
    yield
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and {p.pid for p in triton_processes()} - before:
        time.sleep(0.5)
    assert not {p.pid for p in triton_processes()} - before, "tritonserver or a backend stub was left running"


@pytest.fixture
def without_onnxruntime(monkeypatch):
    """The ONNX model served as on a machine where `./tutorial setup` could not build the ONNX Runtime backend: by the
    Python-backend stand-in, whose stub loads the model for a second or two (the start-up tests need that window)."""
    monkeypatch.setenv("TUTORIAL_WITHOUT_BACKENDS", "onnxruntime")


def test_serves_stand_in_over_http_and_grpc(tiny_repo, tiny_onnx, no_leftovers, without_onnxruntime):
    x = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    expected = export.run_onnx(tiny_onnx, x)
    with TritonServer(tiny_repo, "local") as server:
        assert [s.how for s in server.served] == ["python stand-in"]
        for protocol, url in (("http", server.url), ("grpc", server.grpc_url)):
            out = tc.infer(tc.connect(url, protocol), "tiny", x)["Y"]
            np.testing.assert_allclose(out, expected, rtol=1e-6)
        config = tc.connect(server.url).get_model_config("tiny")
        assert config["backend"] == "python" and config["max_batch_size"] == 8
        assert config["parameters"]["EXECUTION_ENV_PATH"]["string_value"] == sys.prefix
    assert not server.running


def test_stop_closes_the_clients_connect_made_so_triton_does_not_wait_for_them(tiny_repo, tmp_path, no_leftovers):
    """A stopping Triton waits up to --exit-timeout-secs (10 s) for open HTTP connections; a tritonclient HTTP client
    keeps its connection open. Notebooks 05-07 and 12 each paid 10 s per stop for it (issue #20)."""
    server = TritonServer(tiny_repo, "local", log_file=tmp_path / "triton.log").start()
    http, grpc = tc.connect(server.url), tc.connect(server.grpc_url, "grpc")
    for client in (http, grpc):
        tc.infer(client, "tiny", np.ones((1, 8), np.float32))
    server.stop()
    log = server.log_file.read_text()
    assert "Signal (15) received" in log and "All models are stopped" in log, log[-2000:]
    assert "HTTP service connections" not in log, log[-2000:]
    with pytest.raises(ValueError, match="closed when the server at .* stopped; make a new one"):
        tc.infer(http, "tiny", np.ones((1, 8), np.float32))


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    """One server for the tests that only read from it (requests, perf_analyzer, metrics): a start and a stop each
    cost a few seconds. Tests of starting and stopping start their own."""
    folder = tmp_path_factory.mktemp("shared")
    onnx = make_onnx(folder / "tiny.onnx")
    config = repository.config_from_onnx("tiny", onnx, max_batch_size=8, preferred_batch_sizes=[4],
                                         max_queue_delay_us=100)
    repository.add_model(folder / "models", config, onnx)
    tag = f"shared-tiny-server-{os.getpid()}"  # one per pytest worker: each worker has its own
    with tagged(tag):  # its processes told apart from each test's own
        server = TritonServer(folder / "models", "local").start()
    try:
        yield server
    finally:
        server.stop()
    assert not triton_processes(tag=tag), "the shared server left a process running"


def test_client_refuses_bad_requests_with_what_was_expected(tiny_server):
    server = tiny_server
    http = tc.connect(server.url)
    with pytest.raises(ValueError, match=r"'nope' is not served here; the server has \['tiny'\]"):
        tc.infer(http, "nope", np.zeros((1, 8), np.float32))
    with pytest.raises(ValueError, match=r"is FP32 \(float32\); got float64"):
        tc.infer(http, "tiny", np.zeros((1, 8)))
    with pytest.raises(ValueError, match=r"has shape \[-1, 8\]"):
        tc.infer(http, "tiny", np.zeros((1, 7), np.float32))
    with pytest.raises(ValueError, match="batches of at most 8"):
        tc.infer(http, "tiny", np.zeros((9, 8), np.float32))
    with pytest.raises(ValueError, match=r"takes inputs \['X'\]"):
        tc.infer(http, "tiny", {"x": np.zeros((1, 8), np.float32)})


def test_perf_analyzer_against_real_server(tiny_server, tmp_path):
    server = tiny_server
    # stability within 6x: this call checks the pipeline (the unstable path is the next call's), and in CI it runs
    # beside the notebooks of both worlds on 2 cores
    table = perf.run("tiny", server.grpc_url, tmp_path / "tiny.csv", concurrency="1:2:1",
                     measurement_request_count=20, max_trials=5, stability_percentage=500, progress=False)
    with pytest.raises(perf.UnstableMeasurement, match="no concurrency level of 1 was stable.*raise "
                                                       "--measurement-request-count"):
        perf.run("tiny", server.grpc_url, tmp_path / "never.csv", concurrency="1", measurement_request_count=10,
                 max_trials=3, stability_percentage=0, progress=False)
    assert list(table["concurrency"]) == [1, 2] and table["stable"].all()
    assert (table["throughput"] > 0).all() and (table["p99_ms"] >= table["p50_ms"]).all()
    assert {"queue_ms", "compute_infer_ms", "compute_ms"} <= set(table.columns)
    assert perf.parse_csv(tmp_path / "tiny.csv")["concurrency"].tolist() == [1, 2]


def test_count_windows_and_a_warm_up_against_a_real_server(tiny_server, tmp_path):
    table = perf.run("tiny", tiny_server.grpc_url, tmp_path / "counted.csv", concurrency="1:2:1",
                     measurement_request_count=60, max_trials=4, stability_percentage=500, progress=False,
                     warmup_requests=30)
    assert list(table["concurrency"]) == [1, 2] and table["stable"].all() and (table["window_requests"] == 60).all()
    assert (table["requests"] >= 60).all()  # what perf_analyzer's summary counted: at least one window's worth
    assert (table["client_cores"] > 0).all()
    log = (tmp_path / "counted.log").read_text()
    assert log.count("Request concurrency: 1") >= 2 and "Request concurrency: 2" in log  # warm-ups, then levels


def test_memory_guard_stops_perf_analyzer_and_records_the_row(tiny_server, tmp_path):
    server = tiny_server
    table = perf.run("tiny", server.grpc_url, tmp_path / "ok.csv", concurrency="1:2:1", measurement_request_count=20,
                     max_trials=5, stability_percentage=500, progress=False)  # the pipeline, not stability
    assert (table["peak_rss_mb"] > 0).all() and (table["error"] == "").all()
    row = perf.measure_level("tiny", server.grpc_url, tmp_path / "capped.csv", 2, measurement_request_count=20,
                             max_trials=5, stability_percentage=50, memory_limit_gb=0.005)
    assert row["stable"] is False and "passed the memory limit of 0.005 GB" in row["error"]
    assert "shared memory" in row["error"] and "issues/84" in row["error"]  # the remedy and the upstream issue
    assert not [p for p in psutil.process_iter(["name"]) if p.info["name"] == "perf_analyzer"
                and "capped" in " ".join(p.cmdline())], "the stopped perf_analyzer is still running"


def test_metrics_count_what_the_server_did(tiny_server):
    from concurrent.futures import ThreadPoolExecutor

    server = tiny_server
    before, ran = metrics.scrape(server.metrics_url), metrics.executions(server.url, "tiny")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: tc.infer(tc.connect(server.url), "tiny", np.ones((1, 8), np.float32)), range(32)))
    deadline = time.monotonic() + 10  # the counters move a moment after the responses
    while time.monotonic() < deadline:
        seen = metrics.between(before, metrics.scrape(server.metrics_url), "tiny")
        if seen["requests"] >= 32:
            break
        time.sleep(0.2)
    assert seen["requests"] == 32 and seen["executions"] <= 32 and seen["avg_batch"] >= 1.0
    assert seen["queue_ms_per_request"] >= 0 and seen["compute_ms_per_request"] > 0
    # the statistics extension counts each execution once: the same executions as the metrics
    after = metrics.executions(server.url, "tiny")
    assert after[0] - ran[0] == seen["executions"] and metrics.per_execution_ms(ran, after) > 0
    # an instance's whole time per execution holds compute input and output beside compute infer
    assert metrics.per_execution_ms(ran, after, whole=True) > metrics.per_execution_ms(ran, after)
    assert metrics.per_execution_ms(after, after) != metrics.per_execution_ms(after, after)  # none ran: nan


def test_model_that_fails_to_load_is_named_with_log_tail(tmp_path, tiny_onnx, no_leftovers):
    repo = tmp_path / "models"
    repository.add_model(repo, repository.config_from_onnx("good", tiny_onnx), tiny_onnx)
    repository.add_model(repo, repository.config_from_onnx("broken", tiny_onnx), tiny_onnx)
    (repo / "broken" / "1" / "model.onnx").write_bytes(b"not an onnx file")
    started = time.monotonic()
    with pytest.raises(RepositoryError, match=r"model 'broken': broken/1/model.onnx cannot be read"):
        TritonServer(repo, "local").start()  # the pre-flight check, before any server
    assert time.monotonic() - started < 5
    server = TritonServer(repo, "local", startup_timeout=120, preflight=False)
    with pytest.raises(ServerError, match=r"model 'broken'") as info:
        server.start()  # the server's own refusal, named, with its log
    assert "last" in str(info.value) and "tritonserver.log" in str(info.value)
    with TritonServer(repo, "local", models=["good"]) as only_good:  # a broken model stops nothing else
        assert [s.name for s in only_good.served] == ["good"]
    assert not server.running


def test_busy_port_is_reported_before_starting(tmp_path, tiny_repo):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        server = TritonServer(tiny_repo, RuntimeChoice("docker", "test"), http_port=port, grpc_port=port + 1,
                              metrics_port=port + 2)
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is busy"):
            server.start()


def test_picked_ports_are_free_and_outside_the_range_of_outgoing_connections(monkeypatch):
    """A port from the kernel's range for outgoing connections can be taken by any client before the server binds it;
    where the range leaves room below it, free_port picks from there, never a port in `avoid` or one in use."""
    from helpers import launchers

    outgoing = launchers.outgoing_ports()
    assert outgoing.start > 11000, f"this machine's range of outgoing ports starts at {outgoing.start}"
    picked = [launchers.free_port() for _ in range(50)]
    avoided = launchers.free_port(avoid=picked)
    assert all(10000 <= port < outgoing.start for port in picked + [avoided]), picked
    assert avoided not in picked
    for port in picked[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: it binds
    monkeypatch.setattr(launchers, "outgoing_ports", lambda: range(1024, 65536))  # no room below: the kernel picks
    with socket.socket() as s:
        s.bind(("127.0.0.1", launchers.free_port()))


def test_a_picked_port_taken_before_start_is_picked_again(tmp_path, tiny_repo):
    """Two worlds of CI on one machine: 11's server picked 8001 when it was made, another test's server took 8001
    before 11 started, and start() refused (the port was picked, not asked for): it picks again now."""
    server = TritonServer(tiny_repo, "local", startup_timeout=120)
    picked = server.grpc_port
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", picked))
        s.listen()
        with server:
            assert server.grpc_port != picked and server.running
    assert not server.running


def test_picked_ports_are_distinct_when_the_os_hands_one_out_twice(tiny_repo, monkeypatch):
    """bind(0) after a close may return the port it just gave: a server that got it twice could not bind its own."""
    from helpers import launchers

    handed = iter([41000, 41000, 41000, 41001, 41001, 41002])

    class Socket:  # what the OS hands out, in that order
        def bind(self, address):
            self.port = next(handed)

        def getsockname(self):
            return ("127.0.0.1", self.port)

        def close(self):
            pass

    monkeypatch.setattr(launchers, "socket", type("module", (), {"socket": Socket}))
    monkeypatch.setattr(launchers, "outgoing_ports", lambda: range(1024, 65536))  # no room below it: bind(0) picks
    server = TritonServer(tiny_repo, "local")
    assert (server.http_port, server.grpc_port, server.metrics_port) == (41000, 41001, 41002)


@pytest.mark.parametrize("asked", [False, True])
def test_a_port_taken_before_the_server_binds_it(tiny_repo, monkeypatch, capsys, no_leftovers, asked):
    """Triton binds its ports only after loading its models: another process can take a picked port in between
    (the likely cause of issue #12's last CI failure, with servers starting four at a time). A port we picked is
    replaced; one the user asked for is an error that names it."""
    import helpers.server

    with socket.socket() as thief:
        thief.bind(("127.0.0.1", 0))
        thief.listen()
        port = thief.getsockname()[1]
        server = TritonServer(tiny_repo, "local", grpc_port=port if asked else None, quiet=True)
        server.grpc_port = port  # as if picked, then taken after start()'s check for busy ports
        monkeypatch.setattr(helpers.server, "port_busy", lambda *_: False)
        if asked:
            with pytest.raises(ServerError, match=f"port {port} was taken by another process \\(attempt 1 of 3\\): "
                                                  "pass other ports(.|\n)*already in use"):
                server.start()
        else:
            with server:
                assert server.grpc_port != port
                assert tc.connect(server.grpc_url, "grpc").is_server_ready()
            assert f"port {port} was taken by another process before the server bound it" in capsys.readouterr().out
    assert not server.running


@pytest.mark.parametrize("where", ["as the launch ends", "before stop() holds it back"])
def test_a_ctrl_c_at_the_edges_of_start_stops_what_it_launched(tiny_repo, monkeypatch, no_leftovers, where):
    """Two narrow moments of start(): the Ctrl-C handler is restored after the launch (the signal is raised on the
    next line), and the clean-up after a first Ctrl-C has begun but not yet held Ctrl-C back."""
    import helpers.server

    if where == "as the launch ends":
        restore = helpers.server._NoInterrupt.__exit__

        def restore_then_ctrl_c(self, *exc):
            restore(self, *exc)
            if not self.deliver:
                raise KeyboardInterrupt

        monkeypatch.setattr(helpers.server._NoInterrupt, "__exit__", restore_then_ctrl_c)
    else:
        stop, calls = TritonServer.stop, []

        def ctrl_c_before_the_first_stop(self, *args):
            calls.append(1)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return stop(self, *args)

        def interrupted_load(self):
            raise KeyboardInterrupt

        monkeypatch.setattr(TritonServer, "stop", ctrl_c_before_the_first_stop)
        monkeypatch.setattr(TritonServer, "_wait_ready", interrupted_load)
    server = TritonServer(tiny_repo, "local", quiet=True)
    with pytest.raises(KeyboardInterrupt):
        server.start()
    assert not server.running and not server.workdir.exists()


@pytest.mark.reliability
def test_exception_inside_with_block_stops_server(tiny_repo, no_leftovers):
    with pytest.raises(RuntimeError, match="boom"):
        with TritonServer(tiny_repo, "local") as server:
            assert server.running
            raise RuntimeError("boom")
    assert not server.running


@pytest.mark.reliability
def test_killed_parent_leaves_nothing_running(tiny_repo, tmp_path, no_leftovers, without_onnxruntime):
    """A kernel restart kills the Python process without running any clean-up: the server must still go, and the
    stand-in's Python-backend stub with it."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        from helpers.server import TritonServer
        server = TritonServer({str(tiny_repo)!r}, "local").start()
        print("PID", server._proc.pid, flush=True)
        import time; time.sleep(600)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    line = ""
    while not line.startswith("PID"):
        line = parent.stdout.readline()
        assert line or parent.poll() is None, "parent exited before the server was ready"
    server_pid = int(line.split()[1])
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(p.pid == server_pid for p in triton_processes()):
        time.sleep(0.5)
    assert not any(p.pid == server_pid for p in triton_processes())


def test_shared_server_is_used_read_only(tiny_repo, no_leftovers):
    with TritonServer(tiny_repo, "local") as server:
        shared = SharedServer(server.url, ["tiny"], grpc_port=server.grpc_port, metrics_port=server.metrics_port).start()
        assert shared.version == server.version and [s.how for s in shared.served] == ["shared"]
        out = tc.infer(tc.connect(shared.grpc_url, "grpc"), "tiny", np.ones((1, 8), np.float32))["Y"]
        assert out.shape == (1, 4)
        shared.stop()
        assert server.running and shared.running  # stop() leaves the shared server to everyone else
        with pytest.raises(ServerError, match=r"models \['resnet18_pytorch'\] are not ready on the shared server"):
            SharedServer(server.url, ["resnet18_pytorch"]).start()
    with pytest.raises(ServerError, match="no Triton server answers at"):
        SharedServer(server.url, ["tiny"]).start()
    with pytest.raises(ValueError, match="server_url must look like"):
        SharedServer("http://host:port", ["tiny"])


def test_missing_repository_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="model repository must be a folder"):
        TritonServer(tmp_path / "nowhere", "local")


def test_engine_without_tensorrt_backend_is_listed_not_served(tiny_repo, no_leftovers):
    config = repository.build_config("engine", "tensorrt_plan", [repository.TensorSpec("X", "FP32", (-1, 8))],
                                     [repository.TensorSpec("Y", "FP32", (-1, 4))], max_batch_size=8,
                                     instance_kind="KIND_GPU")
    (tiny_repo / "engine.plan").write_bytes(b"stands for a serialized engine")
    repository.add_model(tiny_repo, config, tiny_repo / "engine.plan", check=False)
    with TritonServer(tiny_repo, "local") as server:
        how = {s.name: s.how for s in server.served}
        assert how == {"engine": "not served", "tiny": "native"}
        assert tc.connect(server.url).is_model_ready("tiny")


def test_stop_unloads_the_models_before_it_signals_the_server(tiny_repo, tmp_path, no_leftovers):
    """After its stop signal Triton checks only once a second whether its models are gone: stop() unloads them
    first, so the server's shutdown finds none live at its first check."""
    log = tmp_path / "triton.log"
    with TritonServer(tiny_repo, "local", log_file=log) as server:
        assert server.command()[-2:] == ["--model-control-mode=explicit", "--load-model=*"]
    text = log.read_text()
    unloaded, signalled = text.index("successfully unloaded 'tiny'"), text.index("Waiting for in-flight requests")
    assert unloaded < signalled, text[-3000:]
    first_check = re.search(r"Found (\d+) live models", text[signalled:])
    assert first_check and first_check.group(1) == "0", text[signalled:]


KERNEL = """
import faulthandler, os, signal, sys, time
import psutil
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for the stacks of a kernel that hangs
# As ipykernel does while a cell runs (kernelbase's pre_handler_hook): Ctrl-C raises KeyboardInterrupt. The process
# starts with SIGINT ignored, as ipykernel's app sets it, whatever the test runner inherited.
assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
signal.signal(signal.SIGINT, signal.default_int_handler)
from helpers import launchers
from helpers.server import TritonServer
if {slow_prepare}:  # widens the moment between preparing the repository and launching the server
    prepare = launchers.LocalLauncher.prepare
    launchers.LocalLauncher.prepare = lambda self, server: (time.sleep({slow_prepare}), prepare(self, server))[1]
print("STARTING", flush=True)
try:
    server = TritonServer({repo!r}, "local", startup_timeout=120).start()
    print("READY", flush=True)
    time.sleep(600)
except KeyboardInterrupt:
    # a notebook kernel lives on after an interrupted cell: what it started must be gone now, not at its exit
    left = [p.name() for p in psutil.Process().children(recursive=True)]
    print("INTERRUPTED", "LEFT", *left, flush=True)
    sys.exit(1)
"""


def _kernel(tmp_path, repo, slow_prepare: float = 0.0) -> subprocess.Popen:
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL.format(repo=str(repo), slow_prepare=slow_prepare))
    with open(tmp_path / "kernel.err", "w") as err:  # a file, not a pipe nobody reads while the kernel runs
        # SIGINT ignored at the start, as in ipykernel's app. Left to inheritance, the kernel got whatever the runner
        # had: a test run started in the background of a non-interactive shell (`cmd &`, as CI may) ignores SIGINT,
        # Python then installs no KeyboardInterrupt handler, and a Ctrl-C that missed start()'s own handler was lost
        # (issue #12: the kernel slept on after READY).
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=err, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    proc.err_path = tmp_path / "kernel.err"
    assert proc.stdout.readline().startswith("STARTING")
    return proc


def _hung(kernel: subprocess.Popen, what: str) -> AssertionError:
    """Kill a kernel that did not exit, and say where it was: its threads' stacks and the processes under it."""
    tree = [f"{p.pid} {p.name()} {p.status()}" for p in psutil.Process(kernel.pid).children(recursive=True)]
    kernel.send_signal(signal.SIGUSR1)
    time.sleep(1)
    kernel.kill()
    kernel.wait()
    return AssertionError(f"{what}; processes under it: {tree}; its stacks:\n{kernel.err_path.read_text()[-4000:]}")


def _new_processes_gone(before: set[int], seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not {p.pid for p in triton_processes()} - before:
            return True
        time.sleep(0.3)
    return False


@pytest.mark.reliability
@pytest.mark.parametrize("delay", [0.3, 1.5, 3.0])
def test_kernel_killed_during_start_and_model_load_leaves_nothing(tiny_repo, tmp_path, delay, without_onnxruntime):
    """The Python-backend stub ignores SIGTERM and outlived a kernel killed mid-load; the reaper now stops it."""
    before = {p.pid for p in triton_processes()}
    kernel = _kernel(tmp_path, tiny_repo)
    time.sleep(delay)  # 0.3 s: server starting; 1.5-3 s: the stand-in's stub loading the model
    os.kill(kernel.pid, signal.SIGKILL)
    kernel.wait()
    assert _new_processes_gone(before), f"a Triton process outlived a kernel killed {delay} s into the start"


@pytest.mark.reliability
# "launch": both Ctrl-C land while the repository is prepared and the server launched (held back until the launch is
# done; before the fix the interrupt was then raised with the server left running, until the kernel exited);
# "load": the first lands while the server loads the model, the second while the first's clean-up runs.
@pytest.mark.parametrize("moment, slow_prepare, first, gap", [("launch", 1.5, 0.5, 0.3), ("load", 0.0, 1.0, 0.2)])
def test_two_ctrl_c_during_start_leave_nothing(tiny_repo, tmp_path, moment, slow_prepare, first, gap,
                                              without_onnxruntime):
    before = {p.pid for p in triton_processes()}
    kernel = _kernel(tmp_path, tiny_repo, slow_prepare)
    time.sleep(first)
    kernel.send_signal(signal.SIGINT)
    time.sleep(gap)
    kernel.send_signal(signal.SIGINT)
    try:  # stop() is bounded: 25 s for the reaper (15 s grace, then SIGKILL), then 10 s for what it leaves behind
        code = kernel.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise _hung(kernel, f"the kernel hung after two Ctrl-C during {moment}") from None
    out = kernel.stdout.read()
    stderr = kernel.err_path.read_text()[-4000:]
    assert code == 1 and "INTERRUPTED" in out, f"exit code {code}, stdout {out!r}, stderr:\n{stderr}"
    assert out.split("LEFT")[1].split() == [], f"still running when the interrupted cell returned: {out}"
    assert _new_processes_gone(before, 20), "a Triton process outlived two Ctrl-C during start"


def reply_to(kc, msg_id: str, timeout: float) -> dict:
    """The shell reply whose parent is request `msg_id`: `wait_for_ready` sends kernel_info requests until one is
    answered and can leave a later reply queued, so the first shell message is not necessarily the one asked for."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        msg = kc.get_shell_msg(timeout=max(0.0, deadline - time.monotonic()))  # queue.Empty past the deadline
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg
        seen.append(msg["msg_type"])
        assert len(seen) < 100, f"no reply to {msg_id} among {len(seen)} shell messages: {seen[:10]}"


def _ipc_kernel():
    """A real ipykernel on IPC sockets, not TCP: TCP ports are picked, released, then bound by the kernel, a race
    between the kernels of the 20x step's parallel runs (seen once: "Address already in use")."""
    import tempfile

    from jupyter_client.manager import KernelManager

    sockets = Path(tempfile.mkdtemp(prefix="kernel-"))  # short: a socket path has at most 107 bytes
    km = KernelManager(kernel_name="python3", transport="ipc", ip=str(sockets / "k"))
    km.start_kernel(cwd=str(series.ROOT))
    kc = km.client()
    kc.start_channels()
    return km, kc, sockets


def test_the_reply_read_is_the_one_to_the_request_sent():
    """Issue #20: a kernel_info reply queued before the execute reply was read as the execute reply."""
    km, kc, sockets = _ipc_kernel()
    try:
        kc.wait_for_ready(timeout=60)
        kc.kernel_info()  # its reply is queued ahead of the execute reply, as wait_for_ready can leave one
        msg_id = kc.execute("1 / 0")
        reply = reply_to(kc, msg_id, timeout=30)
        assert reply["msg_type"] == "execute_reply" and reply["content"]["ename"] == "ZeroDivisionError", reply
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(sockets, ignore_errors=True)


@pytest.mark.reliability
def test_two_interrupts_of_a_jupyter_kernel_during_start_leave_nothing(tiny_repo, without_onnxruntime):
    """What a learner does: the Interrupt button twice while a real ipykernel's cell starts the server."""
    before = {p.pid for p in triton_processes()}
    km, kc, sockets = _ipc_kernel()
    try:
        kc.wait_for_ready(timeout=60)
        msg_id = kc.execute(f"from helpers.server import TritonServer\nTritonServer({str(tiny_repo)!r}, 'local').start()\n"
                            "import time; time.sleep(600)")
        deadline = time.monotonic() + 30
        while not triton_processes() and time.monotonic() < deadline:  # the cell has launched the server
            time.sleep(0.05)
        assert triton_processes(), "the cell did not start tritonserver within 30 s"
        km.interrupt_kernel()
        time.sleep(0.2)
        km.interrupt_kernel()
        reply = reply_to(kc, msg_id, timeout=60)["content"]  # not the first shell message: see reply_to
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert _new_processes_gone(before, 5), "a Triton process outlived two interrupts of the kernel's start"
        kc.execute("1 + 1", reply=True, timeout=10)  # the kernel lives on, as after any interrupted cell
        assert km.is_alive()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(sockets, ignore_errors=True)


def test_model_table_is_tritons_own_lines_about_its_models():
    from helpers.server import model_table

    log = """I1202 06:00:12.752983 1 pinned_memory_manager.cc:273] "Pinned memory pool is created"
I1202 06:00:12.755293 1 model_lifecycle.cc:472] "loading: good:1"
I1202 06:00:12.755301 1 model_lifecycle.cc:472] "loading: bad:1"
E1202 06:00:13.100000 1 model_lifecycle.cc:642] "failed to load 'bad' version 1: Invalid argument: unexpected inference input 'X'"
I1202 06:00:18.838292 1 model_lifecycle.cc:839] "successfully loaded 'good'"
I1202 06:00:18.863576 1 server.cc:631] 
+---------+------+--------+
| Backend | Path | Config |
+---------+------+--------+
| python  | /x   | {}     |
+---------+------+--------+

I1202 06:00:18.863657 1 server.cc:674] 
+-------+---------+-----------------------------------------------------------------+
| Model | Version | Status                                                          |
+-------+---------+-----------------------------------------------------------------+
| bad   | 1       | UNAVAILABLE: Invalid argument: unexpected inference input 'X'   |
| good  | 1       | READY                                                           |
+-------+---------+-----------------------------------------------------------------+

I1202 06:00:18.907130 1 tritonserver.cc:2598] 
"""
    lines = model_table(log).splitlines()
    assert lines[0].endswith('"loading: good:1"') and "failed to load 'bad'" in lines[2]
    assert lines[4].endswith("server.cc:674] ") and lines[6].startswith("| Model")
    assert lines[-1].startswith("+-------+") and lines[-3].startswith("| bad") and "READY" in lines[-2]
    assert not any("Backend" in ln or "pinned" in ln for ln in lines)
    with pytest.raises(ValueError, match=re.escape("no 'Model | Version | Status' table")):
        model_table(log.split("I1202 06:00:18.863657")[0])
