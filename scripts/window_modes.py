"""perf_analyzer's two window modes on one shared-memory row: do count windows report the rate time windows do?

    python scripts/window_modes.py [--model resnet18_pytorch] [--models-dir models] [--concurrency 16]
                                   [--requests 2000] [--interval-ms 5000] [--runs 3] [--stability-percentage 10]
                                   [--shared-memory system]
                                   [--out runs/window_modes.csv]

One local server; the row measured `--runs` times in each mode, in turns (perf.alternate), with the tensors in shared
memory (nothing kept per request, so the windows' sizes are free). Count windows end when `--requests` requests have
completed; time windows last `--interval-ms`. Prints each mode's median rate and range, and how far apart the medians
are. The series measures in count windows (helpers/perf.py, `window_args`); this is the check that the choice does not
move the rate. Needs the server `./tutorial setup` built (or $TRITON_SERVER_BIN) and a model notebook 10 wrote.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from helpers import perf  # noqa: E402
from helpers.server import TritonServer  # noqa: E402


def compare(model: str, models_dir: Path, concurrency: int, requests: int, interval_ms: int, runs: int,
            shared_memory: str, out: Path, stability_percentage: int = 10) -> pd.DataFrame:
    """Both window modes measured `runs` times each in turns on one server; one row per measurement."""
    common = dict(protocol="grpc", shared_memory=shared_memory, max_trials=10, stability_percentage=stability_percentage,
                  warmup_requests=requests)
    modes = {"count windows": dict(measurement_request_count=requests),
             "time windows": dict(measurement_interval_ms=interval_ms)}
    rows = []
    out.parent.mkdir(parents=True, exist_ok=True)
    with TritonServer(models_dir, "local", models=[model], log_file=out.with_suffix(".server.log")) as server:
        def measure(mode: str) -> dict:
            n = sum(r["mode"] == mode for r in rows) + 1
            csv = out.with_name(f"{out.stem}_{mode.split()[0]}_{n}.csv")
            row = perf.measure_level(model, server.grpc_url, csv, concurrency, **common, **modes[mode])
            rows.append({"mode": mode, "run": n, **row})
            return row

        perf.alternate(measure, list(modes), runs=runs)
    table = pd.DataFrame(rows)
    table.to_csv(out, index=False)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18_pytorch")
    parser.add_argument("--models-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=2000, help="requests per count window")
    parser.add_argument("--interval-ms", type=int, default=5000, help="length of a time window (perf_analyzer's default)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stability-percentage", type=int, default=10)
    parser.add_argument("--shared-memory", default="system", choices=["system", "cuda"])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "window_modes.csv")
    ns = parser.parse_args()
    table = compare(ns.model, ns.models_dir, ns.concurrency, ns.requests, ns.interval_ms, ns.runs, ns.shared_memory,
                    ns.out, ns.stability_percentage)
    print(table.reindex(columns=["mode", "run", "stable", "throughput", "p50_ms", "p99_ms", "error"]).round(2)
          .to_string(index=False))
    ok = table[table["stable"].astype(bool)]
    medians = ok.groupby("mode")["throughput"].median()
    for mode, got in ok.groupby("mode")["throughput"]:
        print(f"{mode}: median {got.median():.1f} infer/s, range {got.min():.1f}-{got.max():.1f} over {len(got)} stable runs")
    if len(medians) == 2:
        count, time_ = medians["count windows"], medians["time windows"]
        print(f"count windows / time windows: {count / time_:.3f} ({ns.model}, concurrency {ns.concurrency}, "
              f"{ns.shared_memory} shared memory, {ns.requests} requests vs {ns.interval_ms} ms per window)")
    else:
        print("no comparison: a mode had no stable run")


if __name__ == "__main__":
    main()
