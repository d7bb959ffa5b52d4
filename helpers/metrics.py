"""Triton's Prometheus metrics endpoint (`/metrics` on the metrics port): read it, and what happened between two reads.

https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/metrics.html
"""
from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request

# counters per model (label model="..."), summed over versions; durations are cumulative microseconds
COUNTERS = ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
            "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
            "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
            "nv_inference_compute_output_duration_us")
_LINE = re.compile(r'^(\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$')


def parse(text: str) -> dict[tuple[str, str], float]:
    """Prometheus text -> {(metric, model): value} for the per-model counters (other series are left out)."""
    values: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match or match.group(1) not in COUNTERS:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
        key = (match.group(1), labels.get("model", ""))
        values[key] = values.get(key, 0.0) + float(match.group(3))
    return values


def scrape(metrics_url: str, timeout: float = 5.0) -> dict[tuple[str, str], float]:
    """Read the server's counters now; `metrics_url` is host:port of the metrics endpoint (default port 8002)."""
    url = metrics_url if metrics_url.startswith("http") else f"http://{metrics_url}/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return parse(resp.read().decode())


def between(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float], model: str) -> dict[str, float]:
    """What the server did for `model` between two scrapes: requests, executions, the average batch it executed,
    and queue / compute time per request in ms (the numbers an autoscaler or a dashboard would read)."""
    delta = {name: after.get((name, model), 0.0) - before.get((name, model), 0.0) for name in COUNTERS}
    requests, executions = delta["nv_inference_request_success"], delta["nv_inference_exec_count"]
    per_request = (lambda us: us / requests / 1000.0) if requests else (lambda us: float("nan"))
    return {
        "requests": requests,
        "executions": executions,
        "avg_batch": delta["nv_inference_count"] / executions if executions else float("nan"),
        "queue_ms_per_request": per_request(delta["nv_inference_queue_duration_us"]),
        "compute_ms_per_request": per_request(delta["nv_inference_compute_input_duration_us"]
                                              + delta["nv_inference_compute_infer_duration_us"]
                                              + delta["nv_inference_compute_output_duration_us"]),
        "request_ms": per_request(delta["nv_inference_request_duration_us"]),
    }


def executions(url: str, model: str, timeout: float = 5.0) -> tuple[int, int, int]:
    """(executions, their compute-infer ns, their compute input + infer + output ns: the instance's time) of `model` so
    far, over its versions and batch sizes, from the statistics extension (GET /v2/models/<model>/stats on the HTTP
    endpoint `url`): each execution counted once, whatever its batch.
    https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_statistics.md"""
    base = url if url.startswith("http") else f"http://{url}"
    with urllib.request.urlopen(f"{base}/v2/models/{urllib.parse.quote(model)}/stats", timeout=timeout) as resp:
        stats = json.load(resp)
    batches = [b for version in stats.get("model_stats", []) for b in version.get("batch_stats", [])]
    return (sum(int(b["compute_infer"]["count"]) for b in batches),
            sum(int(b["compute_infer"]["ns"]) for b in batches),
            sum(int(b.get(part, {}).get("ns", 0)) for b in batches
                for part in ("compute_input", "compute_infer", "compute_output")))


def per_execution_ms(before: tuple[int, int, int], after: tuple[int, int, int], whole: bool = False) -> float:
    """Mean compute-infer time of one execution (ms; `whole`: compute input + infer + output) between two `executions`
    reads, each batch counted once; the metrics' per-request time counts a batch once per request in it."""
    part = 2 if whole else 1
    runs, ns = after[0] - before[0], after[part] - before[part]
    return ns / runs / 1e6 if runs > 0 else float("nan")
