"""The docker path executed: the test `docker` (tests/fakedocker) runs the NGC images' commands on this machine."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from conftest import triton_processes
from helpers import client as tc
from helpers import convert, ngc, perf, runtime
from helpers.runtime import RuntimeChoice, choose_runtime
from helpers.server import TritonServer


@pytest.fixture
def new_processes():
    """Triton processes started since the test began (others on this machine are not the test's)."""
    before = {p.pid for p in triton_processes()}
    return lambda: [p for p in triton_processes() if p.pid not in before]


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def containers() -> list[str]:
    return subprocess.run(["docker", "ps"], capture_output=True, text=True).stdout.split()


def test_image_is_pulled_with_progress_before_the_server_clock_starts(fake_docker, tiny_repo, capsys):
    """Defect 2: the readiness clock started while `docker run` was still pulling a 15 GB image."""
    with TritonServer(tiny_repo, RuntimeChoice("docker", "test"), startup_timeout=60) as server:
        out = tc.infer(tc.connect(server.url), "tiny", np.ones((2, 8), np.float32))["Y"]
        assert out.shape == (2, 4)
        assert containers() == [server.container_name]
    verbs = [c[0] if c[0] != "image" else "inspect" for c in calls(fake_docker)]
    assert verbs.index("pull") < verbs.index("run"), verbs  # the image was there before `docker run`
    assert "Pull complete" in capsys.readouterr().out
    assert containers() == []


def test_container_is_removed_on_exception(fake_docker, tiny_repo, new_processes):
    with pytest.raises(RuntimeError, match="boom"):
        with TritonServer(tiny_repo, RuntimeChoice("docker", "test")) as server:
            name = server.container_name
            raise RuntimeError("boom")
    assert ["rm", "-f", name] in calls(fake_docker)
    assert containers() == [] and not new_processes()


def test_container_is_removed_when_the_kernel_is_killed(fake_docker, tiny_repo, tmp_path, new_processes):
    script = tmp_path / "kernel.py"
    script.write_text(textwrap.dedent(f"""
        from helpers.runtime import RuntimeChoice
        from helpers.server import TritonServer
        server = TritonServer({str(tiny_repo)!r}, RuntimeChoice("docker", "test")).start()
        print("READY", flush=True)
        import time; time.sleep(600)
    """))
    kernel = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        while (line := kernel.stdout.readline()) and not line.startswith("READY"):
            pass
        assert containers(), "the container did not start"
    finally:  # killed in any case: a kernel left behind would hold ports 8000-8002 for every later test
        os.kill(kernel.pid, signal.SIGKILL)
        kernel.wait()
    deadline = time.monotonic() + 30  # the reaper stops the container, then runs `docker rm -f` (a --rm container
    while time.monotonic() < deadline and (containers() or new_processes()  # is gone before that)
                                           or not any(c[:2] == ["rm", "-f"] for c in calls(fake_docker))):
        time.sleep(0.5)
    assert containers() == [] and not new_processes()
    assert any(c[:2] == ["rm", "-f"] for c in calls(fake_docker))


def test_a_container_left_by_an_interrupted_run_is_named_with_its_remedy(fake_docker, tiny_repo, capsys):
    """Round two, item 4: a leftover container stopped every later notebook with 'port busy'."""
    from helpers.launchers import free_port

    port = free_port()
    leftover = TritonServer(tiny_repo, RuntimeChoice("docker", "test"), http_port=port)
    state = Path(os.environ["FAKE_DOCKER_STATE"]) / "containers"
    state.mkdir(parents=True, exist_ok=True)
    (state / leftover.container_name).write_text("0")  # stopped, never removed: its name is still taken
    with pytest.raises(RuntimeError, match=rf"`docker rm -f triton-tutorials-{port}`"):
        TritonServer(tiny_repo, RuntimeChoice("docker", "test"), http_port=port).start()
    with TritonServer(tiny_repo, RuntimeChoice("docker", "test")) as other:  # another port: it starts, and says so
        assert other.running
    assert f"container triton-tutorials-{port} from an earlier run still exists" in capsys.readouterr().out


def test_perf_analyzer_csv_comes_back_from_the_sdk_container(fake_docker, tiny_repo, tmp_path):
    with TritonServer(tiny_repo, RuntimeChoice("docker", "test")) as server:  # 8001 only when free: ask the server
        table = perf.run("tiny", server.grpc_url, tmp_path / "perf" / "tiny.csv", concurrency="1:2:1",
                         docker_tag=ngc.NGC_TAG, measurement_request_count=10, max_trials=5,
                         stability_percentage=500, progress=False)  # the CSV's way back, not stability (CI: 2 busy cores)
    sdk_runs = [c for c in calls(fake_docker) if c[0] == "run" and ngc.image("sdk") in c]
    assert len(sdk_runs) == 2 and all(f"{(tmp_path / 'perf').resolve()}:/results" in c for c in sdk_runs)
    assert list(table["concurrency"]) == [1, 2] and (table["throughput"] > 0).all()


def test_tensorrt_container_fails_like_an_image_that_cannot_run_here(fake_docker, tmp_path):
    args = convert.in_tensorrt_container(convert.trtexec_args("m.onnx", "m.plan", "x", (3,)), tmp_path)
    with pytest.raises(RuntimeError, match="cannot run on this machine") as info:
        convert.run_checked(args, tmp_path / "run" / "logs" / "trtexec.log")  # defect 1: logs/ did not exist
    assert "exit code 125" in str(info.value)
    assert (tmp_path / "run" / "logs" / "trtexec.log").exists()


def test_auto_needs_the_container_toolkit(fake_docker, monkeypatch):
    """Defect 3: auto picked docker without the NVIDIA Container Toolkit; every --gpus container then failed."""
    monkeypatch.setattr(runtime, "nvidia_gpu", lambda: (True, "a test GPU"))
    monkeypatch.setattr(runtime, "gpu_properties", lambda: [{"index": "0", "name": "test", "compute_cap": "9.0",
                                                              "driver": "580.1"}])
    assert choose_runtime("auto").name == "docker"
    monkeypatch.setenv("FAKE_DOCKER_NO_TOOLKIT", "1")
    choice = choose_runtime("auto")
    assert choice.name == "local" and "NVIDIA Container Toolkit is missing" in choice.reason
    with pytest.raises(RuntimeError, match="NVIDIA Container Toolkit is missing"):
        choose_runtime("docker")


def test_blackwell_gpu_and_old_driver_are_refused_for_the_tag(fake_docker, monkeypatch):
    """Defect 8: NGC 24.05 does not support compute capability 10.x/12.x; nothing checked the GPU."""
    monkeypatch.setattr(runtime, "nvidia_gpu", lambda: (True, "a test GPU"))
    monkeypatch.setattr(runtime, "gpu_properties", lambda: [{"index": "0", "name": "RTX 5090", "compute_cap": "12.0",
                                                              "driver": "575.1"}])
    choice = choose_runtime("auto", "24.05")
    assert choice.name == "local" and "compute capability 12.0" in choice.reason and "25.01" in choice.reason
    assert choose_runtime("auto", "25.01").name == "docker"
    problems = ngc.gpu_problems("24.05", [{"index": "0", "name": "RTX 3090", "compute_cap": "8.6", "driver": "535.1"}])
    assert problems and "older than the 545" in problems[0] and "RTX 3090 is not one" in problems[0]


@pytest.mark.parametrize("name, driver, ok", [
    ("NVIDIA A100-SXM4-80GB", "535.161.08", True),   # R535 forward compatibility on a data-center GPU
    ("NVIDIA H100 80GB HBM3", "535.86.10", True),
    ("Tesla T4", "470.57.02", True),                 # R470, the oldest branch 24.05 lists
    ("Tesla T4", "470.42.01", False),                # R470 but older than 470.57
    ("NVIDIA H100 80GB HBM3", "530.30.02", False),   # a branch the release notes do not list
    ("NVIDIA GeForce RTX 4090", "535.161.08", False),  # no forward compatibility on GeForce
    ("NVIDIA GeForce RTX 4090", "550.54.14", True),  # the release's own minimum
])
def test_data_center_gpus_on_long_term_drivers_are_accepted(name, driver, ok):
    """Round two, item 2: NVIDIA's 24.05 notes allow 470.57+, 525.85+ and 535.86+ on data-center GPUs."""
    problems = ngc.gpu_problems("24.05", [{"index": "0", "name": name, "compute_cap": "8.0", "driver": driver}])
    assert (problems == []) == ok, problems


def test_only_the_gpu_the_series_uses_is_checked(fake_docker, monkeypatch):
    """Round two, item 8: a 4090 at index 0 and a 5090 at index 1 refused docker for both."""
    host = [{"index": "0", "name": "NVIDIA GeForce RTX 4090", "compute_cap": "8.9", "driver": "575.51"},
            {"index": "1", "name": "NVIDIA GeForce RTX 5090", "compute_cap": "12.0", "driver": "575.51"}]
    monkeypatch.setattr(runtime, "nvidia_gpu", lambda: (True, "two test GPUs"))
    monkeypatch.setattr(runtime, "gpu_properties", lambda: host)
    assert ngc.gpu_problems("24.05", host, 0) == []
    assert "compute capability 12.0" in ngc.gpu_problems("24.05", host, 1)[0]
    assert len(ngc.gpu_problems("24.05", host, "all")) == 1
    assert choose_runtime("auto", "24.05", gpu=0).name == "docker"
    assert choose_runtime("auto", "24.05", gpu=1).name == "local"


def test_docker_info_failure_says_why(tmp_path, monkeypatch):
    """`docker info` failing was reported with an empty reason: stdout blank, stderr dropped."""
    broken = tmp_path / "bin"
    broken.mkdir()
    (broken / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock' >&2\nexit 1\n")
    (broken / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{broken}{os.pathsep}{os.environ['PATH']}")
    ok, why = runtime.docker_engine()
    assert not ok and "Cannot connect to the Docker daemon" in why


def test_a_failing_torch_tensorrt_step_is_recorded_not_fatal(fake_docker, tmp_path):
    """Round two, item 5: notebook 12 stopped when the optional torch-tensorrt container failed; 13 needs only the
    engine. The PyTorch image fails here as it would on a machine that cannot run it."""
    ngc.ensure_image(ngc.image("pytorch"))
    cmd = convert.in_pytorch_container(["python", "compile_ts.py"], tmp_path)
    error = convert.run_optional(cmd, tmp_path / "logs" / "torch_trt.log")
    assert error.startswith("command failed with exit code 125") and "cannot run on this machine" in error
    assert convert.run_optional(["true"], tmp_path / "logs" / "ok.log") == ""
    notebook = (Path(__file__).resolve().parents[1] / "notebooks" / "12_optimize_tensorrt.ipynb").read_text()
    assert "convert.run_optional(torch_trt," in notebook and "convert.run_checked(torch_trt," not in notebook


def _docker_runs(log: Path) -> list[list[str]]:
    return [c for c in calls(log) if c[0] == "run"]


def test_selinux_labels_every_mount_and_docker_info_is_read_once(fake_docker, tiny_repo, tmp_path, monkeypatch):
    """Issue 22, item 6: under SELinux the containers could not read their mounts (no `:z`); `docker info` was asked
    once per question."""
    monkeypatch.setenv("FAKE_DOCKER_SELINUX", "1")
    monkeypatch.setattr(runtime, "nvidia_gpu", lambda: (True, "a test GPU"))
    monkeypatch.setattr(runtime, "gpu_properties", lambda: [{"index": "0", "name": "NVIDIA H200", "compute_cap": "9.0",
                                                              "driver": "580.1"}])
    assert choose_runtime("auto").name == "docker"
    trt = convert.in_tensorrt_container(["trtexec"], tmp_path)
    assert trt[trt.index("-v") + 1] == f"{tmp_path.resolve()}:/workspace/models:z"
    server = TritonServer(tiny_repo, RuntimeChoice("docker", "test")).command()
    assert server[server.index("-v") + 1] == f"{Path(tiny_repo).resolve()}:/models:ro,z"
    assert [c for c in calls(fake_docker) if c[0] == "info"] == [["info", "--format", "{{json .}}"]]
    monkeypatch.delenv("FAKE_DOCKER_SELINUX")  # another environment: read again, and no label without SELinux
    trt = convert.in_tensorrt_container(["trtexec"], tmp_path)
    assert trt[trt.index("-v") + 1] == f"{tmp_path.resolve()}:/workspace/models"


def test_rootless_docker_is_not_picked_by_auto(fake_docker, monkeypatch):
    """Issue 22, item 6: under rootless Docker `--network host` is not the host's network and `--user` maps to a
    subuid; auto picked docker anyway."""
    monkeypatch.setenv("FAKE_DOCKER_ROOTLESS", "1")
    monkeypatch.setattr(runtime, "nvidia_gpu", lambda: (True, "a test GPU"))
    monkeypatch.setattr(runtime, "gpu_properties", lambda: [{"index": "0", "name": "NVIDIA H200", "compute_cap": "9.0",
                                                              "driver": "580.1"}])
    choice = choose_runtime("auto")
    assert choice.name == "local" and "runs rootless" in choice.reason and "--network host" in choice.reason
    with pytest.raises(RuntimeError, match="runtime='docker' with NGC 24.05: the Docker engine runs rootless"):
        choose_runtime("docker")
    monkeypatch.delenv("FAKE_DOCKER_ROOTLESS")
    assert choose_runtime("auto").name == "docker"


def test_every_container_the_series_starts_has_a_name_and_init(fake_docker, tiny_repo, tmp_path):
    """Issue 22, item 2: one-shot containers ran unnamed (nothing could remove them) with trtexec as PID 1."""
    ngc.ensure_image(ngc.image("tensorrt"))
    with pytest.raises(RuntimeError, match="cannot run on this machine"):
        convert.run_checked(convert.in_tensorrt_container(["trtexec", "--onnx=m.onnx"], tmp_path), tmp_path / "t.log")
    assert convert.run_optional(convert.in_pytorch_container(["python", "x.py"], tmp_path), tmp_path / "p.log")
    with TritonServer(tiny_repo, RuntimeChoice("docker", "test")):
        pass
    runs = _docker_runs(fake_docker)
    # the two one-shot containers, then the server's (twice or more when another process took its port first)
    assert len(runs) >= 3 and all("tritonserver" in run for run in runs[2:]), runs
    for run in runs:
        options = run[1:run.index(ngc.image_of(["docker", *run]))]
        assert "--init" in options and "--name" in options, run
        assert options[options.index("--name") + 1].startswith(ngc.CONTAINER_PREFIX)
    one_shot = [r[r.index("--name") + 1] for r in runs[:2]]
    assert all(["rm", "-f", name] in calls(fake_docker) for name in one_shot)  # removed by name, whatever happened


def _one_shot_kernel(tmp_path: Path, repo: Path) -> subprocess.Popen:
    """A kernel that runs a long one-shot container (the server image stands in for a long trtexec) to its end."""
    from helpers.launchers import free_port

    script = tmp_path / "kernel.py"
    script.write_text(textwrap.dedent(f"""
        from helpers import convert, ngc
        cmd = ngc.docker_run(ngc.image("tritonserver"), ["tritonserver", "--model-repository=/models",
                             "--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1",
                             "--http-port={free_port()}", "--grpc-port={free_port()}", "--metrics-port={free_port()}"],
                             volumes={{{str(repo)!r}: "/models"}}, network="host", gpus=None, init=True)
        convert.run_checked(cmd, {str(tmp_path / "one-shot.log")!r})
    """))
    ngc.ensure_image(ngc.image("tritonserver"))
    # SIGINT as a Jupyter kernel has it (KeyboardInterrupt): a test runner started in the background of a
    # non-interactive shell ignores SIGINT, and its children would inherit that and never see the Ctrl-C
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.parametrize("how", ["ctrl-c", "killed kernel"])
def test_an_interrupted_or_orphaned_one_shot_container_is_removed(fake_docker, tiny_repo, tmp_path, new_processes,
                                                                  how):
    """Issue 22, item 2: a Ctrl-C killed the `docker run` CLI (subprocess.run sends SIGKILL), and a dead kernel left
    it running: either way the container ran on. Now the CLI gets SIGINT first, and `docker rm -f NAME` follows."""
    kernel = _one_shot_kernel(tmp_path, tiny_repo)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not new_processes():
            time.sleep(0.3)
        assert new_processes(), "the one-shot container did not start"
        time.sleep(1)
        kernel.send_signal(signal.SIGINT if how == "ctrl-c" else signal.SIGKILL)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and (new_processes() or containers()):
            time.sleep(0.3)
        assert not new_processes() and containers() == [], "the one-shot container outlived its kernel"
    finally:
        kernel.kill()
        kernel.wait()
        for name in containers():
            subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        for proc in new_processes():
            proc.kill()
    run = next(c for c in _docker_runs(fake_docker) if ngc.image("tritonserver") in c)
    name = run[run.index("--name") + 1]
    deadline = time.monotonic() + 15  # the reaper (killed kernel) runs `docker rm -f` after the CLI has gone
    while time.monotonic() < deadline and ["rm", "-f", name] not in calls(fake_docker):
        time.sleep(0.3)
    assert ["rm", "-f", name] in calls(fake_docker)
    noted = (Path(os.environ["FAKE_DOCKER_STATE"]) / "signals").read_text().split()
    assert noted[:2] == [name, "SIGINT" if how == "ctrl-c" else "SIGTERM"]  # never SIGKILL first


def _engine_repo(tmp_path: Path, built_by: str) -> Path:
    from helpers import repository

    work = tmp_path / "build"
    work.mkdir(parents=True, exist_ok=True)
    (work / "model.plan").write_bytes(b"a serialized engine")
    io = [{"name": "input_1", "input": True, "dtype": "FLOAT", "shape": [-1, 4], "profile": [[1, 4], [8, 4], [32, 4]]},
          {"name": "predictions", "input": False, "dtype": "FLOAT", "shape": [-1, 2]}]
    (work / "engine.json").write_text(json.dumps({"tensorrt": built_by, "io": io}))
    repo = tmp_path / "models"
    repository.add_model(repo, repository.config_from_engine("trt", json.loads((work / "engine.json").read_text())),
                         work / "model.plan")
    return repo


def test_a_stale_engine_is_refused_before_serving_with_the_reason(fake_docker, tmp_path):
    """Issue 22, item 10: an engine built by another TensorRT than the tag's was served without a word (Triton then
    fails to deserialize it, after a 15 GB pull)."""
    from helpers.launchers import stale_engines

    repo = _engine_repo(tmp_path, "10.8.0.43")
    assert (repo / "trt" / "1" / "engine.json").exists()  # add_model keeps the engine's description beside it
    server = TritonServer(repo, RuntimeChoice("docker", "test"), tag="24.05")
    try:
        with pytest.raises(RuntimeError, match=r"built by TensorRT 10\.8\.0\.43 .* links TensorRT 10\.0\.1.*"
                                               r"ngc_tag='24\.05'.*ngc_tag='25\.01', the release that built it"):
            server.start()
    finally:
        server.stop()
    assert not any(c[0] == "pull" for c in calls(fake_docker))  # refused before the pull
    assert stale_engines(repo, ["trt"], "25.01") == []
    assert stale_engines(_engine_repo(tmp_path / "same", "10.0.1.6"), ["trt"], "24.05") == []


def test_an_unrecorded_tags_tensorrt_is_read_from_its_image_for_the_stale_engine_check(fake_docker, tmp_path,
                                                                                        monkeypatch, capsys):
    """Issue 22, a current release: helpers/ngc.py does not record 26.02's TensorRT, so an engine built by another
    TensorRT (25.01's 10.8) was served under 26.02 without a check; the TensorRT image, when it is on the machine (it
    is never pulled for this), says which TensorRT the tag has."""
    from helpers.launchers import stale_engines

    repo = _engine_repo(tmp_path, "10.8.0.43")
    assert ngc.tensorrt_version("26.02") is None
    reads = []

    def image_says(tag, pull=True):
        reads.append((tag, pull))
        return "10.15.1.29"  # what the image's `import tensorrt` would print; no such run in this test docker

    monkeypatch.setattr(convert, "tensorrt_version_in_image", image_says)
    assert stale_engines(repo, ["trt"], "26.02") == []  # the image is not here: noted, not pulled, not refused
    absent = capsys.readouterr().out
    assert not reads and not any(c[0] == "pull" for c in calls(fake_docker))
    subprocess.run(["docker", "pull", ngc.image("tensorrt", "26.02")], capture_output=True, check=True)
    problems = stale_engines(repo, ["trt"], "26.02")
    assert len(problems) == 1 and "built by TensorRT 10.8.0.43" in problems[0], problems
    assert "links TensorRT 10.15.1.29" in problems[0] and "ngc_tag='25.01', the release that built it" in problems[0]
    assert reads == [("26.02", False)] and "nvcr.io/nvidia/tensorrt:26.02-py3 is not on this machine" in absent
    assert stale_engines(_engine_repo(tmp_path / "same", "10.15.1.29"), ["trt"], "26.02") == []


def test_tensorrt_steps_that_cannot_run_are_reported_with_where_the_version_came_from(fake_docker, tmp_path,
                                                                                      monkeypatch):
    """Issue 22, docker-ci with 03 and 12: the test docker cannot run the TensorRT image, so the version read raised
    and the notebooks stopped; now each step fails with ContainerStepFailed, and the version shown says where it came
    from: the image, helpers/ngc.py's record, or nowhere (26.02, with the reason), never a guess."""
    monkeypatch.setenv(ngc.SERIES_TAG_VARIABLE, "26.02")
    version, source = convert.tensorrt_version_of(read_image=True)
    assert version is None and "nvcr.io/nvidia/tensorrt:26.02-py3" in source and "cannot run on this machine" in source
    assert "not recorded for NGC 26.02" in source and "trtllm-python-py3" in source
    runs = [c for c in calls(fake_docker) if c[0] == "run"]
    assert ["pull", "nvcr.io/nvidia/tensorrt:26.02-py3"] in calls(fake_docker) and len(runs) == 1
    assert convert.tensorrt_version_of("24.05", read_image=True)[0] == "10.0.1"  # the image failed: the record
    assert convert.tensorrt_version_of("24.05", read_image=False) == ("10.0.1", "recorded for NGC 24.05 in helpers/ngc.py")
    build = convert.in_tensorrt_container(convert.trtexec_args("m.onnx", "m.plan", "x", (3,),
                                                               tensorrt_major=convert.command_major(version)), tmp_path)
    assert ngc.image_of(build) == "nvcr.io/nvidia/tensorrt:26.02-py3" and "--fp16" in build
    with pytest.raises(convert.ContainerStepFailed, match="exit code 125") as info:
        convert.run_checked(build, tmp_path / "trtexec.log")
    assert convert.summary(info.value).startswith("command failed with exit code 125: docker run")
    assert "cannot run on this machine" in convert.summary(info.value)


def test_shared_memory_needs_the_hosts_ipc_on_both_sides(fake_docker, tiny_repo, tmp_path):
    """Issue 22, item 8: the test docker ignored --ipc on the SDK path, so dropping --ipc=host passed."""
    ngc.ensure_image(ngc.image("sdk"))
    with TritonServer(tiny_repo, RuntimeChoice("docker", "test")) as server:
        args = perf.perf_args("tiny", server.grpc_url, concurrency="1", measurement_request_count=10, max_trials=5,
                              stability_percentage=500, shared_memory="system", csv_file="/results/t.csv")
        cmd = perf.docker_command(args, results_dir=tmp_path)
        dropped = [a for a in cmd if a != "--ipc=host"]
        refused = subprocess.run(dropped, capture_output=True, text=True)
        assert refused.returncode != 0 and "own /dev/shm (no --ipc=host)" in refused.stderr
        ran = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
        assert (tmp_path / "t.csv").exists()


def _python_model(repo: Path, name: str, imports: str) -> None:
    """A reader's Python-backend model (identity on X) whose model.py imports `imports`."""
    from helpers import repository

    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(textwrap.dedent(f"""\
        import {imports}
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X")
                                                                    .as_numpy())]) for r in requests]
        """))
    repository.add_model_text(repo, f"""name: "{name}"
backend: "python"
max_batch_size: 4
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
instance_group [ {{ count: 1 kind: KIND_GPU }} ]
""")


def test_python_models_in_the_server_image_have_numpy_and_no_torch(fake_docker, tmp_path):
    """Issue 22, item 1: the test docker served a reader's Python model with this environment's torch and
    torchvision, so notebook 14's JPEG step (torchvision) loaded here and failed only in the NGC image."""
    repo = tmp_path / "models"
    _python_model(repo, "with_numpy", "numpy")
    _python_model(repo, "with_torch", "torch")
    with TritonServer(repo, RuntimeChoice("docker", "test"), models=["with_numpy"]) as server:
        out = tc.infer(tc.connect(server.url), "with_numpy", np.ones((1, 2), np.float32))["Y"]
        assert out.tolist() == [[1.0, 1.0]]
    with pytest.raises(RuntimeError, match="with_torch") as failed:
        TritonServer(repo, RuntimeChoice("docker", "test"), models=["with_torch"], startup_timeout=120).start()
    assert "No module named 'torch'" in str(failed.value) or "UNAVAILABLE" in str(failed.value), str(failed.value)
    assert containers() == []


def test_memory_trace_pulls_the_sdk_image_first_and_checks_the_exit_code(fake_docker, tiny_repo, tmp_path):
    """Issue 22, items 3-4: the trace never pulled the SDK image (a real engine pulled it inside the traced window,
    and the trace plotted the docker CLI's memory) and swallowed perf_analyzer's exit code."""
    with TritonServer(tiny_repo, RuntimeChoice("docker", "test")) as server:
        state = Path(os.environ["FAKE_DOCKER_STATE"]) / "images"
        state.write_text("\n".join(i for i in state.read_text().split() if i != ngc.image("sdk")) + "\n")
        trace = perf.memory_trace("tiny", server.grpc_url, tmp_path / "perf" / "trace.csv", concurrency=1, requests=20,
                                  docker_tag=ngc.NGC_TAG)
        assert trace.attrs["peak_mb"] > 0 and not trace.attrs["stopped"]  # perf_analyzer's memory, one window
        with pytest.raises(RuntimeError, match=r"perf_analyzer failed \(exit [1-9]\d*\) during the memory trace"):
            perf.memory_trace("no_such_model", server.grpc_url, tmp_path / "perf" / "t2.csv", concurrency=1,
                              requests=20, docker_tag=ngc.NGC_TAG)
    log = calls(fake_docker)
    pulls = [i for i, c in enumerate(log) if c[0] == "pull" and c[1] == ngc.image("sdk")]
    sdk_runs = [i for i, c in enumerate(log) if c[0] == "run" and ngc.image("sdk") in c]
    assert pulls and sdk_runs and pulls[0] < sdk_runs[0]
    assert containers() == []


def test_every_docker_run_never_pulls_and_the_sdk_container_is_named_with_init(fake_docker, tiny_repo, tmp_path):
    """Issue 22, items 3-4: `docker run` pulled a missing image silently inside timed steps; the perf_analyzer
    container ran unnamed, without init, and nothing removed it when the kernel died."""
    with TritonServer(tiny_repo, RuntimeChoice("docker", "test")) as server:
        perf.run("tiny", server.grpc_url, tmp_path / "perf" / "tiny.csv", concurrency="1", docker_tag=ngc.NGC_TAG,
                 measurement_request_count=10, max_trials=5, stability_percentage=500, progress=False)
    runs = [c for c in calls(fake_docker) if c[0] == "run"]
    assert runs and all("--pull=never" in c[:c.index(ngc.image_of(["docker", *c]))] for c in runs), runs
    sdk = [c for c in runs if ngc.image("sdk") in c]
    assert sdk and all("--init" in c and c[c.index("--name") + 1].startswith(ngc.CONTAINER_PREFIX) for c in sdk)
    assert all(["rm", "-f", c[c.index("--name") + 1]] in calls(fake_docker) for c in sdk)
    assert containers() == []
    # a missing image fails at once, as Docker does with --pull=never
    out = subprocess.run(ngc.docker_run("nvcr.io/nvidia/tritonserver:00.01-py3", ["tritonserver"], gpus=None),
                         capture_output=True, text=True)
    assert out.returncode == 125 and "No such image" in out.stderr


def test_cuda_shared_memory_in_the_sdk_container_is_refused_with_the_reason(tmp_path):
    """Issue 22, item 4: with --shared-memory cuda the SDK container ran without a GPU, so perf_analyzer could create
    no region (and the server, in another container, would open them through CUDA IPC between containers)."""
    args = perf.perf_args("m", "127.0.0.1:8001", concurrency="1", shared_memory="cuda")
    with pytest.raises(ValueError, match=r"shared_memory='cuda' is not offered.*issues/3429.*shared_memory='system'"):
        perf.docker_command(args, results_dir=tmp_path)
    with pytest.raises(ValueError, match="not offered"):
        perf.level_command("m", "127.0.0.1:8001", tmp_path / "x.csv", ngc.NGC_TAG, concurrency="1", shared_memory="cuda")
    system = perf.docker_command(perf.perf_args("m", "127.0.0.1:8001", concurrency="1", shared_memory="system"),
                                 results_dir=tmp_path)
    assert "--shared-memory" in system and "--gpus" not in system


def test_a_killed_runs_shared_memory_regions_are_removed_by_the_reaper(tmp_path):
    """Issue 22, item 14: a SIGKILLed perf_analyzer or server (with --ipc=host, in a container too) left its regions
    in this host's /dev/shm; the reaper removes those of a killed run that nothing maps or holds open."""
    import uuid

    reaper = Path(__file__).resolve().parents[1] / "helpers" / "reaper.py"
    tag = uuid.uuid4().hex[:8]
    orphan, held, kept = (Path("/dev/shm") / f"tt-{tag}-{n}" for n in ("orphan", "held", "normal"))
    go = tmp_path / "go"
    killed = textwrap.dedent(f"""\
        import os, time
        for path in ({str(orphan)!r}, {str(held)!r}):
            open(path, "wb").write(b"x" * 64)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.05)
        os.kill(os.getpid(), 9)
        """)
    try:
        proc = subprocess.Popen([sys.executable, str(reaper), "--", sys.executable, "-c", killed],  # its own group,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)  # as the helpers start it
        deadline = time.monotonic() + 30
        while not held.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(held, "rb"):  # another process still uses this one
            go.touch()
            assert proc.wait(30) == 137
        assert not orphan.exists() and held.exists()
        assert f"tt-{tag}-orphan" in proc.stderr.read()
        normal = f"open({str(kept)!r}, 'wb').write(b'x')"
        assert subprocess.run([sys.executable, str(reaper), "--", sys.executable, "-c", normal],
                              start_new_session=True).returncode == 0
        assert kept.exists()  # a run that ended on its own is not a killed run: nothing removed
    finally:
        for path in (orphan, held, kept):
            path.unlink(missing_ok=True)


def _sleeping_container(state: Path, name: str) -> subprocess.Popen:
    """A container record of the test docker whose process runs (docker ps: running)."""
    sleeper = subprocess.Popen(["sleep", "60"])
    (state / "containers").mkdir(parents=True, exist_ok=True)
    (state / "containers" / name).write_text(str(sleeper.pid))
    return sleeper


def test_two_users_of_one_engine_neither_collide_nor_take_each_others_containers(fake_docker, tiny_repo, capsys):
    """Review 2026-12-03, MED 10: the one-shot containers' names did not say whose they were, and a second user was
    told that the first one's live server was a leftover "from an earlier run". One-shot names now carry the uid
    (another user's are not mentioned), and a running container is named as running, its owner unknown: with the
    host's network a server's name is its port's, the machine's."""
    from helpers.launchers import free_port

    state = Path(os.environ["FAKE_DOCKER_STATE"])
    mine = f"triton-tutorials-u{os.getuid()}-"
    theirs = f"triton-tutorials-u{os.getuid() + 1}-tritonserver-4242-abcdef"
    port, busy_port = free_port(), free_port()
    sleepers = [_sleeping_container(state, theirs), _sleeping_container(state, f"triton-tutorials-{busy_port}")]
    (state / "containers" / "triton-tutorials-1").write_text("0")  # stopped and never removed
    try:
        assert ngc.named(["docker", "run", ngc.image("sdk"), "perf_analyzer"])[1].startswith(f"{mine}tritonserver-")
        server = TritonServer(tiny_repo, RuntimeChoice("docker", "test"), http_port=port)
        server.launcher.before_start(server)
        said = capsys.readouterr().out
        assert theirs not in said, "another user's container was taken for this user's"
        assert f"container triton-tutorials-{busy_port} is running (another notebook, kernel or user" in said
        assert "container triton-tutorials-1 from an earlier run still exists (exited)" in said
        same = TritonServer(tiny_repo, RuntimeChoice("docker", "test"), http_port=busy_port)
        with pytest.raises(RuntimeError, match=rf"container triton-tutorials-{busy_port} is running: a server of "
                                               r"another notebook, kernel or user"):
            same.launcher.before_start(same)
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


_HOLD = """
import os, sys, time
from helpers import perf
lock, uid, role, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.umask(0o077)  # a user whose files nobody else may read: the lock must still be shared
os.setgid(uid)
os.setuid(uid)
if role == "second":
    open(ready, "w").close()  # imported and about to ask for the lock: the first lets go a second later
started = time.monotonic()
with perf.exclusive(lock):
    print(f"held after {time.monotonic() - started:.2f}", flush=True)
    if role == "first":  # held until the second is waiting, however long its start took on a busy machine
        deadline = time.monotonic() + 120
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as two other users needs root")
def test_the_load_generator_lock_is_one_for_the_machine_and_serves_every_user(tmp_path):
    """Review 2026-12-03, MED 10: the lock was per user, so two users' perf_analyzers ran at once (and their fixed
    shared-memory region names collided); a lock file another user created (mode 0600 under umask 077) could not be
    opened. Two users (uid 65534 and 65533) now wait for each other on one file in a sticky folder."""
    import tempfile

    assert str(os.getuid()) not in perf.LOCK_FILE.name.replace("perf_analyzer", "")  # one name for every user
    sticky = Path(tempfile.mkdtemp(prefix="lock-", dir="/tmp"))
    sticky.chmod(0o1777)
    lock = sticky / "perf_analyzer.lock"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    try:
        ready = sticky / "second-is-waiting"
        first = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock), "65534", "first", str(ready)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert first.stdout.readline().startswith("held"), first.stderr.read()
        second = subprocess.run([sys.executable, "-c", _HOLD, str(lock), "65533", "second", str(ready)],
                                capture_output=True, text=True, env=env, timeout=180)
        first.wait(180)
        assert second.returncode == 0, second.stderr
        assert float(second.stdout.split()[-1]) > 0.5, "the second user did not wait for the first"
        assert lock.stat().st_uid == 65534 and lock.stat().st_mode & 0o777 == 0o644
    finally:
        import shutil

        shutil.rmtree(sticky)


def _torchscript_repo(tmp_path: Path, file_format: int | None = None) -> Path:
    """A repository with `ts`, TorchScript saved by this environment's torch; `file_format` rewrites the format
    version the archive records (as a future torch would write it)."""
    import zipfile

    import torch

    folder = tmp_path / "models" / "ts"
    (folder / "1").mkdir(parents=True)
    saved = tmp_path / "saved.pt"
    torch.jit.trace(torch.nn.Linear(4, 2).eval(), torch.zeros(1, 4)).save(str(saved))
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(folder / "1" / "model.pt", "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if file_format is not None and item.filename.endswith("/version") and item.filename.count("/") == 1:
                data = f"{file_format}\n".encode()
            target.writestr(item, data)
    (folder / "config.pbtxt").write_text('name: "ts"\nplatform: "pytorch_libtorch"\nmax_batch_size: 8\n'
                                         'input { name: "x" data_type: TYPE_FP32 dims: [4] }\n'
                                         'output { name: "y" data_type: TYPE_FP32 dims: [2] }\n')
    return tmp_path / "models"


def test_torchscript_the_tags_libtorch_cannot_read_is_refused_and_a_newer_torch_is_named(fake_docker, tmp_path,
                                                                                         monkeypatch):
    """Review 2026-12-03, MED 11: TorchScript saved by this environment's torch (2.14) was served by the tag's
    older libtorch (24.05: PyTorch 2.4) unchecked. A file format libtorch does not read is refused before the pull;
    a torch newer than the tag's PyTorch is named with both versions and what to do."""
    from helpers import launchers

    # a format this torch reads too would pass the repository check; the server's libtorch is what counts here
    future = _torchscript_repo(tmp_path / "future", file_format=11)  # the newest libtorch 2.x reads is 10
    server = TritonServer(future, RuntimeChoice("docker", "test"), tag="24.05")
    with pytest.raises(RuntimeError, match=r"model 'ts': .*model\.pt has TorchScript file format 11, but "
                                           r"libtorch reads 10 at most \(NGC 24\.05's PyTorch 2\.4\)"):
        server.launcher.before_start(server)
    assert not any(c[0] == "pull" for c in calls(fake_docker))  # refused before the pull

    repo = _torchscript_repo(tmp_path / "now")
    monkeypatch.setattr(launchers, "_torch_here", lambda: "2.14.1+cu130", raising=False)
    server = TritonServer(repo, RuntimeChoice("docker", "test"), tag="24.05")
    with pytest.warns(UserWarning,
                      match=r"saved by torch 2\.14\.1\+cu130 .* NGC 24\.05's PyTorch backend links PyTorch 2\.4: "
                            r"2\.4\.0a0.*save it with torch 2\.4 or older .* or choose a newer tag"):
        server.launcher.before_start(server)
    assert launchers.torchscript_format(repo / "ts" / "1" / "model.pt") <= launchers.TORCHSCRIPT_MAX_FORMAT
    with pytest.warns(launchers.TorchScriptNewerThanRelease, match=r"PyTorch 2\.10 or newer \(not recorded exactly\)"):
        launchers.torchscript_check(repo, ["ts"], "26.02")
    monkeypatch.setattr(launchers, "_torch_here", lambda: "2.4.1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        launchers.torchscript_check(repo, ["ts"], "24.05")  # the tag's own PyTorch: nothing to say


def test_an_engine_must_match_the_tags_tensorrt_to_the_build_number(fake_docker, tmp_path, monkeypatch):
    """Review 2026-12-03, LOW 14: only major.minor.patch was compared; TensorRT's support policies ask plan files to
    match "major, minor, patch, and build versions". A build number only one side records is not compared."""
    from helpers import launchers
    from helpers.launchers import stale_engines

    monkeypatch.setitem(ngc.TENSORRT_IN_RELEASE, "24.05", "10.0.1.6")
    assert stale_engines(_engine_repo(tmp_path / "same", "10.0.1.6"), ["trt"], "24.05") == []
    problems = stale_engines(_engine_repo(tmp_path / "build", "10.0.1.9"), ["trt"], "24.05")
    assert problems and "built by TensorRT 10.0.1.9" in problems[0] and "links TensorRT 10.0.1.6" in problems[0]
    assert launchers.same_tensorrt("10.0.1.6", "10.0.1") and not launchers.same_tensorrt("10.0.1.6", "10.0.2")


def test_a_docker_engine_with_userns_remap_is_not_picked_by_auto(fake_docker, monkeypatch):
    """Review 2026-12-03, LOW 15: under userns-remap the engine refuses `--network host` (Docker's userns-remap
    page, 'User namespace known limitations'), which every container of the series uses; nothing checked it."""
    monkeypatch.setenv("FAKE_DOCKER_USERNS", "1")
    monkeypatch.setattr(runtime, "nvidia_gpu", lambda: (True, "a test GPU"))
    monkeypatch.setattr(runtime, "gpu_properties", lambda: [{"index": "0", "name": "NVIDIA H200", "compute_cap": "9.0",
                                                              "driver": "580.1"}])
    choice = choose_runtime("auto")
    assert choice.name == "local" and "remaps user namespaces" in choice.reason, choice.reason
    with pytest.raises(RuntimeError, match="runtime='docker' with NGC 24.05: the Docker engine remaps user namespaces"):
        choose_runtime("docker")
    monkeypatch.delenv("FAKE_DOCKER_USERNS")
    assert choose_runtime("auto").name == "docker"
