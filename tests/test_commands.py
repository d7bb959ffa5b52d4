"""The exact docker, trtexec and perf_analyzer commands the GPU/NGC path would run (no Docker needed)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import convert, ngc, perf
from helpers.runtime import RuntimeChoice
from helpers.server import TritonServer


def test_images_share_one_tag():
    assert ngc.image("tritonserver") == "nvcr.io/nvidia/tritonserver:24.05-py3"
    assert ngc.image("sdk", "24.10") == "nvcr.io/nvidia/tritonserver:24.10-py3-sdk"
    assert ngc.image("tensorrt") == "nvcr.io/nvidia/tensorrt:24.05-py3"
    assert ngc.tensorrt_version("24.05").startswith("10.")
    with pytest.raises(ValueError, match="YY.MM"):
        ngc.image("tritonserver", "latest")


def test_server_docker_command_serves_on_localhost_over_the_host_network(tmp_path):
    """Round two, item 3: published ports sent every benchmark request through docker-proxy; the server now uses
    the host's network with every endpoint bound to 127.0.0.1."""
    (tmp_path / "models").mkdir()
    server = TritonServer(tmp_path / "models", RuntimeChoice("docker", "test"), tag="24.05", http_port=8000,
                          grpc_port=8001, metrics_port=8002)
    assert server.command() == [
        "docker", "run", "--rm", "--pull=never", "--init", "--name", "triton-tutorials-8000", "--gpus", "device=0", "--network", "host",
        "-v", f"{(tmp_path / 'models').resolve()}:/models:ro", "--ipc=host",
        "nvcr.io/nvidia/tritonserver:24.05-py3",
        "tritonserver", "--model-repository=/models", "--http-address=127.0.0.1", "--http-port=8000",
        "--grpc-address=127.0.0.1", "--grpc-port=8001", "--metrics-address=127.0.0.1", "--metrics-port=8002",
        "--exit-on-error=false", "--exit-timeout-secs=10", "--model-control-mode=explicit", "--load-model=*"]
    assert "-p" not in server.command()
    polled = TritonServer(tmp_path / "models", RuntimeChoice("docker", "test"), tag="24.05", poll_secs=30)
    assert polled.command()[-2:] == ["--model-control-mode=poll", "--repository-poll-secs=30"]  # the articles' way


def test_docker_ports_are_the_defaults_when_free_else_free_ones(tmp_path, monkeypatch):
    """Round two, item 4: fixed ports 8000-8002 stopped every notebook when JupyterHub (or a leftover container)
    held 8000."""
    from helpers import server as server_module

    (tmp_path / "models").mkdir()
    monkeypatch.setattr(server_module, "port_busy", lambda port, host="127.0.0.1": port == 8000)
    server = TritonServer(tmp_path / "models", RuntimeChoice("docker", "test"))
    assert server.http_port != 8000 and (server.grpc_port, server.metrics_port) == (8001, 8002)
    assert server.container_name == f"triton-tutorials-{server.http_port}"
    assert f"--http-port={server.http_port}" in server.command()


def test_docker_server_uses_one_gpu_and_loads_only_the_models_asked_for(tmp_path):
    """Defects 9 and 11: `--gpus all` put N instances on every GPU; every server loaded every model and one broken
    model stopped the container (--exit-on-error=true)."""
    (tmp_path / "models").mkdir()
    server = TritonServer(tmp_path / "models", RuntimeChoice("docker", "test"), models=["a", "b"], gpu=1)
    cmd = server.command()
    assert cmd[cmd.index("--gpus") + 1] == "device=1" and "all" not in cmd
    assert "--exit-on-error=false" in cmd
    assert cmd[-3:] == ["--model-control-mode=explicit", "--load-model=a", "--load-model=b"]
    assert ngc.gpus_flag("all") == "all" and ngc.gpus_flag(None) is None
    with pytest.raises(ValueError, match="GPU index"):
        ngc.gpus_flag("first")


def test_a_server_built_to_print_its_command_leaves_no_work_folder(tmp_path):
    (tmp_path / "models").mkdir()
    server = TritonServer(tmp_path / "models", RuntimeChoice("docker", "test"))
    server.command()
    assert not server.workdir.exists()


def test_docker_volume_must_exist(tmp_path):
    with pytest.raises(FileNotFoundError, match="volume source must exist"):
        ngc.docker_run("img", volumes={tmp_path / "missing": "/x"})
    with pytest.raises(ValueError, match="absolute path"):
        ngc.docker_run("img", volumes={tmp_path: "relative"})


def test_trtexec_keras_engine_command(tmp_path):
    args = convert.trtexec_args("resnet50.onnx", "model.plan", "input_1", (224, 224, 3), batches=(1, 8, 32))
    assert args == ["trtexec", "--onnx=resnet50.onnx", "--saveEngine=model.plan",
                    "--minShapes=input_1:1x224x224x3", "--optShapes=input_1:8x224x224x3",
                    "--maxShapes=input_1:32x224x224x3", "--fp16"]
    cmd = convert.in_tensorrt_container(args, tmp_path, "24.05")
    assert cmd[:15] == ["docker", "run", "--rm", "--pull=never", "--init", "--gpus", "device=0", "--user",
                        f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp", "-v", f"{tmp_path.resolve()}:/workspace/models",
                        "-w", "/workspace/models"]
    assert cmd[15:17] == ["nvcr.io/nvidia/tensorrt:24.05-py3", "trtexec"]


def test_tool_containers_run_as_the_calling_user(tmp_path):
    """Round two, item 6: trtexec, torch-tensorrt and perf_analyzer wrote root-owned files into the user's folders."""
    user = f"{os.getuid()}:{os.getgid()}"
    for cmd in (convert.in_tensorrt_container(["trtexec"], tmp_path), convert.in_pytorch_container(["python"], tmp_path),
                perf.docker_command(["-m", "m"], results_dir=tmp_path)):
        assert cmd[cmd.index("--user") + 1] == user and cmd[cmd.index("-e") + 1] == "HOME=/tmp", cmd
    server = TritonServer(tmp_path, RuntimeChoice("docker", "test")).command()
    assert "--user" not in server  # the server only reads the repository


def test_trtexec_fp16_io_adds_format_flags_and_rules():
    args = convert.trtexec_args("m.onnx", "m.plan", "INPUT__0", (3, 224, 224), batches=(1, 8, 64), fp16_io=True)
    assert "--inputIOFormats=fp16:chw" in args and "--outputIOFormats=fp16:chw" in args
    assert "--maxShapes=INPUT__0:64x3x224x224" in args
    with pytest.raises(ValueError, match="TensorRT 11 removed"):
        convert.trtexec_args("m.onnx", "m.plan", "x", (3,), tensorrt_major=11)
    with pytest.raises(ValueError, match="min <= opt <= max"):
        convert.trtexec_args("m.onnx", "m.plan", "x", (3,), batches=(8, 1, 64))
    with pytest.raises(ValueError, match="fp16_io=True needs fp16=True"):
        convert.trtexec_args("m.onnx", "m.plan", "x", (3,), fp16=False, fp16_io=True)


def test_engine_parity_command_and_output_reader(tmp_path):
    args = convert.engine_outputs_args("model.plan", "input_1", "in.bin", (6, 224, 224, 3), "out.json")
    assert "--loadInputs=input_1:in.bin" in args and "--shapes=input_1:6x224x224x3" in args
    (tmp_path / "out.json").write_text('[{"name": "predictions", "dimensions": "2x3", "values": [1, 2, 3, 4, 5, 6]}]')
    out = convert.read_trtexec_outputs(tmp_path / "out.json")
    assert out["predictions"].shape == (2, 3) and out["predictions"][1, 2] == 6


def test_torch_tensorrt_script_runs_in_pytorch_container_and_compiles(tmp_path):
    compile(convert.TORCH_TENSORRT_SCRIPT, "compile_ts.py", "exec")
    cmd = convert.in_pytorch_container(["python", "compile_ts.py"], tmp_path, "24.05")
    assert "nvcr.io/nvidia/pytorch:24.05-py3" in cmd and "--ipc=host" in cmd


def test_perf_analyzer_from_sdk_image_with_grpc_flag(tmp_path):
    args = perf.perf_args("resnet18_pytorch", "localhost:8001", concurrency="1:16:1", csv_file="/results/b.csv")
    assert args[:6] == ["-m", "resnet18_pytorch", "-u", "localhost:8001", "-i", "grpc"]
    cmd = perf.docker_command(args, "24.05", results_dir=tmp_path)
    assert cmd[cmd.index("nvcr.io/nvidia/tritonserver:24.05-py3-sdk") + 1] == "perf_analyzer"
    assert "--gpus" not in cmd and cmd[cmd.index("--network") + 1] == "host"


@pytest.mark.parametrize("kwargs, message", [({"protocol": "tcp"}, "protocol"), ({"concurrency": "1-16"}, "start:end:step"),
                                             ({"shared_memory": "gpu"}, "shared_memory")])
def test_perf_args_refuse_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        perf.perf_args("m", "localhost:8001", **kwargs)


def test_concurrency_levels():
    assert perf.concurrency_levels("1:16:1") == list(range(1, 17))
    assert perf.concurrency_levels("1:4:3") == [1, 4]
    assert perf.concurrency_levels("8") == [8]


def test_optimized_stand_in_per_world():
    assert convert.optimized_stand_in("docker", "cuda")[0] == "resnet18_trt"
    assert convert.optimized_stand_in("local", "cuda")[0] == "resnet18_opt"
    assert convert.optimized_stand_in("local", "cpu")[0] == "resnet18_opt"
    assert all(options["fp16"] for options in convert.torchscript_candidates("cuda").values())
    assert not any(options.get("fp16") for options in convert.torchscript_candidates("cpu").values())


def test_missing_perf_analyzer_gives_one_instruction(tmp_path, monkeypatch):
    monkeypatch.setenv("PERF_ANALYZER_BIN", str(tmp_path / "perf_analyzer"))
    with pytest.raises(perf.PerfAnalyzerNotFound, match="PERF_ANALYZER_BIN points to .* which does not exist"):
        perf.find_perf_analyzer()
    with pytest.raises(SystemExit, match="does not exist"):
        perf.require_perf_analyzer()


def test_tensorrt_version_is_read_from_the_image(monkeypatch):
    """Defect 6: every tag but 22.11 and 24.05 was taken for TensorRT 10, so TensorRT 11's missing --fp16 slipped by."""
    import subprocess

    seen = []

    def fake_run(args, **kwargs):
        seen.append(args)
        return subprocess.CompletedProcess(args, 0, stdout="11.0.0.7\n", stderr="")

    monkeypatch.setattr(ngc, "ensure_image", lambda image: seen.append(["pull", image]))
    monkeypatch.setattr(ngc, "run_container", fake_run)  # named, --init, removed on Ctrl-C (test_docker_path)
    version = convert.tensorrt_version_in_image("26.06")
    assert version == "11.0.0.7" and seen[0] == ["pull", "nvcr.io/nvidia/tensorrt:26.06-py3"]
    assert "import tensorrt; print(tensorrt.__version__)" in seen[1]
    with pytest.raises(ValueError, match="TensorRT 11 removed"):
        convert.trtexec_args("m.onnx", "m.plan", "x", (3,), tensorrt_major=int(version.split(".")[0]))


def test_torch_tensorrt_script_makes_the_model_fp16_before_compiling():
    """Defect 7: from NGC 26.06 enabled_precisions={torch.half} alone only logs a message: the engine stayed FP32."""
    script = convert.TORCH_TENSORRT_SCRIPT
    assert "self.inner = inner.half()" in script and "x.half()" in script
    assert script.index("HalfInside(") < script.index("torch_tensorrt.compile(")
    assert "max abs diff against FP32" in script  # the container prints what FP16 changed


def test_engine_inspection_runs_in_the_tensorrt_container(tmp_path):
    compile(convert.INSPECT_ENGINE_SCRIPT, "inspect_engine.py", "exec")
    cmd = convert.inspect_engine_command("model.plan", "engine.json", tmp_path, "24.05")
    assert ngc.image_of(cmd) == "nvcr.io/nvidia/tensorrt:24.05-py3"
    assert cmd[-4:] == ["python3", "inspect_engine.py", "model.plan", "engine.json"]
    assert cmd[cmd.index("--gpus") + 1] == "device=0"


def test_the_repository_is_mounted_read_only_into_the_server(tmp_path):
    """Issue 22, item 11: the server only reads its repository; it was mounted read-write."""
    (tmp_path / "models").mkdir()
    cmd = TritonServer(tmp_path / "models", RuntimeChoice("docker", "test")).command()
    assert cmd[cmd.index("-v") + 1] == f"{(tmp_path / 'models').resolve()}:/models:ro"
    assert ngc.docker_run("img", volumes={tmp_path: "/x:ro"}, selinux=True)[-3:-1] == ["-v", f"{tmp_path.resolve()}:/x:ro,z"]
    with pytest.raises(ValueError, match="volume mode must be ro, rw, z or Z; got 'rx'"):
        ngc.docker_run("img", volumes={tmp_path: "/x:rx"}, selinux=False)


@pytest.mark.parametrize("tag, gpu, words", [
    ("25.01", {"name": "Tesla V100-SXM2-16GB", "compute_cap": "7.0", "driver": "570.86"}, "needs 7.5 or newer"),
    ("24.05", {"name": "Tesla P100-PCIE-16GB", "compute_cap": "6.0", "driver": "550.54"}, "needs 7.0 or newer"),
    ("24.05", {"name": "Tesla P4", "compute_cap": "6.1", "driver": "550.54"}, "needs 7.0 or newer"),
    ("26.02", {"name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0", "driver": "575.51"}, "older than the 580"),
    ("26.02", {"name": "NVIDIA A100-SXM4-80GB", "compute_cap": "8.0", "driver": "535.161"}, "older than the 580"),
    ("25.01", {"name": "NVIDIA GeForce RTX 4090", "compute_cap": "8.9", "driver": "555.42"}, "older than the 560"),
])
def test_each_release_has_a_compute_capability_floor_and_its_drivers(tag, gpu, words):
    """Issue 22, item 7: a V100 passed for 25.01 (7.5+), a P100/P4/P40 for 24.05 (TensorRT 10 builds for SM 7.0+),
    and the 25.01 drivers differed from its release notes; a current release (26.02, CUDA 13) is in the table."""
    problems = ngc.gpu_problems(tag, [{"index": "0", **gpu}], 0)
    assert problems and words in problems[0], problems


def test_the_release_table_holds_a_current_release_with_its_sources():
    assert {"24.05", "25.01", "26.02"} <= set(ngc.RELEASE_POLICY)
    assert ngc.RELEASE_POLICY["25.01"].min_compute == (7, 5) and ngc.RELEASE_POLICY["25.01"].min_driver == 560
    assert ngc.RELEASE_POLICY["26.02"].min_driver == 580 and not ngc.RELEASE_POLICY["26.02"].datacenter_branches
    assert all(p.source for p in ngc.RELEASE_POLICY.values())
    ok = [{"index": "0", "name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0", "driver": "580.65.06"},
          {"index": "1", "name": "NVIDIA GeForce RTX 5090", "compute_cap": "12.0", "driver": "580.95"}]
    assert ngc.gpu_problems("26.02", ok, "all") == []
    assert ngc.gpu_problems("25.01", [{"index": "0", "name": "Tesla T4", "compute_cap": "7.5",
                                       "driver": "535.86.10"}], 0) == []  # R535 on a data-center GPU
    assert ngc.tensorrt_version("26.02") is None  # not in the notes read: the notebooks read it from the image


def test_one_gpu_setting_for_the_whole_series(tmp_path, monkeypatch):
    """Issue 22, item 9: every docker command used device 0; $TUTORIAL_GPU now picks the series' GPU."""
    monkeypatch.setenv(ngc.GPU_VARIABLE, "1")
    commands = [convert.in_tensorrt_container(["trtexec"], tmp_path), convert.in_pytorch_container(["python"], tmp_path),
                convert.inspect_engine_command("m.plan", "e.json", tmp_path), ngc.docker_run("img")]
    assert all(c[c.index("--gpus") + 1] == "device=1" for c in commands), commands
    assert convert.in_tensorrt_container(["trtexec"], tmp_path, gpu=0)[6] == "device=0"  # a notebook's own choice wins
    assert ngc.series_gpu() == 1 and "TUTORIAL_GPU=1" in ngc.series_gpu_source()
    host = [{"index": "0", "name": "NVIDIA H100", "compute_cap": "9.0", "driver": "580.1"},
            {"index": "1", "name": "Tesla V100", "compute_cap": "7.0", "driver": "580.1"}]
    assert ngc.gpu_problems("25.01", host) and "GPU 1" in ngc.gpu_problems("25.01", host)[0]
    monkeypatch.setenv(ngc.GPU_VARIABLE, "all")
    assert ngc.docker_run("img")[5] == "all"
    monkeypatch.setenv(ngc.GPU_VARIABLE, "first")
    with pytest.raises(ValueError, match=r"\$TUTORIAL_GPU must be a GPU index like 0 or 1, or 'all'; got 'first'"):
        ngc.docker_run("img")
    monkeypatch.delenv(ngc.GPU_VARIABLE)
    assert ngc.docker_run("img")[5] == "device=0"


def _saved_results_cell() -> str:
    import json

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "03_tensorrt_engine.ipynb").read_text())
    return next("".join(c["source"]) for c in nb["cells"]
                if c["cell_type"] == "code" and "series.save_results" in "".join(c["source"]))


def test_03_saves_whether_this_run_built_the_engine(tmp_path):
    """Issue 22, item 10: 03 saved "built": engine.exists(), True for an engine an earlier run left behind."""
    saved = {}

    class Series:
        @staticmethod
        def save_results(run_dir, name, results):
            saved.update(results)

    engine = tmp_path / "model.plan"
    engine.write_bytes(b"an engine an earlier run built")
    scope = {"series": Series, "engine": engine, "trt_version": "10.0.1", "check": None, "run_dir": str(tmp_path),
             "ngc": ngc, "build_cmd": ["docker", "run", "img"], "trt_from": "recorded", "trt_error": "",
             "choice": RuntimeChoice("local", "no Docker here")}
    exec(_saved_results_cell(), scope)
    assert saved["built"] is False and saved["engine_on_disk"] is True
    scope["choice"] = RuntimeChoice("docker", "test")  # the build cell sets trt_error when a step failed
    exec(_saved_results_cell(), scope)
    assert saved["built"] is True
    scope["trt_error"] = "command failed with exit code 125: docker run ... cannot run on this machine"
    exec(_saved_results_cell(), scope)
    assert saved["built"] is False and saved["tensorrt_error"] == scope["trt_error"]


def _code(stem: str) -> str:
    import json

    cells = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_the_trtexec_command_follows_the_images_tensorrt_and_says_what_it_does_with_fp16():
    """Issue 22, a current release: trtexec from TensorRT 10.14 warns that --fp16 (weak typing, deprecated in 10.12) is
    deprecated, and 11.0 removed it; 03 and 12 took an unknown version for "10" without a word (26.02's is unknown)."""
    assert convert.fp16_note("10.0.1.6") == "" and convert.fp16_note("10.13.3.9") == ""
    assert all("deprecated" in convert.fp16_note(v) for v in ("10.14.1.48", "10.15.1.29", "10.16.0.72"))
    assert "no --fp16" in convert.fp16_note("11.0.0.7") and convert.command_major("11.0.0.7") == 11
    assert "unknown" in convert.fp16_note(None) and convert.command_major(None) == 10
    assert "--fp16" in convert.trtexec_args("m.onnx", "m.plan", "x", (3,), tensorrt_major=convert.command_major("10.16"))
    for stem in ("03_tensorrt_engine", "12_optimize_tensorrt"):
        code = _code(stem)
        assert 'or "10")' not in code and "tensorrt_major=convert.command_major(trt_version)" in code, stem
        assert "convert.fp16_note(trt_version)" in code and "except convert.ContainerStepFailed" in code, stem


def test_the_current_release_cites_its_sources_and_why_its_tensorrt_is_not_recorded():
    policy = ngc.RELEASE_POLICY["26.02"]
    assert (policy.min_compute, policy.min_driver, policy.tensorrt) == ((7, 5), 580, None)
    assert "rel-26-02.html" in policy.source and "minor-version-compatibility" in policy.source
    assert "trtllm-python-py3" in policy.tensorrt_note and "13.1.1" in policy.tensorrt_note
    version, source = convert.tensorrt_version_of("26.02", read_image=False)
    assert version is None and policy.tensorrt_note in source
    assert convert.tensorrt_version_of("24.05", read_image=False)[0] == ngc.tensorrt_version("24.05") == "10.0.1"


def _images(found) -> list[str]:
    """Every `image` value in a nested manifest."""
    if isinstance(found, dict):
        return [v for k, v in found.items() if k == "image"] + [i for v in found.values() for i in _images(v)]
    return [i for v in found for i in _images(v)] if isinstance(found, list) else []


def test_the_series_tag_reaches_every_image_the_docker_world_runs(tmp_path, monkeypatch):
    """Issue 22, item 3: a docker-ci run with a 26.xx tag must use its images everywhere. Every helper that takes a
    tag defaulted to 24.05 (NGC_TAG): a call that left out tag= ran 24.05's image under any series tag. Now each one
    follows the series' tag, and no notebook names a tag of its own; checked from the command builders, no notebook
    executed (the docker world's run checks its docker log: test_series_docker)."""
    import inspect
    import json
    import re
    import subprocess

    from helpers import analyzer, k8s, launchers, runtime, server

    defaults = {}
    for module in (ngc, convert, perf, k8s, server, runtime, launchers, analyzer):
        for name, obj in vars(module).items():
            if getattr(obj, "__module__", None) != module.__name__ or not callable(obj):
                continue
            parameters = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj).parameters
            if "tag" in parameters and parameters["tag"].default is not inspect.Parameter.empty:
                defaults[f"{module.__name__}.{name}"] = parameters["tag"].default
    assert len(defaults) >= 10 and set(defaults.values()) == {"series"}, defaults

    monkeypatch.setenv(ngc.SERIES_TAG_VARIABLE, "26.02")
    tag = ngc.series_tag()  # what every notebook's `ngc_tag = ngc.series_tag(ngc_tag)` gives
    (tmp_path / "models").mkdir()
    run = []
    monkeypatch.setattr(ngc, "ensure_image", run.append)

    def container(args, **kwargs):
        run.append(ngc.image_of(args))
        return subprocess.CompletedProcess(args, 0, "10.15.1.29\n", "")

    monkeypatch.setattr(ngc, "run_container", container)
    commands = [TritonServer(tmp_path / "models", RuntimeChoice("docker", "test")).command(),
                perf.level_command("m", "127.0.0.1:8001", tmp_path / "perf" / "c1.csv", tag)[0],
                perf.warmup_command("m", "127.0.0.1:8001", tmp_path / "perf" / "c1.csv", 4, tag)[0],
                convert.in_tensorrt_container(["trtexec"], tmp_path),
                convert.inspect_engine_command("model.plan", "engine.json", tmp_path),
                convert.in_pytorch_container(["python"], tmp_path),
                perf.docker_command(["perf_analyzer", "-m", "m"])]
    assert convert.tensorrt_version_in_image() == "10.15.1.29"  # pulled, then run: both images in `run`
    ngc.pull_all()  # `./tutorial pull`: every image, pulled
    images = [ngc.image_of(c) for c in commands] + _images(k8s.plain("app", ["m"])) + run + [
        ngc.image_of(analyzer.explicit_server(tmp_path / "models", RuntimeChoice("docker", "test"), ["m"], tag=tag).command()),
        ngc.image_of(analyzer.docker_command(tag, tmp_path / "models", tmp_path))]
    assert len(images) == 16 and all(re.search(r":26\.02-py3(-sdk)?$", i) for i in images), images
    assert k8s.kserve("app", storage_uri="s3://b/m")[0]["spec"]["predictor"]["model"]["runtimeVersion"] == "26.02-py3"
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            code = "\n".join(line.split("#")[0] for line in "".join(cell["source"]).splitlines())
            if cell["cell_type"] == "code" and "parameters" not in cell["metadata"].get("tags", []):
                assert not re.search(r"""["']\d{2}\.\d{2}["']""", code), f"{path.name} names a tag: {code[:200]}"
                assert not re.search(r"\btag=(?!ngc_tag\b|docker_tag\b)", code), f"{path.name}: {code[:200]}"


def _tutorial_env(tmp_path, **extra) -> dict:
    """An environment for ./tutorial in which any package set-up fails loudly: its Python refuses venv and pip,
    and runs with -S (no site-packages), so what works here needs the standard library only."""
    import sys

    bin_dir = tmp_path / "pybin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "python3"
    wrapper.write_text("#!/bin/sh\ncase \"$*\" in *'-m venv'*|*'-m pip'*) echo \"set-up ran: $*\" >&2; exit 3;; esac\n"
                       f"exec {sys.executable} -S \"$@\"\n")
    wrapper.chmod(0o755)
    return {**os.environ, "PYTHON": str(wrapper), "VENV": str(tmp_path / "no-venv"), **extra}


def test_pull_needs_no_set_up(tmp_path):
    """Issue 22, item 12: `./tutorial pull` created the virtual environment and installed every package first;
    helpers.ngc needs only the standard library."""
    import subprocess
    import sys

    fake = Path(__file__).resolve().parent / "fakedocker"
    env = _tutorial_env(tmp_path, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}", FAKE_DOCKER_PYTHON=sys.executable,
                        FAKE_DOCKER_STATE=str(tmp_path / "docker-state"))
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([str(root / "tutorial"), "pull", "--tag", "25.01"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pulled: nvcr.io/nvidia/tritonserver:25.01-py3" in out.stdout and "set-up ran" not in out.stderr
    assert not (tmp_path / "no-venv").exists()
    images = (tmp_path / "docker-state" / "images").read_text().split()
    assert sorted(images) == sorted(ngc.image(kind, "25.01") for kind in ngc.IMAGES)


def test_lab_tag_sets_the_series_tag_for_the_lab(tmp_path):
    """Issue 22, item 13: ngc.py said `./tutorial lab --tag` sets the tag; lab had no --tag."""
    import hashlib
    import subprocess

    root = Path(__file__).resolve().parents[1]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for tool, body in (("python", 'echo "python $*" >> "$(dirname "$0")/calls"'),
                       ("jupyter", 'echo "TAG=${TUTORIAL_NGC_TAG:-unset} $*" > "$(dirname "$0")/lab"')):
        (venv / "bin" / tool).write_text(f"#!/bin/sh\n{body}\n")
        (venv / "bin" / tool).chmod(0o755)
    stamp = b"".join((root / f).read_bytes() for f in ("requirements.txt", "pyproject.toml", "tutorial"))
    (venv / ".tutorial-setup").write_text(hashlib.sha256(stamp).hexdigest()[:16] + "\n")  # set up already
    env = {**_tutorial_env(tmp_path), "VENV": str(venv)}
    env.pop(ngc.SERIES_TAG_VARIABLE, None)
    out = subprocess.run([str(root / "tutorial"), "lab", "--tag", "25.01", "--no-browser"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    lab = (venv / "bin" / "lab").read_text()
    assert lab.startswith("TAG=25.01 lab --notebook-dir=") and "--tag" not in lab and "--no-browser" in lab
    bad = subprocess.run([str(root / "tutorial"), "lab", "--tag", "latest"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert bad.returncode != 0 and "lab --tag must look like 24.05 (YY.MM); got 'latest'" in bad.stderr
