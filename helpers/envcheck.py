"""What this machine offers the series: package versions, GPU, Docker, Triton server and backends, perf_analyzer."""
from __future__ import annotations

import platform
import sys
from importlib import metadata

import pandas as pd

from . import perf
from .runtime import docker_engine, find_local_triton, nvidia_gpu

PACKAGES = ("numpy", "protobuf", "tensorflow-cpu", "keras", "tf2onnx", "onnx", "onnxruntime", "torch", "torchvision",
            "tritonclient", "nvidia-pytriton", "scikit-image", "papermill")


def package_versions() -> pd.DataFrame:
    """Installed version of each package the series pins ('missing' when absent)."""
    rows = []
    for name in PACKAGES:
        try:
            rows.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            rows.append((name, "missing"))
    return pd.DataFrame(rows, columns=["package", "version"]).set_index("package")


def machine() -> pd.DataFrame:
    """Python, OS, GPU, Docker, local Triton server with its backends, and perf_analyzer, one row each."""
    gpu_ok, gpu = nvidia_gpu()
    docker_ok, docker = docker_engine()
    try:
        local = find_local_triton()
        triton = f"{local.binary} ({local.source})" if local else "none found"
        backends = ", ".join(local.backends) if local else "-"
    except FileNotFoundError as exc:
        triton, backends = f"unusable: {exc}", "-"
    try:
        pa = perf.find_perf_analyzer()
        perf_analyzer = f"{pa.binary} ({pa.source})"
    except perf.PerfAnalyzerNotFound as exc:
        perf_analyzer = str(exc)
    try:
        import torch

        cuda = f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}"
    except ImportError as exc:
        cuda = f"torch not importable: {exc}"
    rows = [("python", sys.version.split()[0]), ("platform", platform.platform()), ("glibc", platform.libc_ver()[1]),
            ("NVIDIA GPU", gpu if gpu_ok else f"no ({gpu})"), ("PyTorch CUDA", cuda),
            ("Docker engine", docker if docker_ok else f"no ({docker})"), ("local Triton server", triton),
            ("local Triton backends", backends), ("perf_analyzer", perf_analyzer)]
    return pd.DataFrame(rows, columns=["item", "found"]).set_index("item")
