"""Every figure kind the notebooks make, rendered from recorded data (failed rows included): no tick labels printed
over each other, and every requested row visible (a bar, or a marked placeholder with its reason)."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers import bench, perf, plots  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "docs" / "data"
ARCHIVE = DATA / "archive" / "h200-2026-12-02"  # a recorded run with a stopped gRPC row


def _overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty tick labels of one axis whose drawn extents intersect (the figure drawn)."""
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            boxes = [t.get_window_extent(renderer) for t in labels]
            for i in range(len(labels)):
                for j in range(i + 1, len(labels)):
                    if boxes[i].overlaps(boxes[j]):
                        found.append((labels[i].get_text(), labels[j].get_text()))
    return found


def _texts(fig) -> str:
    """Every piece of text in the figure (tick labels, annotations, legends, notes), whitespace normalized."""
    return " ".join(" ".join(t.get_text().split()) for t in fig.findobj(matplotlib.text.Text))


def _check(fig, rows: list[str], failed: list[str] = ()) -> None:
    """No overlapping tick labels; every plot at least a fifth of the figure wide (a squeezed plot crowds its ticks);
    every row's label drawn; every failed row marked 'no result'."""
    try:
        fig.canvas.draw()
        assert not _overlaps(fig), f"tick labels overlap: {_overlaps(fig)}"
        widths = [ax.get_position().width for ax in fig.axes if ax.get_visible() and ax.axison]
        assert min(widths) >= 0.2, f"plots squeezed to {widths} of the figure"
        text = _texts(fig)
        for row in rows:
            assert " ".join(str(row).split()) in text, f"row {row!r} is not in the figure"
        assert text.count("no result") >= len(failed), f"failed rows {failed} are not all marked"
    finally:
        plt.close(fig)


def _ticklabels(ax) -> list[str]:
    return [" ".join(t.get_text().split()) for t in ax.get_yticklabels()]


def test_variants_figure_marks_the_stopped_grpc_row():
    table = pd.read_csv(ARCHIVE / "14_variants.csv")
    failed = table.loc[~table["stable"], "variant"].tolist()
    assert failed, "the recorded run has a stopped row: the test must draw one"
    fig = plots.effect(table.rename(columns={"variant": "value"}), "value", "ResNet18 at concurrency 16", p99_budget_ms=10)
    assert "the p99 budget, 10 ms" in _texts(fig)
    labels = _ticklabels(fig.axes[0])
    assert labels == [" ".join(v.split()) for v in table["variant"]], labels  # all seven, in order, none dropped
    _check(fig, table["variant"].tolist(), failed)


@pytest.mark.parametrize("knob", ["instances", "preferred batch sizes", "queue delay (us)", "backend parameters",
                                  "transport"])
def test_knob_figures(knob):
    knobs = pd.read_csv(ARCHIVE / "13_knobs.csv")
    table = knobs[knobs["knob"] == knob]
    _check(plots.effect(table, "value", f"resnet18_opt: {knob} at concurrency 16"), table["value"].astype(str).tolist(),
           table.loc[~table["stable"], "value"].tolist())


def test_transport_figure_with_stopped_rows_draws_all_three():
    """13's transport figure on the H200 run: HTTP and gRPC stopped by the guard, one bar where three were asked for."""
    stopped = ("'resnet18_opt_i1' at concurrency 16: perf_analyzer passed the memory limit of 3.5 GB (3828 MB resident "
               "after 2 s) and was stopped; it keeps every request it sends over grpc (...)")
    table = pd.DataFrame([{"knob": "transport", "value": "gRPC + system shm", "stable": True, "throughput": 3465.2,
                           "p99_ms": 7.1, "error": ""},
                          {"knob": "transport", "value": "HTTP", "stable": False, "error": stopped},
                          {"knob": "transport", "value": "gRPC", "stable": False, "error": stopped}])
    fig = plots.effect(table, "value", "transport")
    assert "stopped by the memory guard: 3828 MB after 2 s (limit 3.5 GB)" in _texts(fig)
    _check(fig, ["gRPC + system shm", "HTTP", "gRPC"], ["HTTP", "gRPC"])


def test_candidates_figure():
    table = pd.read_csv(DATA / "h200_native_12_candidates.csv")
    table = table[table["run"] == table["run"].iloc[0]]  # one row per variant, as notebook 12's contest
    _check(plots.effect(table, "variant", "Candidates at concurrency 16"), table["variant"].tolist())


def _saturation() -> pd.DataFrame:
    sweep = pd.read_csv(ARCHIVE / "14_saturation.csv")
    return pd.concat([sweep, pd.DataFrame([{"concurrency": 256, "stable": False, "error": perf.UnstableMeasurement(
        "perf_analyzer found no stable measurement for 'resnet18_uint8_i2' at concurrency 256").args[0]}])],
        ignore_index=True)


def test_saturation_sweep_has_log2_levels_budget_and_knee():
    sweep = _saturation()
    knee = perf.best(sweep, 10.0)
    fig = plots.sweep({"UINT8, cuda shm, 2 instances": sweep}, "Saturation sweep", p99_budget_ms=10.0, knee=knee)
    ax_t, ax_p = fig.axes[:2]
    assert ax_t.get_xscale() == "log"
    assert [int(round(t)) for t in ax_t.get_xticks()] == sorted(sweep["concurrency"].astype(int))
    text = _texts(fig)
    assert "p99 budget (10 ms)" in text and f"c={int(knee['concurrency'])}" in text
    assert any(np.isclose(line.get_ydata()[0], 10.0) for line in ax_p.get_lines() if len(line.get_ydata()) == 2)
    _check(fig, ["UINT8, cuda shm, 2 instances"], ["c=256"])


def test_dense_sweep_from_the_comparison_run():
    comparison = pd.read_csv(ARCHIVE / "13_comparison.csv")
    results = {model: df for model, df in comparison.groupby("model", sort=False)}
    fig = plots.sweep(results, "ResNet18 on Triton", p99_budget_ms=10.0)
    assert sorted(int(round(t)) for t in fig.axes[0].get_xticks()) == sorted(comparison["concurrency"].unique())
    _check(fig, list(results))
    # notebook 11's default sweep, 1 to 16 in steps of 1: sixteen ticks on a log2 axis, labels thinned, none overlaps
    one = {"baseline": pd.DataFrame({"concurrency": range(1, 17), "throughput": np.linspace(500, 900, 16),
                                     "p99_ms": np.linspace(2, 30, 16), "stable": True})}
    one["baseline"].loc[0, ["stable", "throughput", "p99_ms"]] = [False, np.nan, np.nan]
    one["baseline"]["error"] = ["perf_analyzer found no stable measurement for 'resnet18_pytorch' at concurrency 1"] + [""] * 15
    _check(plots.sweep(one, "Baseline"), ["baseline"], ["c=1"])


def test_bars_at_the_top_level_keep_a_missing_row():
    comparison = pd.read_csv(ARCHIVE / "13_comparison.csv")
    results = {model: df for model, df in comparison.groupby("model", sort=False)}
    top = int(comparison["concurrency"].max())
    label = next(iter(results))
    results[label] = results[label][results[label]["concurrency"] != top]  # stopped before the top level
    fig = plots.bars_at(results, top, "At concurrency 16", p99_budget_ms=10.0)
    assert len(_ticklabels(fig.axes[0])) == len(results)
    _check(fig, list(results), [label])


def test_latency_split_marks_a_stopped_row():
    comparison = pd.read_csv(ARCHIVE / "13_comparison.csv")
    rows = {model: df.set_index("concurrency").loc[16] for model, df in comparison.groupby("model", sort=False)}
    rows["resnet18_opt, best settings (gRPC, c=16)"] = pd.Series({"stable": False, "error": "no stable measurement"})
    _check(plots.latency_split(rows, "Average request at concurrency 16"), list(rows), ["best"])


def test_queue_signal_and_memory_traces():
    results = json.loads((ARCHIVE / "11_results.json").read_text())
    table = pd.DataFrame(results["table"])
    signal = table.assign(queue_us_per_request=table["queue_ms"] * 1000)
    _check(plots.queue_signal(signal, 500.0, 10.0, "Queue time"), [],
           ["x"] * int((~signal["stable"].astype(bool)).sum()))
    trace = pd.DataFrame({"seconds": [0.0, 1.0, 2.0], "rss_mb": [20.0, 1800.0, 3700.0]})
    _check(plots.memory_traces({"none": trace, "system": trace.assign(rss_mb=22.0)}, "memory"), ["none", "system"])


def test_failure_reason_is_short_and_names_the_cause():
    assert plots.failure_reason(None) == "no result"
    assert plots.failure_reason("perf_analyzer failed (exit 99) for model 'm'; command: ...") == \
        "perf_analyzer failed (exit 99) for model 'm'"
    assert len(plots.failure_reason("x" * 500)) <= 60
    unstable = ("perf_analyzer found no stable measurement for 'm' at concurrency 16 (count windows of 1000 requests): "
                "its last three windows: 2842.4-3470.7 infer/s (22% apart), average latency 4.6-5.6 ms (22% apart)")
    assert plots.failure_reason(unstable) == "not stable: last windows 2842.4-3470.7 infer/s (22% apart)"
    assert plots.failure_reason("no stable measurement") == "not stable"


def test_a_sweep_without_a_knee_says_so():
    sweep = pd.read_csv(ARCHIVE / "14_saturation.csv")
    fig = plots.sweep({"UINT8": sweep}, "Saturation", p99_budget_ms=1.0, knee=perf.best(sweep, 1.0), knee_sought=True)
    assert "no knee: no level kept p99 within 1 ms" in _texts(fig)
    _check(fig, ["UINT8"])
    # beside other searches, the note names the curve whose knee was sought (notebook 16: the kept variant)
    fig = plots.sweep({"UINT8": sweep, "FP32": sweep}, "Knee searches", p99_budget_ms=1.0, knee=None, knee_sought="FP32")
    assert "no knee for FP32: no level kept p99 within 1 ms" in _texts(fig)
    failed = pd.DataFrame([{"concurrency": 16, "stable": False, "throughput": float("nan"), "p99_ms": float("nan"),
                            "error": "no stable measurement"}])
    fig = plots.sweep({"UINT8": sweep, "FP32": failed}, "Knee searches", p99_budget_ms=1.0, knee=None, knee_sought="FP32")
    assert "no knee for FP32: no level gave a stable measurement" in _texts(fig)


def test_a_knee_at_the_top_level_is_a_lower_bound_and_the_legend_covers_no_line():
    sweep = pd.DataFrame({"concurrency": [1, 2, 4], "throughput": [28.0, 32.3, 39.2], "p99_ms": [54.3, 81.8, 141.5],
                          "stable": True})
    fig = plots.sweep({"UINT8": sweep}, "Saturation", p99_budget_ms=400.0, knee=perf.best(sweep, 400.0),
                      knee_sought=True)
    text = _texts(fig)
    assert ">= 39 infer/s at c=4 (top level: no knee reached)" in text and "top level, no knee (c=4)" in text
    assert "knee: 39" not in text
    assert not [ax for ax in fig.axes if ax.get_legend()] and len(fig.legends) == 1  # one legend, below the plots
    legend = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
    assert all(legend.y1 <= ax.get_window_extent().y0 for ax in fig.axes)
    _check(fig, ["UINT8"])
    # a level measured above the knee (even one without a result) makes it a knee
    above = pd.concat([sweep, pd.DataFrame([{"concurrency": 8, "stable": False, "error": "no stable measurement"}])],
                      ignore_index=True)
    fig = plots.sweep({"UINT8": above}, "Saturation", p99_budget_ms=400.0, knee=perf.best(above, 400.0))
    assert "knee: 39 infer/s at c=4" in _texts(fig) and "top level" not in _texts(fig)
    _check(fig, ["UINT8"], ["c=8"])


def test_a_row_measured_several_times_has_a_whisker_over_its_runs():
    """14's and 12's rows with repeats: the bar is the median, the whisker its runs' range; a single run has none."""
    table = pd.DataFrame([{"variant": "baseline", "stable": True, "throughput": 600.0, "p99_ms": 9.0,
                           "throughput_min": 500.0, "throughput_max": 700.0, "p99_min": 8.0, "p99_max": 12.0},
                          {"variant": "one run", "stable": True, "throughput": 5600.0, "p99_ms": 4.0,
                           "throughput_min": float("nan"), "throughput_max": float("nan")}])
    fig = plots.effect(table, "variant", "whiskers")
    ax_t, ax_p = fig.axes[:2]
    spans = [sorted(seg[:, 0]) for c in ax_t.collections for seg in c.get_segments() if len(seg) == 2]
    assert [500.0, 700.0] in [[round(a, 6), round(b, 6)] for a, b in spans] and len(spans) == 1, spans
    assert len([seg for c in ax_p.collections for seg in c.get_segments()]) == 1  # p99 8-12 for the first row only
    assert "whiskers: the range of a row's runs" in _texts(fig) and "600.0" in _texts(fig)
    _check(fig, table["variant"].tolist())
    one = plots.effect(table.iloc[1:], "variant", "one run each")
    assert "whiskers" not in _texts(one) and not [c for ax in one.axes for c in ax.collections if c.get_segments()]
    plt.close(one)


def test_latency_bars_draw_a_tail_only_from_enough_samples():
    """07's figure: p50 bars; a whisker to p99 from 100 samples, to p90 from 10, none from fewer (as its table)."""
    rng = np.random.default_rng(0)
    for repeats, whisker in ((5, None), (20, "p50 to p90"), (100, "p50 to p99")):
        table = bench.summarize({"local": rng.normal(40, 2, repeats), "Triton HTTP": rng.normal(45, 3, repeats)})
        fig = plots.latency_bars(table, "ResNet50 ONNX: local vs Triton")
        text = _texts(fig)
        if whisker:
            assert whisker in text and "p50 only" not in text
        else:
            assert "p50 only: 5 samples per row, too few for a p90 or p99" in text and "p50 to" not in text
        _check(fig, ["local", "Triton HTTP"])


def test_capacity_figure_draws_each_plans_budget():
    """20's simulated latency per replica count: a dashed p99 budget in each panel, named in its legend."""
    from helpers import k8s

    sims = {(where, n): k8s.simulate(n, rate, 2.5 * rate, base_ms=base, seconds=5)
            for where, rate, base in (("this machine (cpu)", 44.0, 28.0), ("NVIDIA H100 80GB HBM3 (notebook 13's gRPC row, docs/runs/gpu)",
                                                                           4500.0, 2.0)) for n in (3, 4, 5)}
    fig = plots.simulated_latency(sims, "Simulated latency", budgets={"this machine (cpu)": 400.0,
                                                                     "NVIDIA H100 80GB HBM3 (notebook 13's gRPC row, docs/runs/gpu)": 10.0})
    text = _texts(fig)
    assert "p99 budget, 400 ms" in text and "p99 budget, 10 ms" in text
    _check(fig, ["this machine (cpu)"])
