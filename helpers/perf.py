"""perf_analyzer: find it (or its NGC SDK image), build its command, run it with progress and parse its CSV."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import ngc

INSTALL_HINT = ("perf_analyzer not found. Run `./tutorial setup` (it unpacks the binary from tritonclient==2.50.0's "
                "wheel into the virtual environment), or set PERF_ANALYZER_BIN, or `pip install perf-analyzer` "
                "on glibc >= 2.38, or use the runtime='docker' path (nvcr.io/nvidia/tritonserver:<tag>-py3-sdk).")


class PerfAnalyzerNotFound(RuntimeError):
    """No perf_analyzer binary usable on this machine."""


class UnstableMeasurement(RuntimeError):
    """perf_analyzer could not get measurements within --stability-percentage in --max-trials windows."""


@dataclass
class PerfAnalyzer:
    """A perf_analyzer binary with the environment it needs (libcudart.so.12, libb64)."""

    binary: Path
    source: str
    env: dict[str, str] = field(default_factory=dict)


def _lib_dirs() -> list[str]:
    purelib = Path(sysconfig.get_paths()["purelib"])
    dirs = [purelib / "nvidia" / "cuda_runtime" / "lib", Path(sys.prefix) / "opt" / "perf_analyzer" / "lib"]
    return [str(d) for d in dirs if d.is_dir()]


def find_perf_analyzer() -> PerfAnalyzer:
    """$PERF_ANALYZER_BIN, perf_analyzer on PATH, tritonclient 2.50.0's binary unpacked by setup, or the pip package."""
    libs = os.pathsep.join(_lib_dirs() + [p for p in [os.environ.get("LD_LIBRARY_PATH", "")] if p])
    env = {"LD_LIBRARY_PATH": libs}
    if os.environ.get("PERF_ANALYZER_BIN"):
        path = Path(os.environ["PERF_ANALYZER_BIN"])
        if not path.exists():
            raise PerfAnalyzerNotFound(f"PERF_ANALYZER_BIN points to {path}, which does not exist")
        return PerfAnalyzer(path, "$PERF_ANALYZER_BIN", env)
    unpacked = Path(sys.prefix) / "opt" / "perf_analyzer" / "bin" / "perf_analyzer"
    on_path = shutil.which("perf_analyzer")
    for path, source in ((on_path, "perf_analyzer on PATH"), (unpacked, "tritonclient 2.50.0 wheel, unpacked by setup")):
        if path and Path(path).exists():
            ok = subprocess.run([str(path), "--version"], capture_output=True, text=True, env={**os.environ, **env})
            if "error while loading shared libraries" in ok.stderr:
                missing = re.search(r"loading shared libraries: (\S+?):", ok.stderr)
                raise PerfAnalyzerNotFound(f"{path} cannot start: {missing.group(1) if missing else ok.stderr.strip()} "
                                           "is missing; `./tutorial setup` installs it into the environment")
            return PerfAnalyzer(Path(path), source, env)
    raise PerfAnalyzerNotFound(INSTALL_HINT)


def require_perf_analyzer() -> PerfAnalyzer:
    """find_perf_analyzer, or stop the notebook with the one instruction that fixes it (no stack trace)."""
    try:
        return find_perf_analyzer()
    except PerfAnalyzerNotFound as exc:
        raise SystemExit(str(exc)) from None


def perf_args(model: str, url: str, *, protocol: str = "grpc", concurrency: str = "1:16:1", batch_size: int = 1,
              measurement_interval_ms: int = 5000, max_trials: int = 10, stability_percentage: int = 10,
              shared_memory: str = "none", csv_file: str | None = None, percentile: int | None = None) -> list[str]:
    """perf_analyzer's arguments (without the binary) for a concurrency sweep `start:end:step`."""
    if protocol not in ("http", "grpc"):
        raise ValueError(f"protocol must be 'http' or 'grpc'; got {protocol!r}")
    if shared_memory not in ("none", "system", "cuda"):
        raise ValueError(f"shared_memory must be none, system or cuda; got {shared_memory!r}")
    if not re.fullmatch(r"\d+(:\d+(:\d+)?)?", concurrency):
        raise ValueError(f"concurrency must look like '1:16:1' (start:end:step); got {concurrency!r}")
    args = ["-m", model, "-u", url, "-i", protocol, "-b", str(batch_size), "--concurrency-range", concurrency,
            "--measurement-interval", str(measurement_interval_ms), "--max-trials", str(max_trials),
            "--stability-percentage", str(stability_percentage), "--shared-memory", shared_memory]
    if percentile:
        args += ["--percentile", str(percentile)]
    if csv_file:
        args += ["-f", csv_file]
    return args


def docker_command(args: list[str], tag: str = ngc.NGC_TAG, results_dir: str | Path | None = None) -> list[str]:
    """`docker run` of perf_analyzer from the SDK image (the plain tritonserver image does not ship it)."""
    volumes = {results_dir: "/results"} if results_dir else None
    return ngc.docker_run(ngc.image("sdk", tag), ["perf_analyzer", *args], network="host", gpus=None,
                          volumes=volumes, workdir="/results" if results_dir else None, extra=["--ipc=host"])


def concurrency_levels(concurrency: str) -> list[int]:
    """The concurrency values perf_analyzer will visit for `start:end:step`."""
    parts = [int(p) for p in concurrency.split(":")]
    start, end, step = parts[0], parts[1] if len(parts) > 1 else parts[0], parts[2] if len(parts) > 2 else 1
    return list(range(start, end + 1, step))


def level_command(model: str, url: str, csv_file: str | Path, docker_tag: str | None = None,
                  **kwargs) -> tuple[list[str], dict[str, str]]:
    """The exact command (and extra environment) that measures one concurrency level into `csv_file`: perf_analyzer
    here, or in the SDK image with the CSV's folder mounted at /results so the CSV outlives the container."""
    csv_file = Path(csv_file).resolve()
    csv_file.parent.mkdir(parents=True, exist_ok=True)
    if docker_tag:
        args = perf_args(model, url, csv_file=f"/results/{csv_file.name}", **kwargs)
        return docker_command(args, docker_tag, results_dir=csv_file.parent), {}
    pa = find_perf_analyzer()
    return [str(pa.binary), *perf_args(model, url, csv_file=str(csv_file), **kwargs)], pa.env


def _run_level(model: str, url: str, csv_file: Path, docker_tag: str | None, kwargs: dict) -> list[str]:
    """One perf_analyzer invocation; returns its output lines, raises when it fails or never stabilizes."""
    command, env = level_command(model, url, csv_file, docker_tag, **kwargs)
    if docker_tag:
        ngc.ensure_image(ngc.image("sdk", docker_tag))
    out = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, **env})
    lines = out.stdout.splitlines(keepends=True)
    if any("Failed to obtain stable measurement" in ln for ln in lines):
        raise UnstableMeasurement(f"perf_analyzer found no stable measurement for {model!r} at concurrency "
                                  f"{kwargs.get('concurrency')}: lengthen --measurement-interval or loosen "
                                  "--stability-percentage")
    if out.returncode != 0 or not csv_file.exists() or any(re.search(r"had error|Failed to|failed", ln) for ln in lines):
        raise RuntimeError(f"perf_analyzer failed (exit {out.returncode}) for model {model!r}; command:\n"
                           f"  {ngc.as_shell(command)}\n" + "".join(lines[-25:]))
    return lines


def run(model: str, url: str, csv_file: str | Path, *, concurrency: str = "1:16:1", docker_tag: str | None = None,
        progress: bool = True, **kwargs) -> pd.DataFrame:
    """Measure each concurrency level of `start:end:step` with perf_analyzer, with a progress bar.

    Returns one row per level (perf_analyzer's CSV, parsed); a level that never stabilizes is kept with
    stable=False and no numbers, so one noisy level does not lose the sweep. Raises when no level is stable.
    Each level's output goes to <csv>.log; with docker_tag, perf_analyzer runs from the NGC SDK image.
    """
    from tqdm.auto import tqdm

    csv_file = Path(csv_file).resolve()
    csv_file.parent.mkdir(parents=True, exist_ok=True)
    rows, log = [], []
    for level in tqdm(concurrency_levels(concurrency), desc=f"perf_analyzer {model}", unit="level",
                      disable=not progress):
        level_csv = csv_file.with_name(f"{csv_file.stem}_c{level}.csv")
        try:
            log += _run_level(model, url, level_csv, docker_tag, {**kwargs, "concurrency": str(level)})
            rows.append(parse_csv(level_csv).assign(stable=True))
            level_csv.unlink()
        except UnstableMeasurement as exc:
            log.append(f"{exc}\n")
            rows.append(pd.DataFrame({"concurrency": [level], "stable": [False]}))
    csv_file.with_suffix(".log").write_text("".join(log))
    table = pd.concat(rows, ignore_index=True)
    if not table["stable"].any():
        raise UnstableMeasurement(f"no concurrency level of {concurrency} was stable for {model!r}; "
                                  f"see {csv_file.with_suffix('.log')}")
    table.to_csv(csv_file, index=False)
    return table


def measure_level(model: str, url: str, csv_file: str | Path, concurrency: int, *, docker_tag: str | None = None,
                  **kwargs) -> dict:
    """One concurrency level as one row; a setting that never stabilizes, or whose perf_analyzer dies, comes back as
    stable=False with no numbers and the reason in `error`, so one bad setting does not lose the others."""
    try:
        table = run(model, url, csv_file, concurrency=str(concurrency), docker_tag=docker_tag, progress=False, **kwargs)
        return {**table.iloc[0].to_dict(), "error": ""}
    except (UnstableMeasurement, RuntimeError) as exc:
        reason = str(exc).splitlines()[0]
        print(f"{model} at concurrency {concurrency}: {reason}")
        return {"concurrency": concurrency, "stable": False, "throughput": float("nan"), "p99_ms": float("nan"),
                "error": reason}


def best(table: pd.DataFrame, p99_budget_ms: float | None = None) -> pd.Series | None:
    """The stable row with the highest throughput (within the p99 budget when one is given), or None."""
    ok = table[table["stable"].astype(bool)]
    if p99_budget_ms is not None:
        ok = ok[ok["p99_ms"] <= p99_budget_ms]
    return None if ok.empty else ok.loc[ok["throughput"].idxmax()]


_COLUMNS = {"Concurrency": "concurrency", "Inferences/Second": "throughput", "Client Send": "client_send_us",
            "Network+Server Send/Recv": "network_us", "Server Queue": "queue_us",
            "Server Compute Input": "compute_input_us", "Server Compute Infer": "compute_infer_us",
            "Server Compute Output": "compute_output_us", "Client Recv": "client_recv_us",
            "p50 latency": "p50_us", "p90 latency": "p90_us", "p95 latency": "p95_us", "p99 latency": "p99_us",
            "Avg latency": "avg_us"}


def parse_csv(path: str | Path) -> pd.DataFrame:
    """perf_analyzer's -f CSV (or a sweep that `run` saved) as a table: infer/s, latencies in ms, queue/compute split."""
    raw = pd.read_csv(path)
    if {"concurrency", "throughput", "stable"} <= set(raw.columns):  # already parsed and saved by run()
        return raw
    missing = [c for c in ("Concurrency", "Inferences/Second", "p99 latency") if c not in raw.columns]
    if missing:
        raise ValueError(f"{path} is not a perf_analyzer CSV: columns {missing} missing; found {list(raw.columns)}")
    df = raw.rename(columns=_COLUMNS)[[c for c in _COLUMNS.values() if c in raw.rename(columns=_COLUMNS).columns]]
    for col in [c for c in df.columns if c.endswith("_us")]:
        df[col.replace("_us", "_ms")] = df.pop(col) / 1000.0
    df["compute_ms"] = df[[c for c in ("compute_input_ms", "compute_infer_ms", "compute_output_ms") if c in df]].sum(axis=1)
    return df.sort_values("concurrency").reset_index(drop=True)
