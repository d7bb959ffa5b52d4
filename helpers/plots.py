"""Plots the notebooks show and save: predictions, latency bars, throughput and p99 against concurrency."""
from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator


def _save(fig, path: str | Path | None):
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def predictions(image: np.ndarray, top5: list[tuple[int, str, float]], title: str, path: str | Path | None = None):
    """The image beside a bar chart of its top-5 classes."""
    fig, (ax_img, ax_bar) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [1, 1.3]})
    ax_img.imshow(image)
    ax_img.axis("off")
    names = [f"{name} ({idx})" for idx, name, _ in top5][::-1]
    ax_bar.barh(names, [score for *_, score in top5][::-1], color="tab:green")
    ax_bar.set_xlabel("probability")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def latency_bars(table: pd.DataFrame, title: str, path: str | Path | None = None):
    """Mean latency per row with p50..p99 whiskers, from bench.summarize's table."""
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(table) + 1.5))
    y = np.arange(len(table))
    ax.barh(y, table["p50_ms"], color="tab:blue", label="p50")
    ax.errorbar(table["p50_ms"], y, xerr=[np.zeros(len(table)), table["p99_ms"] - table["p50_ms"]], fmt="none",
                ecolor="black", capsize=4, label="p50 to p99")
    ax.set_yticks(y, table.index)
    ax.set_xlabel("latency (ms)")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return _save(fig, path)


def sweep(results: Mapping[str, pd.DataFrame], title: str, path: str | Path | None = None):
    """Throughput and p99 latency against concurrency, one line per model (perf.parse_csv tables)."""
    fig, (ax_t, ax_p) = plt.subplots(1, 2, figsize=(12, 4.2))
    for label, df in results.items():
        ax_t.plot(df["concurrency"], df["throughput"], marker="o", label=label)
        ax_p.plot(df["concurrency"], df["p99_ms"], marker="o", label=label)
    ax_t.set(xlabel="concurrency", ylabel="throughput (infer/s)", title="throughput")
    ax_p.set(xlabel="concurrency", ylabel="p99 latency (ms)", title="p99 latency")
    for ax in (ax_t, ax_p):
        ax.grid(alpha=0.3)
        ax.legend()
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def bars_at(results: Mapping[str, pd.DataFrame], concurrency: int, title: str, path: str | Path | None = None):
    """Side-by-side throughput and p99 bars at one concurrency level."""
    rows = {label: df.loc[df["concurrency"] == concurrency].iloc[0] for label, df in results.items()
            if (df["concurrency"] == concurrency).any()}
    if not rows:
        raise ValueError(f"no result has concurrency {concurrency}; measured: "
                         f"{sorted({int(c) for df in results.values() for c in df['concurrency']})}")
    fig, (ax_t, ax_p) = plt.subplots(1, 2, figsize=(10, 3.8))
    labels = list(rows)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"][:len(labels)]
    for ax, column, unit in ((ax_t, "throughput", "infer/s"), (ax_p, "p99_ms", "ms")):
        values = [rows[label][column] for label in labels]
        bars = ax.bar([textwrap.fill(label, 16) for label in labels], values, color=colors)
        ax.bar_label(bars, fmt="%.1f")
        ax.margins(y=0.15)
        ax.set_ylabel(f"{column.replace('_ms', '')} ({unit})")
    ax_t.set_title(f"throughput at concurrency {concurrency}")
    ax_p.set_title(f"p99 latency at concurrency {concurrency}")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def effect(table: pd.DataFrame, x: str, title: str, path: str | Path | None = None):
    """Throughput and p99 bars for each setting of one knob (a column of `table`)."""
    fig, (ax_t, ax_p) = plt.subplots(1, 2, figsize=(10, 3.6))
    labels = table[x].astype(str)
    ax_t.bar(labels, table["throughput"], color="tab:blue")
    ax_p.bar(labels, table["p99_ms"], color="tab:orange")
    ax_t.set(xlabel=x, ylabel="throughput (infer/s)")
    ax_p.set(xlabel=x, ylabel="p99 latency (ms)")
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


# Where one request's time goes, in the order it is spent (perf_analyzer's CSV columns, parsed by helpers.perf).
LATENCY_PARTS = {"client_send_ms": "client send", "network_ms": "network + server send/recv",
                 "queue_ms": "server queue", "compute_input_ms": "compute: input copy",
                 "compute_infer_ms": "compute: inference", "compute_output_ms": "compute: output copy",
                 "client_recv_ms": "client receive"}


def latency_split(rows: Mapping[str, pd.Series], title: str, path: str | Path | None = None):
    """Stacked bars of where an average request's time goes (client, network, queue, compute) for each row."""
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.6 * len(rows)))
    labels = list(rows)
    left = np.zeros(len(labels))
    for column, name in LATENCY_PARTS.items():
        values = np.array([float(rows[label].get(column, 0.0) or 0.0) for label in labels])
        ax.barh([textwrap.fill(label, 28) for label in labels], values, left=left, label=name)
        left += values
    ax.set_xlabel("average time per request (ms)")
    ax.invert_yaxis()
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def memory_traces(traces: Mapping[str, pd.DataFrame], title: str, path: str | Path | None = None):
    """perf_analyzer's resident memory against time, one line per transport (perf.memory_trace tables)."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for label, df in traces.items():
        ax.plot(df["seconds"], df["rss_mb"], label=f"--shared-memory {label} (peak {df['rss_mb'].max():.0f} MB)")
    ax.set(xlabel="seconds since perf_analyzer started", ylabel="resident memory (MB)", title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return _save(fig, path)


# A request's path through Triton, left to right and back, with the perf_analyzer column that times each stage.
REQUEST_PATH = [("client\n(tritonclient,\nperf_analyzer)", "client send /\nclient receive"),
                ("HTTP :8000 / gRPC :8001\nfrontend", "network +\nserver send/recv"),
                ("scheduler queue\n(dynamic batcher\nforms batches)", "server queue"),
                ("model instance\n(instance_group:\ncount x KIND_CPU/GPU)", "compute:\ninput / output copy"),
                ("backend\n(PyTorch, ONNX Runtime,\nTensorRT, Python)", "compute:\ninference"),
                ("device\n(CPU or GPU)", "")]


def request_path(highlight: str | None = None, path: str | Path | None = None):
    """The path of one inference request through Triton, each stage labelled with the perf_analyzer column that
    measures it; `highlight` (a stage's first word) draws that stage in colour."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, ax = plt.subplots(figsize=(13, 2.9))
    ax.set(xlim=(0, len(REQUEST_PATH) * 2.2), ylim=(-1.5, 1.6))
    ax.axis("off")
    for k, (stage, column) in enumerate(REQUEST_PATH):
        x = 0.1 + k * 2.2
        hot = highlight and stage.split()[0].lower().startswith(highlight.lower())
        ax.add_patch(FancyBboxPatch((x, -0.45), 1.8, 1.5, boxstyle="round,pad=0.05",
                                    facecolor="#f4a261" if hot else "#e9eef5", edgecolor="#34495e"))
        ax.text(x + 0.9, 0.3, stage, ha="center", va="center", fontsize=9)
        if column:
            ax.text(x + 0.9, -0.95, column, ha="center", va="center", fontsize=8, color="#34495e", style="italic")
        if k + 1 < len(REQUEST_PATH):
            ax.add_patch(FancyArrowPatch((x + 1.85, 0.55), (x + 2.25, 0.55), arrowstyle="->", mutation_scale=14))
            ax.add_patch(FancyArrowPatch((x + 2.25, 0.0), (x + 1.85, 0.0), arrowstyle="->", mutation_scale=14,
                                         color="#7f8c8d"))
    ax.text(0.1, 1.45, "request ->   (top arrows)        <- response (bottom arrows)        "
            "italics: the perf_analyzer column that times each stage; /metrics on :8002 counts the same stages",
            fontsize=8, color="#34495e")
    fig.tight_layout()
    return _save(fig, path)


def queue_signal(signal: pd.DataFrame, threshold_us: float, p99_budget_ms: float, title: str,
                 path: str | Path | None = None):
    """Queue time per request (the autoscaling signal) and p99 latency against concurrency, with the HPA threshold
    and the p99 budget drawn in."""
    ok = signal[signal["stable"].astype(bool)]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(ok["concurrency"], ok["queue_us_per_request"], marker="o", label="queue time per request (us)")
    ax.axhline(threshold_us, color="tab:red", linestyle="--", label=f"HPA threshold ({threshold_us:.0f} us)")
    ax.set(xlabel="concurrency", ylabel="queue time per request (us)", title=title)
    other = ax.twinx()
    other.plot(ok["concurrency"], ok["p99_ms"], marker="s", color="tab:gray", label="p99 latency (ms)")
    other.axhline(p99_budget_ms, color="tab:gray", linestyle=":", label=f"p99 budget ({p99_budget_ms:g} ms)")
    other.set_ylabel("p99 latency (ms)")
    lines = ax.get_legend_handles_labels()
    more = other.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return _save(fig, path)


def simulated_latency(sims: Mapping[tuple[str, int], np.ndarray], title: str, path: str | Path | None = None):
    """p50 and p99 of simulated latencies per replica count, one panel per knee."""
    wheres = list(dict.fromkeys(where for where, _ in sims))
    fig, axes = plt.subplots(1, len(wheres), figsize=(6 * len(wheres), 3.8), squeeze=False)
    for ax, where in zip(axes[0], wheres):
        counts = sorted(n for w, n in sims if w == where)
        for q, style in ((50, "o-"), (99, "s-")):
            ax.plot(counts, [np.percentile(sims[(where, n)], q) for n in counts], style, label=f"p{q}")
        ax.set(xlabel="replicas", ylabel="latency (ms)", title=where, yscale="log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)
