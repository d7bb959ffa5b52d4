"""Plots the notebooks show and save: predictions, latency bars, throughput and p99 against concurrency."""
from __future__ import annotations

import re
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
    """p50 latency per row (bench.summarize's table), with a whisker to p99 where every row has 100 samples, to p90
    where it has 10; with fewer, no whisker: the slowest sample or two would set it (07's table leaves them out too)."""
    n = int(table["n"].min()) if "n" in table and len(table) else 0
    upper = "p99" if n >= 100 else "p90" if n >= 10 else None
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(table) + 1.7))
    y = np.arange(len(table))
    ax.barh(y, table["p50_ms"], color="tab:blue", label="p50")
    if upper:
        ax.errorbar(table["p50_ms"], y, xerr=[np.zeros(len(table)), table[f"{upper}_ms"] - table["p50_ms"]], fmt="none",
                    ecolor="black", capsize=4, label=f"p50 to {upper}")
    ax.set_yticks(y, table.index)
    ax.set_xlabel("latency (ms)")
    ax.set_title(title + ("" if upper else f"\np50 only: {n} samples per row, too few for a p90 or p99"))
    ax.legend(loc="lower right")
    fig.tight_layout()
    return _save(fig, path)


def failure_reason(error: object, width: int = 60) -> str:
    """A failed or stopped row's reason, short enough to print beside its bar (helpers.perf's error text, trimmed of
    the model name, the remedy and the log path)."""
    text = "" if error is None or (isinstance(error, float) and np.isnan(error)) else str(error)
    stopped = re.search(r"passed the memory limit of ([\d.]+ GB) \((\d+) MB resident after (\d+) s\)", text)
    if stopped:
        return f"stopped by the memory guard: {stopped[2]} MB after {stopped[3]} s (limit {stopped[1]})"
    if "no stable measurement" in text:  # measured, but its windows did not agree: say how far apart they were
        spread = re.search(r"last three windows: ([\d.,]+-[\d.,]+ infer/s \(\d+% apart\))", text)
        return "not stable" + (f": last windows {spread[1]}" if spread else "")
    text = re.sub(r"^no concurrency level of \S+ was stable for '[^']*': ", "", text)
    text = re.sub(r"^'[^']*' at concurrency \d+: ", "", text).split(";")[0].strip() or "no result"
    return textwrap.shorten(text, width, placeholder=" ...")


def _measured(row: Mapping | pd.Series, column: str = "throughput") -> bool:
    """Whether a perf row has a number to draw (stable, and the column present and finite)."""
    stable = row.get("stable", True)
    value = row.get(column, np.nan)
    return bool(stable) and not pd.isna(stable) and value is not None and np.isfinite(float(value))


def _placeholder(ax, y: float, reason: str) -> None:
    """A boxed note at `y` of a horizontal bar chart, with the reason its row has no bar."""
    ax.barh(y, 0, color="none")
    ax.annotate(f"no result: {reason}", (0, y), xycoords=("axes fraction", "data"), xytext=(4, 0),
                textcoords="offset points", va="center", ha="left", fontsize=8, color="tab:red",
                bbox=dict(boxstyle="round,pad=0.2", facecolor="#fdecea", edgecolor="tab:red"))


def _run_range(row: Mapping | pd.Series, column: str) -> tuple[float | None, float | None]:
    """The lowest and highest of a row's runs for `column` (throughput or p99_ms), or (None, None) for one run."""
    stem = "throughput" if column == "throughput" else "p99"
    low, high = row.get(f"{stem}_min"), row.get(f"{stem}_max")
    try:
        low, high = float(low), float(high)
    except (TypeError, ValueError):
        return None, None
    return (low, high) if np.isfinite(low) and np.isfinite(high) and high > low else (None, None)


def _hbars(rows: Mapping[str, Mapping | pd.Series], title: str, *, p99_budget_ms: float | None = None,
           wrap: int = 34, path: str | Path | None = None):
    """Throughput and p99 as horizontal bars, one row per label in the order given; a row measured several times
    (`throughput_min`/`_max`, `p99_min`/`_max`) has a whisker over its runs' range; a row without a number is a
    marked placeholder with its reason; the p99 budget, when given, is a dashed line."""
    labels = list(rows)
    ranged = False
    wrapped = [textwrap.fill(str(label), wrap) for label in labels]
    lines = max((w.count("\n") + 1 for w in wrapped), default=1)
    fig, (ax_t, ax_p) = plt.subplots(1, 2, figsize=(12, 1.4 + len(labels) * (0.28 + 0.17 * lines)), sharey=True)
    y = np.arange(len(labels))
    for ax, column, unit, color in ((ax_t, "throughput", "infer/s", "tab:blue"), (ax_p, "p99_ms", "ms", "tab:orange")):
        for k, label in enumerate(labels):
            row = rows[label]
            if _measured(row, column):
                value, low, high = float(row[column]), *_run_range(row, column)
                ax.barh(k, value, color=color, xerr=None if low is None else [[value - low], [high - value]],
                        error_kw={"ecolor": "black", "capsize": 3, "linewidth": 1})
                ranged |= low is not None
                ax.annotate(f"{value:.1f}", (value if high is None else max(value, high), k), xytext=(4, 0),
                            textcoords="offset points", va="center", fontsize=8)
            else:
                _placeholder(ax, k, failure_reason(row.get("error")) if ax is ax_t else "see left")
        ax.set_xlabel(f"{column.replace('_ms', '')} ({unit})")
        ax.margins(x=0.18)
        ax.grid(axis="x", alpha=0.3)
    ax_p.set_title("p99 latency")
    if p99_budget_ms is not None:  # named in the title: a legend would cover a bar's label
        ax_p.axvline(p99_budget_ms, color="tab:red", linestyle="--")
        ax_p.set_title(f"p99 latency (red dashed line: the p99 budget, {p99_budget_ms:g} ms)")
    ax_t.set_yticks(y, wrapped, fontsize=9)
    ax_t.set_ylim(len(labels) - 0.5, -0.5)  # the first row on top
    ax_t.set_title("throughput" + (" (whiskers: the range of a row's runs)" if ranged else ""))
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def _levels_axis(ax, levels: list[int], min_octaves: float = 0.28) -> None:
    """Concurrency on a log2 axis: every measured level a tick, labelled where the labels do not crowd each other
    (the first and the last always)."""
    levels = sorted({int(v) for v in levels if v and v > 0})
    ax.set_xscale("log", base=2)
    if not levels:
        return
    shown = [levels[-1]]
    for level in reversed(levels[:-1]):
        if np.log2(shown[-1] / level) >= min_octaves:
            shown.append(level)
    if levels[0] not in shown:
        shown[-1] = levels[0]
    ax.set_xticks(levels, [str(v) if v in shown else "" for v in levels])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlim(levels[0] / 1.3, levels[-1] * 1.3)


def sweep(results: Mapping[str, pd.DataFrame], title: str, path: str | Path | None = None, *,
          p99_budget_ms: float | None = None, knee: Mapping | pd.Series | None = None, knee_sought: bool | str = False,
          x_label: str = "concurrency"):
    """Throughput and p99 latency against concurrency (log2 axis, the measured levels as ticks; `x_label` names
    what the `concurrency` column counts, e.g. images in flight), one line per model
    (perf.parse_csv tables); a level without a stable number is an x on the axis with its reason below the plot;
    the p99 budget and the knee (a row with concurrency and throughput) are drawn when given, as a lower bound when it
    is its curve's top level (no knee reached); with `knee_sought` (True, or the label of the curve whose knee was
    sought) and no knee, the plot says so: no level within the budget, or (that curve) no stable level. One legend
    below both plots, so that it covers no line."""
    fig, (ax_t, ax_p) = plt.subplots(1, 2, figsize=(12, 4.2))
    notes, levels = [], []
    for k, (label, df) in enumerate(results.items()):
        color = f"C{k}"
        ok = df[[_measured(r) for _, r in df.iterrows()]]
        bad = df[[not _measured(r) for _, r in df.iterrows()]]
        levels += [int(c) for c in df["concurrency"]]
        ax_t.plot(ok["concurrency"], ok["throughput"], marker="o", color=color, label=label)
        ax_p.plot(ok["concurrency"], ok["p99_ms"], marker="o", color=color, label=label)
        for ax in (ax_t, ax_p) if len(bad) else ():  # an empty line drawn this way would break tight_layout
            ax.plot(bad["concurrency"], [0.02] * len(bad), "x", color=color, markersize=10, mew=2,
                    transform=ax.get_xaxis_transform(), clip_on=False)
        for _, row in bad.iterrows():
            notes.append(f"x {label}, c={int(row['concurrency'])}: no result: {failure_reason(row.get('error'), 80)}")
    ax_t.set(xlabel=f"{x_label} (log2 scale)", ylabel="throughput (infer/s)", title="throughput")
    ax_p.set(xlabel=f"{x_label} (log2 scale)", ylabel="p99 latency (ms)", title="p99 latency")
    if p99_budget_ms is not None:
        ax_p.axhline(p99_budget_ms, color="tab:red", linestyle="--", label=f"p99 budget ({p99_budget_ms:g} ms)")
    if knee is not None:
        c, t = int(knee["concurrency"]), float(knee["throughput"])
        top = _top_level(results, knee)
        ax_t.plot([c], [t], marker="*", markersize=18, color="tab:red", markerfacecolor="none", mew=1.5,
                  linestyle="none",  # hollow: a curve's point at the same place stays visible inside it
                  label=f">= {t:,.0f} infer/s at c={c} (top level: no knee reached)" if top
                  else f"knee: {t:,.0f} infer/s at c={c}")
        ax_p.axvline(c, color="tab:red", linestyle=":", label=f"top level, no knee (c={c})" if top else f"knee (c={c})")
    elif knee_sought:
        sought = results.get(knee_sought) if isinstance(knee_sought, str) else None
        over = sought is None or p99_budget_ms is None or any(
            _measured(r) and r["p99_ms"] > p99_budget_ms for _, r in sought.iterrows())
        ax_t.text(0.5, 0.5, (f"no knee for {knee_sought}" if isinstance(knee_sought, str) else "no knee")
                  + (": no level kept p99 within " + (f"{p99_budget_ms:g} ms" if p99_budget_ms is not None else "the budget")
                     if over else ": no level gave a stable measurement"),
                  transform=ax_t.transAxes, ha="center", va="center", fontsize=9, color="tab:red",
                  bbox=dict(boxstyle="round,pad=0.3", facecolor="#fdecea", edgecolor="tab:red"))
    for ax in (ax_t, ax_p):
        _levels_axis(ax, levels)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    ax_t.set_ylim(top=ax_t.get_ylim()[1] * 1.06)  # room for the knee's star at the highest point
    fig.suptitle(title)
    fig.tight_layout()
    handles, labels = ax_t.get_legend_handles_labels()
    for handle, label in zip(*ax_p.get_legend_handles_labels()):  # the budget and the knee's line; the curves once
        if label not in labels:
            handles, labels = [*handles, handle], [*labels, label]
    longest = max(map(len, labels), default=0)
    legend = fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=8, frameon=False,
                        ncol=max(1, min(len(labels), 3 if longest <= 45 else 2 if longest <= 90 else 1)))
    if notes:  # below the legend
        below = legend.get_window_extent(fig.canvas.get_renderer()).transformed(fig.transFigure.inverted()).y0
        fig.text(0.01, below - 0.01, "\n".join(notes), fontsize=8, color="tab:red", va="top", ha="left")
    return _save(fig, path)


def _top_level(results: Mapping[str, pd.DataFrame], knee: Mapping | pd.Series) -> bool:
    """Whether `knee` is the highest level measured on its curve (the one with a row at its concurrency and
    throughput; else any curve): throughput still rising and p99 within the budget there, so no knee was reached."""
    c, t = float(knee["concurrency"]), float(knee["throughput"])
    on = [df for df in results.values() if ((df["concurrency"].astype(float) == c)
                                            & np.isclose(df["throughput"].astype(float), t)).any()]
    levels = [float(x) for df in (on[:1] or results.values()) for x in df["concurrency"]]
    return bool(levels) and c >= max(levels)


def bars_at(results: Mapping[str, pd.DataFrame], concurrency: int, title: str, path: str | Path | None = None, *,
            p99_budget_ms: float | None = None):
    """Throughput and p99 bars at one concurrency level, one row per result; a result without a stable number there
    is a marked placeholder with its reason."""
    rows = {}
    for label, df in results.items():
        at = df.loc[df["concurrency"] == concurrency]
        rows[label] = at.iloc[0] if len(at) else {"stable": False, "error": f"concurrency {concurrency} was not measured"}
    if not any(_measured(row) for row in rows.values()):
        raise ValueError(f"no result has a stable row at concurrency {concurrency}; measured: "
                         f"{sorted({int(c) for df in results.values() for c in df['concurrency']})}")
    return _hbars(rows, f"{title}\nthroughput and p99 latency at concurrency {concurrency}",
                  p99_budget_ms=p99_budget_ms, path=path)


def effect(table: pd.DataFrame, x: str, title: str, path: str | Path | None = None, *,
           p99_budget_ms: float | None = None):
    """Throughput and p99 bars (horizontal, labels that fit) for each setting of one knob (a column of `table`); a
    setting that was stopped or never stable is a marked placeholder with its reason."""
    rows = {}
    for _, row in table.iterrows():
        label = str(row[x])
        while label in rows:  # a repeated setting keeps its own row
            label += " "
        rows[label] = row
    return _hbars(rows, title, p99_budget_ms=p99_budget_ms, path=path)


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
    y = np.arange(len(labels))
    measured = [_measured(rows[label]) for label in labels]
    for column, name in LATENCY_PARTS.items():
        values = np.array([float(rows[label].get(column, 0.0) or 0.0) if ok else 0.0
                           for label, ok in zip(labels, measured)])
        values = np.nan_to_num(values)
        ax.barh(y, values, left=left, label=name)
        left += values
    for k, (label, ok) in enumerate(zip(labels, measured)):
        if not ok:
            _placeholder(ax, k, failure_reason(rows[label].get("error")))
    ax.set_yticks(y, [textwrap.fill(label, 28) for label in labels])
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
                 path: str | Path | None = None, threshold_label: str = "HPA threshold"):
    """Queue time per request (the autoscaling signal) and p99 latency against concurrency, with a threshold
    (`threshold_label`) and the p99 budget drawn in."""
    ok = signal[signal["stable"].astype(bool)]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(ok["concurrency"], ok["queue_us_per_request"], marker="o", label="queue time per request (us)")
    ax.axhline(threshold_us, color="tab:red", linestyle="--", label=f"{threshold_label} ({threshold_us:.0f} us)")
    ax.set(xlabel="concurrency", ylabel="queue time per request (us)", title=title)
    other = ax.twinx()
    other.plot(ok["concurrency"], ok["p99_ms"], marker="s", color="tab:gray", label="p99 latency (ms)")
    other.axhline(p99_budget_ms, color="tab:gray", linestyle=":", label=f"p99 budget ({p99_budget_ms:g} ms)")
    other.set_ylabel("p99 latency (ms)")
    lines = ax.get_legend_handles_labels()
    more = other.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    _levels_axis(ax, list(signal["concurrency"]))
    ax.set_xlabel("concurrency (log2 scale)")
    bad = signal[~signal["stable"].astype(bool)]
    if len(bad):  # an empty line drawn this way would break tight_layout
        ax.plot(bad["concurrency"], [0.02] * len(bad), "x", color="tab:red", markersize=10, mew=2,
                transform=ax.get_xaxis_transform(), clip_on=False)
    if len(bad):
        fig.text(0.01, 0.0, "\n".join(f"x c={int(r['concurrency'])}: no result: {failure_reason(r.get('error'), 80)}"
                                      for _, r in bad.iterrows()), fontsize=8, color="tab:red", va="top")
    fig.tight_layout()
    return _save(fig, path)


def simulated_latency(sims: Mapping[tuple[str, int], np.ndarray], title: str, path: str | Path | None = None, *,
                      budgets: Mapping[str, float] | None = None):
    """p50 and p99 of simulated latencies per replica count, one panel per knee; each panel's p99 budget, when given,
    a dashed line."""
    wheres = list(dict.fromkeys(where for where, _ in sims))
    fig, axes = plt.subplots(1, len(wheres), figsize=(6 * len(wheres), 3.8), squeeze=False)
    for ax, where in zip(axes[0], wheres):
        counts = sorted(n for w, n in sims if w == where)
        for q, style in ((50, "o-"), (99, "s-")):
            ax.plot(counts, [np.percentile(sims[(where, n)], q) for n in counts], style, label=f"p{q}")
        if budgets and where in budgets:
            ax.axhline(budgets[where], color="tab:red", linestyle="--", label=f"p99 budget, {budgets[where]:g} ms")
        ax.set(xlabel="replicas", ylabel="latency (ms)", title=textwrap.fill(where, 48), yscale="log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)
