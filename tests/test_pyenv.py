"""The environment Python-backend models run in: numpy 2 against Triton 2.51's stub refused before start, an
environment with numpy 1.x made offline, and a reader's Python model served with its bytes intact, loaded once."""
from __future__ import annotations

import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import triton_processes
from helpers import pyenv, repository
from helpers.runtime import find_local_triton
from helpers.server import TritonServer

ROOT = Path(__file__).resolve().parents[1]


def _stub() -> Path:
    local = find_local_triton()
    assert local is not None, "setup installs a local Triton server"
    return local.backend_dir / "python" / "triton_python_backend_stub"


def test_the_local_stub_predates_numpy2_and_a_newer_one_is_told_apart(tmp_path):
    assert not pyenv.stub_handles_numpy2(_stub())  # r24.10: pybind11 2.10
    newer = tmp_path / "stub"
    newer.write_bytes(b"\0numpy.core.multiarray\0numpy._core\0")
    assert pyenv.stub_handles_numpy2(newer)


def test_numpy1_pin_is_the_series_pin():
    pins = (ROOT / "requirements.txt").read_text().splitlines()
    assert pyenv.NUMPY1 in pins


def _fake_env(path: Path, numpy_version: str) -> Path:
    (path / "bin").mkdir(parents=True)
    python = path / "bin" / "python"
    python.write_text(f"#!/bin/sh\necho {numpy_version}\n")
    python.chmod(0o755)
    return path


def test_numpy2_environment_is_refused_before_the_server_starts(tiny_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORIAL_WITHOUT_BACKENDS", "onnxruntime")  # the ONNX model by the Python-backend stand-in
    monkeypatch.setenv(pyenv.ENV_VAR, str(_fake_env(tmp_path / "env2", "2.1.3")))
    server = TritonServer(tiny_repo, "local")
    with pytest.raises(RuntimeError, match=r"has numpy 2\.1\.3.*inputs arrive as 0xff bytes.*helpers\.pyenv"):
        server.start()
    assert not server.running and not server.workdir.exists()
    assert not triton_processes()
    monkeypatch.setenv(pyenv.ENV_VAR, str(tmp_path / "env1"))
    _fake_env(tmp_path / "env1", "1.26.4")
    assert pyenv.environment_problem(_stub().parent.parent) is None


def _fake_numpy_wheel(folder: Path, version: str) -> Path:
    folder.mkdir()
    wheel = folder / f"numpy-{version}-py3-none-any.whl"
    info = f"numpy-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("numpy/__init__.py", f"__version__ = {version!r}\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: numpy\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return folder


def test_make_env_offline_imports_its_own_numpy_and_this_environments_packages(tmp_path):
    wheels = _fake_numpy_wheel(tmp_path / "wheels", "1.26.4")
    env = pyenv.make_env(tmp_path / "env", wheels)
    assert pyenv.numpy_version(env) == "1.26.4"
    import subprocess

    seen = subprocess.run([str(env / "bin" / "python"), "-c", "import pytest, psutil, yaml; print(pytest.__file__)"],
                          capture_output=True, text=True, cwd=ROOT)
    assert seen.returncode == 0, seen.stderr
    with pytest.raises(RuntimeError, match="pip could not install numpy==1.26.4"):
        pyenv.make_env(tmp_path / "env3", tmp_path / "empty")


def test_a_readers_python_model_gets_its_bytes_and_loads_once(tmp_path):
    import tritonclient.grpc as grpcclient

    repo = tmp_path / "models"
    config = """name: "echo"
backend: "python"
max_batch_size: 4
input [ { name: "DATA" data_type: TYPE_UINT8 dims: [ -1 ] } ]
output [ { name: "SUMS" data_type: TYPE_INT64 dims: [ 2 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
    repository.add_model_text(repo, config)
    (repo / "echo" / "1").mkdir(exist_ok=True)
    (repo / "echo" / "1" / "model.py").write_text(textwrap.dedent('''
        import numpy as np
        import triton_python_backend_utils as pb_utils


        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for r in requests:
                    data = pb_utils.get_input_tensor_by_name(r, "DATA").as_numpy()
                    sums = np.array([[data.shape[-1], int(data.astype(np.int64).sum())]], np.int64)
                    out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUMS", sums)]))
                return out
        '''))
    payload = np.frombuffer(bytes.fromhex("ffd8ffe0") + bytes(range(256)) * 4, np.uint8)[None, :]
    with TritonServer(repo, "local", poll_secs=1) as server:
        assert any((repo / "echo" / "1" / "__pycache__").iterdir())  # compiled before start
        assert [str(s) for s in server.served] == [f"echo: native (python backend, EXECUTION_ENV_PATH={sys.prefix})"]
        client = grpcclient.InferenceServerClient(server.grpc_url)
        request = grpcclient.InferInput("DATA", list(payload.shape), "UINT8")
        request.set_data_from_numpy(payload)
        assert client.infer("echo", [request]).as_numpy("SUMS").tolist() == [[payload.size, int(payload.sum())]]
        time.sleep(3)  # three polls of the repository
        log = server.log_file.read_text()
    assert log.count('loading: echo:1') == 1, log[-3000:]
