"""Measure in-process and served latency with warm-up and repeats, and compare model outputs."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd


def time_calls(fn: Callable[[], object], *, warmup: int = 5, repeats: int = 30, desc: str | None = None) -> np.ndarray:
    """Wall-clock milliseconds of `repeats` calls of fn, after `warmup` untimed calls."""
    from tqdm.auto import tqdm

    if warmup < 0 or repeats < 1:
        raise ValueError(f"warmup must be >= 0 and repeats >= 1; got {warmup} and {repeats}")
    for _ in range(warmup):
        fn()
    samples = []
    for _ in tqdm(range(repeats), desc=desc, disable=desc is None, leave=False):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return np.asarray(samples)


def summarize(samples: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """Mean, p50, p90, p99 and standard deviation (ms) per named set of samples."""
    rows = {name: {"n": len(s), "mean_ms": s.mean(), "p50_ms": np.percentile(s, 50), "p90_ms": np.percentile(s, 90),
                   "p99_ms": np.percentile(s, 99), "std_ms": s.std()} for name, s in samples.items()}
    return pd.DataFrame(rows).T.astype({"n": int})


def parity(reference: np.ndarray, other: np.ndarray) -> dict[str, float]:
    """Max absolute difference and top-1 agreement between two score batches of the same shape."""
    reference, other = np.asarray(reference, np.float32), np.asarray(other, np.float32)
    if reference.shape != other.shape:
        raise ValueError(f"outputs must have the same shape; got {reference.shape} and {other.shape}")
    return {"max_abs_diff": float(np.abs(reference - other).max()),
            "top1_agreement": float((reference.argmax(-1) == other.argmax(-1)).mean())}


def throughput(fn: Callable[[], object], batch_size: int, *, seconds: float = 5.0, warmup: int = 5) -> float:
    """Images per second of fn (one call = one batch) over about `seconds` of back-to-back calls."""
    for _ in range(warmup):
        fn()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        calls += 1
    return calls * batch_size / (time.perf_counter() - start)


def artifact_runner(path: str | Path, device: str = "cpu") -> Callable[[np.ndarray], np.ndarray]:
    """A function running an ONNX (ONNX Runtime, CPU) or TorchScript file in this process on one input batch."""
    path = Path(path)
    if path.suffix == ".onnx":
        from .export import onnx_session, run_onnx

        session = onnx_session(path)
        return lambda batch: run_onnx(session, batch)
    if path.suffix not in (".pt", ".ts"):
        raise ValueError(f"artifact must be .onnx, .pt or .ts to run in this process; got {path.name}")
    import torch

    module = torch.jit.load(str(path), map_location=device).eval()

    def run(batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(batch).to(device)).cpu().numpy()  # .cpu() waits for the GPU

    return run


def device_throughput(path: str | Path, device: str, sample: np.ndarray, batch_size: int, *, seconds: float = 3.0,
                      cuda_graph: bool = False) -> float:
    """Images per second of a TorchScript file in this process as the server's instance sees its work: the batch
    already on `device`, only the forward pass in the timed loop (the GPU synchronized once, at the end); with
    `cuda_graph`, the forward pass captured once as a CUDA graph and replayed (GPU only)."""
    import torch

    if cuda_graph and not str(device).startswith("cuda"):
        raise ValueError(f"cuda_graph needs a CUDA device; got {device!r}")
    module = torch.jit.load(str(path), map_location=device).eval()
    x = torch.from_numpy(np.ascontiguousarray(np.resize(sample, (batch_size, *sample.shape[1:])))).to(device)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    with torch.inference_mode():
        for _ in range(5):  # TorchScript specializes on its first runs at a new shape
            module(x)
        step = lambda: module(x)  # noqa: E731
        if cuda_graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # graphs are captured after warm-up on a side stream (PyTorch's recipe)
                for _ in range(3):
                    module(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                module(x)
            step = graph.replay
        sync()
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            step()
            calls += 1
        sync()
        return calls * batch_size / (time.perf_counter() - start)
