"""How the runtime is chosen, with Docker and the GPU probes replaced."""
from __future__ import annotations

import pytest

from helpers import runtime


@pytest.fixture
def probes(monkeypatch):
    def set_probes(docker: bool, gpu: bool):
        monkeypatch.setattr(runtime, "docker_engine", lambda: (docker, "engine 28.2" if docker else "no engine answers"))
        monkeypatch.setattr(runtime, "nvidia_gpu", lambda: (gpu, "NVIDIA H200" if gpu else "nvidia-smi not found"))
        monkeypatch.setattr(runtime, "container_toolkit", lambda: (True, "NVIDIA Container Toolkit (test)"))
        monkeypatch.setattr(runtime, "docker_rootless", lambda: (False, "not rootless"))
        monkeypatch.setattr(runtime, "gpu_properties", lambda: [{"index": "0", "name": "NVIDIA H200",
                                                                  "compute_cap": "9.0", "driver": "580.1"}])
    return set_probes


def test_auto_picks_docker_only_with_docker_and_gpu(probes):
    probes(docker=True, gpu=True)
    choice = runtime.choose_runtime("auto")
    assert choice.name == "docker" and "H200" in choice.reason
    probes(docker=True, gpu=False)
    choice = runtime.choose_runtime("auto")
    assert choice.name == "local" and "nvidia-smi not found" in choice.reason and choice.local is not None


def test_docker_asked_for_without_engine_is_refused(probes):
    probes(docker=False, gpu=True)
    with pytest.raises(RuntimeError, match="runtime='docker' needs a Docker engine; no engine answers"):
        runtime.choose_runtime("docker")
    with pytest.raises(ValueError, match="runtime must be one of"):
        runtime.choose_runtime("kubernetes")


def test_local_server_found_with_python_backend(monkeypatch):
    monkeypatch.delenv("TRITON_SERVER_BIN", raising=False)
    local = runtime.find_local_triton()
    assert local is not None and local.binary.exists() and "python" in local.backends
    monkeypatch.setenv("TRITON_SERVER_BIN", "/nonexistent/tritonserver")
    with pytest.raises(FileNotFoundError, match="TRITON_SERVER_BIN points to /nonexistent/tritonserver"):
        runtime.find_local_triton()
