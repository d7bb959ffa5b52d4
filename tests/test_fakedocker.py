"""The test docker refuses what real Docker refuses: unknown options, a name in use, a host path the container
cannot see; its containers outlive a killed `docker run` and obey stop, kill, rm -f and --rm (round two, item 10)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import convert, ngc, perf
from helpers.runtime import RuntimeChoice
from helpers.server import TritonServer

FAKE = Path(__file__).resolve().parent / "fakedocker"


@pytest.fixture
def docker(tmp_path, monkeypatch):
    """Call the test docker; images of the tag count as pulled."""
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_PYTHON", sys.executable)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "state"))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "images").write_text("\n".join(ngc.image(k) for k in ngc.IMAGES) + "\n")
    return lambda *args, **kw: subprocess.run(["docker", *args], capture_output=True, text=True, **kw)


def _known_options() -> dict[str, bool]:
    """The recorded `docker run` options (the test docker's own table: one reader for both)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_docker", FAKE / "fake_docker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._options()


def test_every_option_the_series_passes_is_a_documented_docker_run_option(tmp_path):
    """Each `docker run` the helpers build, checked against the options of a recent Docker (hidden aliases such as
    --net are not accepted: the series writes the documented --network)."""
    (tmp_path / "models").mkdir()
    commands = [TritonServer(tmp_path / "models", RuntimeChoice("docker", "t"), models=["m"]).command(),
                convert.in_tensorrt_container(["trtexec"], tmp_path), convert.in_pytorch_container(["python"], tmp_path),
                perf.docker_command(["-m", "m"], results_dir=tmp_path)]
    known = _known_options()
    for cmd in commands:
        image = ngc.image_of(cmd)
        for arg in cmd[2:cmd.index(image)]:
            if arg.startswith("-"):
                assert arg.partition("=")[0] in known, f"docker run has no option {arg}"


def test_unknown_option_fails_as_docker_does(docker):
    out = docker("run", "--rm", "--net-alias", "x", ngc.image("sdk"), "perf_analyzer")
    assert out.returncode == 125 and "unknown flag: --net-alias" in out.stderr


def test_host_path_outside_the_mounts_fails(docker, tmp_path):
    out = docker("run", "--rm", "-v", f"{tmp_path}:/results", ngc.image("sdk"), "perf_analyzer",
                 "-f", str(tmp_path / "x.csv"))
    assert out.returncode != 0 and "cannot see" in out.stderr and str(tmp_path / "x.csv") in out.stderr


def _running(docker) -> list[str]:
    return docker("ps", "--format", "{{.Names}}").stdout.split()


def _server(tmp_path, name: str) -> list[str]:
    from conftest import make_onnx
    from helpers import repository

    repo = tmp_path / "models"
    if not repo.exists():
        repository.add_model(repo, repository.config_from_onnx("tiny", make_onnx(tmp_path / "t.onnx")),
                             tmp_path / "t.onnx")
    from helpers.launchers import free_port

    port = free_port()
    return ["run", "--rm", "--init", "--name", name, "--network", "host", "-v", f"{repo}:/models",
            ngc.image("tritonserver"), "tritonserver", "--model-repository=/models", f"--http-port={port}",
            f"--grpc-port={free_port()}", f"--metrics-port={free_port()}", "--http-address=127.0.0.1"]


def _wait(predicate, seconds=60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_name_in_use_fails_and_a_container_outlives_its_killed_cli(docker, tmp_path):
    cli = subprocess.Popen(["docker", *_server(tmp_path, "t1")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait(lambda: "t1" in _running(docker))
        second = docker(*_server(tmp_path, "t1"))
        assert second.returncode == 125 and 'The container name "/t1" is already in use' in second.stderr
        cli.kill()  # a killed `docker run` leaves its container running, as Docker does
        cli.wait()
        time.sleep(0.5)
        assert "t1" in _running(docker)
        refused = docker("rm", "t1")
        assert refused.returncode == 1 and "container is running" in refused.stderr
    finally:
        docker("rm", "-f", "t1")
    assert "t1" not in _running(docker) and docker("rm", "t1").returncode == 1  # --rm or rm -f: the name is free


@pytest.mark.parametrize("verb", ["stop", "kill"])
def test_stop_and_kill_end_the_container_and_rm_frees_the_name(docker, tmp_path, verb):
    without_rm = [a for a in _server(tmp_path, f"t-{verb}") if a != "--rm"]
    cli = subprocess.Popen(["docker", *without_rm],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # without --rm
    try:
        assert _wait(lambda: f"t-{verb}" in _running(docker))
        assert docker(verb, f"t-{verb}").returncode == 0
        assert cli.wait(timeout=30) != 0 or verb == "stop"
        assert f"t-{verb}" not in _running(docker)
        again = docker(*_server(tmp_path, f"t-{verb}"))  # stopped, not removed: the name is still taken
        assert again.returncode == 125
    finally:
        assert docker("rm", f"t-{verb}").returncode == 0  # a stopped container is removed without -f
        cli.wait(timeout=30)


def test_sigterm_to_the_cli_reaches_the_container_and_rm_clears_its_name(docker, tmp_path):
    """And nothing of the container outlives its main process (the Python-backend stub ignores SIGTERM)."""
    from conftest import triton_processes

    cli = subprocess.Popen(["docker", *_server(tmp_path, "t2")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert _wait(lambda: "t2" in _running(docker))
    cli.send_signal(signal.SIGTERM)  # --sig-proxy: the container gets it and stops
    cli.wait(timeout=40)
    assert _wait(lambda: "t2" not in _running(docker), 10)
    assert docker("rm", "t2").returncode == 1  # --rm removed it when it exited
    assert _wait(lambda: not triton_processes(), 10), "a process of the container outlived it"
    assert json.loads(json.dumps(_running(docker))) == []


def test_gpus_without_the_container_toolkit_fail_as_docker_does(docker, monkeypatch):
    """Issue 22, item 8: `--gpus` worked with no Container Toolkit."""
    monkeypatch.setenv("FAKE_DOCKER_NO_TOOLKIT", "1")
    out = docker("run", "--rm", "--gpus", "device=0", ngc.image("sdk"), "perf_analyzer", "--version")
    assert out.returncode == 125 and 'could not select device driver "" with capabilities: [[gpu]]' in out.stderr
    monkeypatch.delenv("FAKE_DOCKER_NO_TOOLKIT")
    out = docker("run", "--rm", "--gpus", "device=0", ngc.image("sdk"), "perf_analyzer", "--version")
    assert "could not select device driver" not in out.stderr


@pytest.mark.parametrize("drop, words", [("--network", "127.0.0.1 in the container is the container's own"),
                                         ("--ipc=host", "this container has its own /dev/shm (no --ipc=host)")])
def test_the_sdk_path_honours_network_and_ipc(docker, tmp_path, drop, words):
    """Issue 22, item 8: the SDK path ignored --network and --ipc, so a command without them passed."""
    from helpers.launchers import free_port

    cmd = perf.docker_command(perf.perf_args("m", f"127.0.0.1:{free_port()}", concurrency="1", shared_memory="system",
                                             csv_file="/results/m.csv"), results_dir=tmp_path)
    without = [a for i, a in enumerate(cmd) if a != drop and not (drop == "--network" and cmd[i - 1] == "--network")]
    out = docker(*without[1:])
    assert out.returncode == 1 and words in out.stderr, out.stderr
    full = docker(*cmd[1:], timeout=60)  # no server here: perf_analyzer itself runs, and fails to connect
    assert "fake docker" not in full.stderr


def test_a_server_bound_to_loopback_in_a_bridge_network_cannot_be_reached(docker, tmp_path):
    args = [a for a in _server(tmp_path, "t-bridge") if a not in ("--network", "host")]
    out = docker(*args, timeout=60)
    assert out.returncode == 1 and "binds 127.0.0.1 inside a bridge-network container" in out.stderr


def test_volume_modes_are_checked_as_docker_does(docker, tmp_path):
    out = docker("run", "--rm", "-v", f"{tmp_path}:/results:rx", ngc.image("sdk"), "perf_analyzer")
    assert out.returncode == 125 and "invalid mode: rx" in out.stderr


def test_pid_1_without_init_drops_a_signal_it_has_no_handler_for():
    """Review 2026-12-03, MED 12 (b): the test docker passed SIGTERM to any container process. Without --init the
    process is PID 1, and the kernel drops a signal PID 1 has no handler for (pid_namespaces(7)); the test docker
    reads the handlers from /proc/PID/status (SigCgt): Model Analyzer (a Python) handles SIGINT, not SIGTERM."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_docker", FAKE / "fake_docker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # as the test docker starts a container's process: signals at their default (an xdist worker ignores SIGINT)
    python = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
                              stdout=subprocess.PIPE, text=True, preexec_fn=module._default_signals)
    try:
        python.stdout.readline()
        assert module._caught(python.pid, signal.SIGINT) and not module._caught(python.pid, signal.SIGTERM)
    finally:
        python.kill()
        python.wait()


def test_ps_format_gives_each_containers_state_as_docker_does(docker):
    """Review 2026-12-03, MED 10: the series tells a running container from a stopped one (`{{.State}}`, Docker's
    raw state: running, exited, ...); the test docker printed names only."""
    sleeper = subprocess.Popen(["sleep", "30"])
    containers = Path(os.environ["FAKE_DOCKER_STATE"]) / "containers"
    containers.mkdir()
    (containers / "up").write_text(str(sleeper.pid))
    (containers / "down").write_text("0")
    try:
        out = docker("ps", "-a", "--format", "{{.Names}}\t{{.State}}")
        assert out.returncode == 0 and out.stdout.splitlines() == ["down\texited", "up\trunning"], out
        assert docker("ps", "--format", "{{.Names}}").stdout.split() == ["up"]
        assert docker("ps", "-a", "--format", "{{.Image}}").returncode != 0  # not modelled: said, not guessed
    finally:
        sleeper.kill()
        sleeper.wait()
