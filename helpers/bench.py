"""Measure in-process and served latency with warm-up and repeats, and compare model outputs."""
from __future__ import annotations

import contextlib
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


def _forward_step(path: str | Path, device: str, x, cuda_graph: bool) -> Callable[[], object]:
    """One instance's forward pass of a TorchScript file on `x`: warmed up, and with `cuda_graph` captured once and
    replayed; call it on the CUDA stream it will run on."""
    import torch

    module = torch.jit.load(str(path), map_location=device).eval()
    for _ in range(5):  # TorchScript specializes on its first runs at a new shape
        module(x)
    if not cuda_graph:
        return lambda: module(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # graphs are captured after warm-up on a side stream (PyTorch's recipe)
        for _ in range(3):
            module(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        module(x)
    return graph.replay


def device_throughput(path: str | Path, device: str, sample: np.ndarray, batch_size: int, *, seconds: float = 3.0,
                      cuda_graph: bool = False, streams: int = 1) -> float:
    """Images per second of a TorchScript file in this process as the server's instances see their work: the batch
    already on `device`, only the forward pass in the timed loop (the GPU synchronized once, at the end); with
    `cuda_graph`, the forward pass captured once as a CUDA graph and replayed (GPU, one stream); with `streams` > 1, that
    many copies of the model, each in its own thread on its own CUDA stream, as Triton runs one batch per instance
    at once (the images per second of all of them together)."""
    import threading

    import torch

    if cuda_graph and not str(device).startswith("cuda"):
        raise ValueError(f"cuda_graph needs a CUDA device; got {device!r}")
    if streams < 1:
        raise ValueError(f"streams must be at least 1 (one per model instance); got {streams}")
    if cuda_graph and streams > 1:  # H200, PyTorch 2.11: replaying captured TorchScript graphs from threads crashed
        raise ValueError(f"cuda_graph replays one graph on one stream; got streams={streams}")
    on_gpu = str(device).startswith("cuda")
    x = torch.from_numpy(np.ascontiguousarray(np.resize(sample, (batch_size, *sample.shape[1:])))).to(device)
    lanes = [torch.cuda.Stream() if on_gpu else None for _ in range(streams)]
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    steps = []
    with torch.inference_mode():
        for lane in lanes:
            with torch.cuda.stream(lane) if lane is not None else contextlib.nullcontext():
                steps.append(_forward_step(path, device, x, cuda_graph))
    sync()
    calls, ready = [0] * streams, threading.Barrier(streams + 1)

    def loop(i: int) -> None:
        with torch.inference_mode(), torch.cuda.stream(lanes[i]) if on_gpu else contextlib.nullcontext():
            ready.wait()
            begun = time.perf_counter()
            while time.perf_counter() - begun < seconds:
                steps[i]()
                calls[i] += 1

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(streams)]
    for thread in threads:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    sync()
    return sum(calls) * batch_size / (time.perf_counter() - start)
