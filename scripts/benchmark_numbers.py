"""The measured sections of docs/benchmarks.md, written from docs/data so no number there is typed by hand.

    python scripts/benchmark_numbers.py           # print the generated sections
    python scripts/benchmark_numbers.py --write   # replace them in docs/benchmarks.md

A test (tests/test_benchmark_numbers.py) fails when docs/benchmarks.md and docs/data disagree.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- generated from docs/data by scripts/benchmark_numbers.py: {name} -->", "<!-- end of generated section -->"


def section_14() -> str:
    """Notebook 14 on the H200: every variant at c=16, the saturation sweep, the knee against in-process."""
    results = json.loads((DATA / "h200_14_results.json").read_text())
    variants = pd.read_csv(DATA / "h200_14_variants.csv")
    sweep = pd.read_csv(DATA / "h200_14_saturation.csv")
    memory = json.loads((DATA / "h200_11_results.json").read_text())["memory_peak_mb"]
    base = variants[variants["variant"].str.startswith("article baseline")].iloc[0]
    ok = variants[variants["stable"].astype(bool)]
    best = ok.loc[ok["throughput"].idxmax()]
    knee, inproc = results["knee"], {int(k): v for k, v in results["inprocess"].items()}
    rows = ["| variant | bytes/request | infer/s | p99 (ms) | x baseline | perf_analyzer peak (MB) | server batch | "
            "queue / compute per request (ms) |", "|---|---|---|---|---|---|---|---|"]
    for _, r in variants.iterrows():
        if not r["stable"]:
            reason = results["errors"].get(r["variant"], "")
            short = "passed the memory limit and was stopped" if "memory limit" in reason else "no stable measurement"
            rows.append(f"| {r['variant']} | {int(r['bytes/request']):,} | not measured: {short} | | | | "
                        f"{r['server avg_batch']:.1f} | {r['server queue_ms_per_request']:.2f} / "
                        f"{r['server compute_ms_per_request']:.2f} |")
            continue
        rows.append(f"| {r['variant']} | {int(r['bytes/request']):,} | {r['throughput']:.0f} | {r['p99_ms']:.2f} | "
                    f"{r['throughput'] / base['throughput']:.1f}x | {r['peak_rss_mb']:.0f} | {r['server avg_batch']:.1f} | "
                    f"{r['server queue_ms_per_request']:.2f} / {r['server compute_ms_per_request']:.2f} |")
    sweep_rows = ["| concurrency | infer/s | p99 (ms) | perf_analyzer peak (MB) | server batch | queue / compute per "
                  "request (ms) |", "|---|---|---|---|---|---|"]
    for _, r in sweep.iterrows():
        sweep_rows.append(f"| {int(r['concurrency'])} | {r['throughput']:.0f} | {r['p99_ms']:.2f} | {r['peak_rss_mb']:.0f} | "
                          f"{r['server avg_batch']:.1f} | {r['server queue_ms_per_request']:.2f} / "
                          f"{r['server compute_ms_per_request']:.2f} |")
    peak = max(variants["peak_rss_mb"].max(), sweep["peak_rss_mb"].max())
    top = sweep.loc[sweep["concurrency"].idxmax()]
    lines = [
        f"Notebook 14, `gpu-local` profile, one H200, local Triton 2.51 with the natively built PyTorch backend, "
        f"FP16 inside the model, perf_analyzer 2.60 with batch-1 requests, {int(sweep['concurrency'].min())}-"
        f"{int(sweep['concurrency'].max())} concurrency; the notebook ran {results['seconds']:.0f} s "
        "(executed notebook: `docs/runs/h200-2026-12-01/`).",
        "",
        *rows,
        "",
        f"- At concurrency 16 the best configuration ({best['variant']}) serves {best['throughput']:.0f} infer/s "
        f"with p99 {best['p99_ms']:.2f} ms: {best['throughput'] / base['throughput']:.1f}x the article's baseline "
        f"measured in the same run ({base['throughput']:.0f} infer/s, p99 {base['p99_ms']:.1f} ms).",
        f"- The FP32 rows over gRPC could not be measured within perf_analyzer's memory limit "
        f"({results['memory_limit_gb']:g} GB): the guard stopped them and recorded why. In notebook 11's "
        f"demonstration on the same machine, one 4-second window at concurrency 4 took perf_analyzer to "
        f"{memory['none']:.0f} MB over gRPC and {memory['system']:.0f} MB with system shared memory. The highest "
        f"peak of any row measured here: {peak:.0f} MB.",
        f"- The JPEG ensemble was not measured on the H200: its Python step received bytes that do not start like "
        f"a JPEG (`{results['ensemble_error'].split('message: ')[-1]}`), while the same notebook on a CPU returns "
        f"the client-side top-5 for every photo. Open.",
        "",
        f"Saturation sweep of the best configuration:",
        "",
        *sweep_rows,
        "",
        f"- The knee (highest throughput with p99 within 10 ms): {knee['throughput']:.0f} infer/s at concurrency "
        f"{int(knee['concurrency'])}, p99 {knee['p99_ms']:.2f} ms. The same model in this process (the UINT8 batch "
        f"copied to the GPU and the scores back on every call) runs {inproc[16]:.0f} img/s at batch 16 and "
        f"{inproc[128]:.0f} at batch 128: served at the knee is {knee['throughput'] / inproc[16]:.0%} of the first "
        f"and {knee['throughput'] / inproc[128]:.0%} of the second, because the server's batcher forms batches of "
        f"{top['server avg_batch']:.0f} on average at concurrency {int(top['concurrency'])}, not 16.",
        f"- Toward 25,000 infer/s: the knee is {knee['throughput'] / 25000:.0%} of it. At concurrency "
        f"{int(top['concurrency'])} a request computes for {top['server compute_ms_per_request']:.2f} ms and queues "
        f"for {top['server queue_ms_per_request']:.2f} ms by the server's clock, against a p99 of "
        f"{top['p99_ms']:.2f} ms by the client's: the rest is the client and the transport (one perf_analyzer "
        "process sending batch-1 requests), the next thing to measure.",
    ]
    return "\n".join(lines)


SECTIONS = {"14": section_14}


def render(text: str) -> str:
    """docs/benchmarks.md with every generated section replaced by its freshly computed text."""
    for name, make in SECTIONS.items():
        begin = BEGIN.format(name=name)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(END), re.S)
        if not pattern.search(text):
            raise ValueError(f"docs/benchmarks.md has no generated section {name!r} (a line {begin!r} ... {END!r})")
        text = pattern.sub(lambda _: f"{begin}\n{make()}\n{END}", text)
    return text


if __name__ == "__main__":
    if "--write" in sys.argv:
        DOC.write_text(render(DOC.read_text()))
    else:
        print("\n\n".join(make() for make in SECTIONS.values()))
