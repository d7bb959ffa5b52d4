"""Triton's own PyTorch and ONNX Runtime backends, built from source by `./tutorial setup`, serving TorchScript and
ONNX on this machine."""
from __future__ import annotations

import json
import time
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from helpers import client as tc
from helpers import export, native_backends, repository
from helpers.runtime import find_local_triton
from helpers.preflight import RepositoryError
from helpers.server import ServerError, TritonServer

IO = ([repository.TensorSpec("INPUT__0", "FP32", (-1, 3, 224, 224))],
      [repository.TensorSpec("OUTPUT__0", "FP32", (-1, 1000))])


@pytest.fixture(scope="module")
def resnet18_pt(tmp_path_factory):
    model, _ = export.torchvision_resnet18("random")
    return export.to_torchscript(model, tmp_path_factory.mktemp("r18") / "model.pt")


def test_setup_built_the_pytorch_backend():
    local = find_local_triton()
    assert "pytorch" in local.backends, (
        f"no native PyTorch backend in {local.backend_dir}: `./tutorial setup` builds it "
        "(python -m helpers.native_backends says why it could not)")
    stamp = json.loads((local.backend_dir / "pytorch" / native_backends.STAMP).read_text())
    assert stamp["branch"] == native_backends.release_branch(stamp["key"]["server"])


def test_release_branch_matches_server_version():
    assert native_backends.release_branch("2.51.0") == "r24.10"
    assert native_backends.release_branch("2.46.0") == "r24.05"
    assert native_backends.release_branch("2.53.0") == "r24.12"
    assert native_backends.release_branch("2.54.0") == "r25.01"
    with pytest.raises(ValueError, match="must look like '2.51.0'"):
        native_backends.release_branch("24.10")


def test_native_backend_serves_resnet18_exactly_as_in_process(tmp_path, resnet18_pt):
    repo = tmp_path / "models"
    repository.add_model(repo, repository.build_config("resnet18", "pytorch_libtorch", *IO, max_batch_size=16),
                         resnet18_pt)
    x = np.random.default_rng(0).standard_normal((16, 3, 224, 224)).astype(np.float32)
    with TritonServer(repo, "local") as server:
        assert [(s.how, s.detail) for s in server.served] == [("native", "pytorch backend")]
        assert tc.connect(server.url).get_model_config("resnet18")["backend"] == "pytorch"
        http = tc.connect(server.url)
        for batch in (1, 4, 16):
            served = tc.infer(http, "resnet18", x[:batch])["OUTPUT__0"]
            np.testing.assert_array_equal(served, export.run_torchscript(resnet18_pt, x[:batch]))


def test_an_input_named_freely_is_served_in_config_order(tmp_path, resnet18_pt):
    """What pre-flight now says (a warning, not a refusal) is what the server does: it loads and binds by order."""
    repo = tmp_path / "models"
    config = repository.build_config("r18", "pytorch_libtorch", [repository.TensorSpec("image", "FP32", (-1, 3, 224, 224))],
                                     IO[1], max_batch_size=4)
    with pytest.warns(repository.ConfigWarning):
        repository.add_model(repo, config, resnet18_pt)
    x = np.random.default_rng(1).standard_normal((2, 3, 224, 224)).astype(np.float32)
    with TritonServer(repo, "local") as server:
        served = tc.infer(tc.connect(server.url), "r18", {"image": x})["OUTPUT__0"]
    np.testing.assert_array_equal(served, export.run_torchscript(resnet18_pt, x))


def test_dynamic_batching_forms_batches_on_the_native_backend(tmp_path, resnet18_pt):
    repo = tmp_path / "models"
    config = repository.build_config("resnet18", "pytorch_libtorch", *IO, max_batch_size=16,
                                     preferred_batch_sizes=[8], max_queue_delay_us=50_000)
    repository.add_model(repo, config, resnet18_pt)
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with TritonServer(repo, "local") as server:
        http = tc.connect(server.url)
        before = http.get_inference_statistics("resnet18")["model_stats"][0]  # the load-time warm-up counts too
        clients = [tc.connect(server.grpc_url, "grpc") for _ in range(8)]  # gRPC clients work from any thread
        with ThreadPoolExecutor(8) as pool:
            outs = list(pool.map(lambda c: tc.infer(c, "resnet18", x)["OUTPUT__0"], clients * 3))
        deadline = time.monotonic() + 5  # the server counts a request just after its response has gone out
        while True:
            after = http.get_inference_statistics("resnet18")["model_stats"][0]
            if after["inference_count"] - before["inference_count"] >= 24 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    # the same image in batches of different sizes: CPU kernels may sum in another order (last bits), same class
    for out in outs:
        np.testing.assert_allclose(out, outs[0], rtol=1e-4, atol=1e-4)
        assert out.argmax() == outs[0].argmax()
    inferences = after["inference_count"] - before["inference_count"]
    executions = after["execution_count"] - before["execution_count"]
    # 24 single-image requests run in fewer executions: the batcher merged them
    assert inferences == 24 and executions < 24, (before, after)


def test_torchscript_that_cannot_run_its_inputs_fails_to_load_and_is_named(tmp_path):
    import torch

    class Features(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.linear(x, torch.ones(1000, 8))  # wants [N, 8], not images

    path = tmp_path / "features.pt"
    torch.jit.trace(Features(), torch.zeros(1, 8)).save(str(path))
    repo = tmp_path / "models"
    repository.add_model(repo, repository.build_config("wrong_inputs", "pytorch_libtorch", *IO, max_batch_size=4),
                         path, check=False)
    started = time.monotonic()
    with pytest.raises(RepositoryError, match=r"model 'wrong_inputs': features.pt|model 'wrong_inputs': model.pt"):
        TritonServer(repo, "local").start()  # refused by the pre-flight check, before any server starts
    assert time.monotonic() - started < 5
    with pytest.raises(ServerError, match=r"model 'wrong_inputs'") as info:  # and by the server's load-time warm-up
        TritonServer(repo, "local", startup_timeout=60, preflight=False).start()
    assert "last" in str(info.value) and "lines of" in str(info.value)  # the log tail comes with it


def test_missing_sources_are_named_and_nothing_else_changes(tmp_path, monkeypatch, capsys):
    local = find_local_triton()
    before = sorted(p.name for p in (local.backend_dir / "pytorch").iterdir())
    monkeypatch.setenv("TRITON_SOURCE_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    args = ["pytorch", "--cache", str(tmp_path / "cache"), "--force"]
    assert native_backends.main(args) == 0  # setup goes on: TorchScript falls back to the stand-in, labelled
    assert native_backends.main([*args, "--strict"]) == 1
    err = capsys.readouterr().err
    assert "pytorch backend: NOT built" in err and "has neither common-r24.10.tar.gz nor common/" in err
    assert "served by the Python stand-in" in err
    assert sorted(p.name for p in (local.backend_dir / "pytorch").iterdir()) == before  # the built one is kept


# Triton's own ONNX Runtime backend (issue 33): built by `./tutorial setup` against the pinned wheel's library.

def test_setup_built_the_onnxruntime_backend_against_the_wheels_library():
    import subprocess

    local = find_local_triton()
    assert "onnxruntime" in local.backends, (
        f"no native ONNX Runtime backend in {local.backend_dir}: `./tutorial setup` builds it "
        "(python -m helpers.native_backends onnxruntime says why it could not)")
    stamp = json.loads((local.backend_dir / "onnxruntime" / native_backends.STAMP).read_text())
    version, library = native_backends.onnxruntime_library()
    assert stamp["key"]["onnxruntime"] == version and stamp["key"]["cuda"] == "cpu"
    assert "onnxruntime" in local.cpu_only_backends
    linked = subprocess.run(["ldd", str(local.backend_dir / "onnxruntime" / "libtriton_onnxruntime.so")],
                            capture_output=True, text=True).stdout
    found = next(line.split("=>")[1].split()[0] for line in linked.splitlines() if "libonnxruntime.so" in line)
    assert Path(found).resolve() == library.resolve()  # the very library `import onnxruntime` loads


def test_native_onnxruntime_backend_serves_exactly_as_in_process(tmp_path, tiny_onnx):
    repo = tmp_path / "models"
    repository.add_model(repo, repository.config_from_onnx("tiny", tiny_onnx, max_batch_size=8), tiny_onnx)
    x = np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32)
    with TritonServer(repo, "local") as server:
        assert [(s.how, s.detail) for s in server.served] == [("native", "onnxruntime backend")]
        http = tc.connect(server.url)
        assert http.get_model_config("tiny")["backend"] == "onnxruntime"
        for batch in (1, 3, 8):
            served = next(iter(tc.infer(http, "tiny", x[:batch]).values()))
            np.testing.assert_array_equal(served, export.run_onnx(tiny_onnx, x[:batch]))


def test_a_gpu_group_runs_on_the_cpu_where_the_backend_has_no_gpu_build(tmp_path, tiny_onnx):
    from helpers.standin import prepare_served_repository

    repo = tmp_path / "models"
    repository.add_model(repo, repository.config_from_onnx("tiny", tiny_onnx, max_batch_size=8,
                                                           instance_kind="KIND_GPU"), tiny_onnx)
    served = prepare_served_repository(repo, tmp_path / "mirror", ["onnxruntime"], cpu_only=["onnxruntime"])
    assert [s.how for s in served] == ["native"] and "KIND_GPU instance groups run as KIND_CPU" in served[0].detail
    mirrored = repository.read_config(tmp_path / "mirror" / "tiny")
    assert [repository.mc.ModelInstanceGroup.Kind.Name(g.kind) for g in mirrored.instance_group] == ["KIND_CPU"]
    assert repository.read_config(repo / "tiny").instance_group[0].kind == mirrored.instance_group[0].KIND_GPU  # source kept
    served = prepare_served_repository(repo, tmp_path / "mirror2", ["onnxruntime"])  # a GPU build: served as written
    assert served[0].detail == "onnxruntime backend" and (tmp_path / "mirror2" / "tiny").is_symlink()


def test_onnxruntime_headers_come_from_an_archive_whose_api_the_library_has(tmp_path, monkeypatch):
    import tarfile

    def archive(folder, version, api):
        include = tmp_path / "src" / f"onnxruntime-headers-{version}" / "include"
        include.mkdir(parents=True)
        (include / "onnxruntime_c_api.h").write_text(f"#define ORT_API_VERSION {api}\n")
        with tarfile.open(folder / f"onnxruntime-headers-{version}.tar.gz", "w:gz") as tar:
            tar.add(include.parent, arcname=include.parent.name)

    given = tmp_path / "given"
    given.mkdir()
    archive(given, "1.29.0", 29)
    monkeypatch.setenv("TRITON_SOURCE_DIR", str(given))
    found = native_backends.onnxruntime_headers(tmp_path / "cache", "1.32.0")
    assert native_backends._header_api_version(found) == 29
    # a library older than the header's API cannot serve its calls: the archive is skipped, GitHub is asked
    monkeypatch.setattr(native_backends, "ORT_GITHUB", "http://127.0.0.1:9")  # nothing listens: refused at once
    with pytest.raises(native_backends.BuildUnavailable, match="could not download .*v1.28.0.*TRITON_SOURCE_DIR"):
        native_backends.onnxruntime_headers(tmp_path / "cache2", "1.28.0")
