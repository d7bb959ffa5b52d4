"""The exact docker, trtexec and perf_analyzer commands the GPU/NGC path would run (no Docker needed)."""
from __future__ import annotations

import os

import pytest

from helpers import convert, ngc, perf
from helpers.runtime import RuntimeChoice
from helpers.server import TritonServer


def test_images_share_one_tag():
    assert ngc.image("tritonserver") == "nvcr.io/nvidia/tritonserver:24.05-py3"
    assert ngc.image("sdk", "22.11") == "nvcr.io/nvidia/tritonserver:22.11-py3-sdk"
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
        "docker", "run", "--rm", "--name", "triton-tutorials-8000", "--gpus", "device=0", "--network", "host",
        "-v", f"{(tmp_path / 'models').resolve()}:/models", "--ipc=host",
        "nvcr.io/nvidia/tritonserver:24.05-py3",
        "tritonserver", "--model-repository=/models", "--http-address=127.0.0.1", "--http-port=8000",
        "--grpc-address=127.0.0.1", "--grpc-port=8001", "--metrics-address=127.0.0.1", "--metrics-port=8002",
        "--exit-on-error=false", "--exit-timeout-secs=10", "--model-control-mode=poll", "--repository-poll-secs=30"]
    assert "-p" not in server.command()


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
    assert cmd[:13] == ["docker", "run", "--rm", "--gpus", "device=0", "--user", f"{os.getuid()}:{os.getgid()}",
                        "-e", "HOME=/tmp", "-v", f"{tmp_path.resolve()}:/workspace/models", "-w", "/workspace/models"]
    assert cmd[13:15] == ["nvcr.io/nvidia/tensorrt:24.05-py3", "trtexec"]


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
    monkeypatch.setattr(convert.subprocess, "run", fake_run)
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
