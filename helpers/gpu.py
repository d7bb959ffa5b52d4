"""GPU utilization and memory sampled while a load runs: `nvidia-smi --query-gpu=... -lms 200` in the background."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

FIELDS = ["timestamp", "index", "utilization.gpu", "memory.used", "memory.total"]
COLUMNS = ["timestamp", "gpu", "util_pct", "memory_used_mb", "memory_total_mb"]


def command(interval_ms: int = 200) -> list[str]:
    """The nvidia-smi command the sampler runs: one CSV line per GPU every `interval_ms`, without header or units
    (nvidia-smi --help-query-gpu lists the fields)."""
    return ["nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits", "-lms", str(interval_ms)]


def parse(text: str) -> pd.DataFrame:
    """nvidia-smi's CSV lines as a table (gpu, util_pct, memory_used_mb, memory_total_mb, seconds since the first
    sample); a field nvidia-smi cannot read ("[N/A]", "[Not Supported]") is left empty, not guessed."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(COLUMNS):
            continue  # a line cut off when the sampler was stopped
        rows.append(dict(zip(COLUMNS, parts)))
    table = pd.DataFrame(rows, columns=COLUMNS)
    for column in COLUMNS[1:]:
        table[column] = pd.to_numeric(table[column], errors="coerce")
    stamps = pd.to_datetime(table["timestamp"], format="%Y/%m/%d %H:%M:%S.%f", errors="coerce")
    table["seconds"] = (stamps - stamps.min()).dt.total_seconds()
    return table.drop(columns="timestamp")


class Sampler:
    """`with Sampler() as gpu: <load>`, then gpu.table (one row per GPU per sample) and gpu.summary(); on a machine
    without nvidia-smi, `available` is False and `reason` says so (no numbers are made up)."""

    def __init__(self, interval_ms: int = 200, nvidia_smi: str | None = None):
        self.interval_ms = interval_ms
        self.binary = nvidia_smi or shutil.which("nvidia-smi")
        self.table = pd.DataFrame(columns=[*COLUMNS[1:], "seconds"])
        self.reason = "" if self.binary else "no GPU to sample on this machine (nvidia-smi is not on PATH)"
        self._proc: subprocess.Popen | None = None
        self._out = None

    @property
    def available(self) -> bool:
        return not self.reason

    def __enter__(self) -> Sampler:
        if self.binary:
            self._out = tempfile.TemporaryFile("w+")
            try:
                self._proc = subprocess.Popen([self.binary, *command(self.interval_ms)[1:]], stdout=self._out,
                                              stderr=subprocess.PIPE, text=True)
            except OSError as exc:
                self.reason = f"nvidia-smi could not start: {exc}"
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is None:
            return
        time.sleep(self.interval_ms / 1000)  # one more sample after the load
        self._proc.terminate()
        try:
            _, err = self._proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            _, err = self._proc.communicate()
        self._out.seek(0)
        self.table = parse(self._out.read())
        self._out.close()
        if self.table.empty:
            self.reason = f"nvidia-smi gave no samples (exit {self._proc.returncode}): {err.strip()[:200]}"

    def per_gpu(self) -> pd.DataFrame:
        """Mean and peak utilization and peak memory per GPU over the samples."""
        if not self.available:
            return pd.DataFrame(columns=["gpu", "samples", "util_mean_pct", "util_max_pct", "memory_max_mb"])
        return (self.table.groupby("gpu").agg(samples=("util_pct", "size"), util_mean_pct=("util_pct", "mean"),
                                              util_max_pct=("util_pct", "max"),
                                              memory_max_mb=("memory_used_mb", "max"),
                                              memory_total_mb=("memory_total_mb", "max"))
                .round(1).reset_index())

    def summary(self) -> str:
        """One line per GPU (mean / peak utilization, peak memory), or the one line saying why there is none."""
        if not self.available:
            return self.reason
        return "\n".join(f"GPU {int(r.gpu)}: utilization mean {r.util_mean_pct:.0f} %, peak {r.util_max_pct:.0f} %; "
                         f"memory used up to {r.memory_max_mb:,.0f} of {r.memory_total_mb:,.0f} MiB "
                         f"({int(r.samples)} samples, every {self.interval_ms} ms)" for r in self.per_gpu().itertuples())

    def columns(self) -> dict[str, float]:
        """Mean utilization and peak memory over all GPUs, for a row of a results table (NaN without a GPU)."""
        if not self.available:
            return {"gpu_util_pct": float("nan"), "gpu_memory_mb": float("nan")}
        per = self.per_gpu()
        return {"gpu_util_pct": round(float(per["util_mean_pct"].max()), 1),
                "gpu_memory_mb": round(float(per["memory_max_mb"].sum()), 1)}


def save(sampler: Sampler, path: str | Path) -> None:
    """The samples as CSV (nothing written without a GPU)."""
    if sampler.available:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        sampler.table.to_csv(path, index=False)
