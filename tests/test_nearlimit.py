"""helpers/nearlimit.py: the plumbing notebooks 14 and 16 share (no server needed)."""
from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from helpers import nearlimit

CONFIG = """name: "m"
max_batch_size: 8
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { }
model_warmup [
  { name: "b1" batch_size: 1 count: 2 },
  { name: "b2" batch_size: 2 count: 2 }
]
"""


def test_config_differences_show_each_change_once():
    changed = CONFIG.replace("count: 1 kind", "count: 2 kind").replace('name: "m"', 'name: "m_i2"')
    said = nearlimit.config_differences(CONFIG, changed)
    assert '- name: "m"' in said and '+ name: "m_i2"' in said and "+ instance_group [ { count: 2" in said
    a = "a\n  k: 1\nb\n  k: 1\nc"  # the same change made twice: shown once, x2
    assert nearlimit.config_differences(a, a.replace("k: 1", "k: 2")) == "    - k: 1\n    + k: 2   (x2)"
    assert nearlimit.config_differences(CONFIG, CONFIG) == ""


def test_shortened_names_what_it_leaves_out():
    long = "\n".join(f"line {i}" for i in range(40))
    short = nearlimit.shortened(long, head=3, tail=2)
    assert short.splitlines()[:3] == ["line 0", "line 1", "line 2"] and short.splitlines()[-1] == "line 39"
    assert "35 more lines" in short
    assert nearlimit.shortened(CONFIG) == CONFIG.rstrip("\n")


def test_unregister_retries_in_use_and_raises_anything_else():
    calls = []

    def busy_twice(name):
        calls.append(name)
        if len(calls) < 3:
            raise RuntimeError("shared memory region 'x' is in use")
        return "done"

    assert nearlimit.unregister(busy_twice, "x", wait_s=0) == "done" and len(calls) == 3
    with pytest.raises(RuntimeError, match="in use"):
        nearlimit.unregister(lambda name: (_ for _ in ()).throw(RuntimeError("in use")), "x", tries=2, wait_s=0)
    with pytest.raises(KeyError):
        nearlimit.unregister(lambda name: {}[name], "x", wait_s=0)


def _row(label, throughput, p99=5.0, stable=True):
    return {"variant": label, "stable": stable, "throughput": throughput, "p99_ms": p99}


def test_winner_rule_takes_the_baseline_and_the_two_fastest_within_the_budget():
    order = ["base", "a", "b", "c"]
    rows = {"base": _row("base", 10), "a": _row("a", 50, p99=99), "b": _row("b", 30), "c": _row("c", 20)}
    speeds = {"base": [10, 11, 12], "b": [30, 31, 32], "c": [20, 21, 22]}
    made = []

    def measure(label):
        made.append(label)
        return _row(label, speeds[label][sum(m == label for m in made) - 1])

    result = nearlimit.winner_rule(rows, order, measure, baseline="base", p99_budget_ms=10, repeats=3)
    assert result["finalists"] == ["base", "b", "c"]  # "a" is over the budget; listed simplest first
    assert made[:3] == ["base", "b", "c"] and len(made) == 9  # in turns, three runs each
    assert result["winner"] == "b" and rows["b"]["throughput"] == 31 and rows["b"]["repeats"] == 3
    # each finalist keeps the screening run that made it one; a row left out keeps its one run and no `screened`
    assert [rows[label].get("screened") for label in order] == [10, None, 30, 20]
    assert "screened" in nearlimit.shown_columns(pd.DataFrame(list(rows.values())), False).columns
    assert nearlimit.verdicts(["base", "a", "b"], result) == ["finalist", "", "wins"]
    assert "3 runs each" in nearlimit.rule_said(result, 3)
    record = nearlimit.contest_record(result, 3)
    assert record["winner"] == "b" and len(record["runs"]) == 9 and json.dumps(record)
    assert nearlimit.winner_rule(dict(rows), order, measure, baseline="base", p99_budget_ms=10, repeats=1) is None
    assert nearlimit.verdicts(["base"], None) == [""] and nearlimit.contest_record(None, 1) is None
    short = {"finalists": ["base", "b"], "winner": None, "kept": "b", "verdict": "no winner: fewer stable runs than asked"}
    assert nearlimit.verdicts(["base", "b"], short) == ["finalist", "kept (no winner)"]
    assert nearlimit.verdicts(["base", "b"], {**short, "verdict": "tie within noise: ..."})[1] == "kept (tie within noise)"


def test_kept_is_the_rules_pick_else_the_fastest_within_the_budget():
    ok = pd.DataFrame([_row("base", 10), _row("fast", 50, p99=99), _row("b", 30)]).set_index("variant")
    assert nearlimit.kept(ok, None, 10) == "b" and nearlimit.kept(ok, None, 100) == "fast"
    assert nearlimit.kept(ok, {"kept": "base"}, 10) == "base"
    assert nearlimit.kept(ok, None, 1) == "fast"  # none within the budget: the fastest
    with pytest.raises(ValueError, match="no stable variant"):
        nearlimit.kept(ok.iloc[0:0], None, 10)


def test_knee_table_and_curves_count_images_in_flight():
    knees = {"one": {"rows": [{"concurrency": 2, "throughput": 10, "p99_ms": 1}, {"concurrency": 4, "throughput": 12,
                                                                                   "p99_ms": 2}],
                     "knee": {"concurrency": 4, "throughput": 12, "p99_ms": 2}, "above": None, "why": "top level"},
             "batched": {"rows": [{"concurrency": 1, "throughput": 14, "p99_ms": 3}], "knee": None,
                         "above": {"concurrency": 1}, "why": "over budget"}}
    table = nearlimit.knee_table(knees, {"one": 1, "batched": 4})
    assert table["levels (in order)"].tolist() == [[2, 4], [1]] and table.loc[0, "images in flight"] == 4
    assert pd.isna(table.loc[1, "knee c"]) and table.loc[1, "level above"] == 1
    curves = nearlimit.knee_curves(knees, {"one": 1, "batched": 4})
    assert list(curves) == ["one", "batched (x 4)"] and curves["batched (x 4)"]["concurrency"].tolist() == [4]
    # a search measures 16, 32, 64, 128, then 96: its curve runs by level, so its line does not double back
    searched = {"rows": [{"concurrency": c, "throughput": c * 10.0, "p99_ms": c / 10} for c in (16, 32, 64, 128, 96)]}
    curve = nearlimit.knee_curves({"s": searched}, {"s": 2})["s (x 2)"]
    assert curve["concurrency"].tolist() == [32, 64, 128, 192, 256]
    lines = nearlimit.knee_lines(table)
    assert "no knee reached; top level searched at c=4 (4 images in flight)" in lines[0]  # nothing above it was measured
    assert lines[1].startswith("knee search 'batched': no knee;")
    table.loc[0, "level above"] = 8  # a level over the budget above it: a knee
    assert "'one': knee at c=4 (4 images in flight)" in nearlimit.knee_lines(table)[0]
    assert nearlimit.clean(table.to_dict(orient="records"))[1]["knee c"] is None
    # a batch-1 search whose knee is at a higher load than the kept one's is named, with its rate at the loads both
    # searched; a client-batched search is not
    more = {**knees, "two": {"rows": [{"concurrency": 4, "throughput": 12.5, "p99_ms": 1},
                                      {"concurrency": 8, "throughput": 20, "p99_ms": 1}],
                             "knee": {"concurrency": 8, "throughput": 20, "p99_ms": 1}, "above": None, "why": "top level"}}
    more["one"]["knee"] = {**more["one"]["knee"], "repeats": 3}
    table = nearlimit.knee_table(more, {"one": 1, "batched": 4, "two": 1})
    rows = pd.DataFrame([{"search": label, **row} for label, found in more.items() for row in found["rows"]])
    top = "its top level searched, no knee reached"  # numbers review s23 2: neither search above reached a knee
    assert nearlimit.other_knee_lines(table, rows, "one") == [
        f"'two' ended its search at a higher load than the kept 'one': c=8 ({top}; one run) against c=4 ({top}; the "
        "median of 3 runs); at the loads both searched (c=4) its rate was 1.04x the kept's"]
    table.loc[table["search"] == "one", "level above"] = 8  # a level over the budget above it: a knee
    assert "against c=4 (its knee; the median of 3 runs)" in nearlimit.other_knee_lines(table, rows, "one")[0]
    table = nearlimit.knee_table(more, {"one": 1, "batched": 4, "two": 1})
    assert nearlimit.other_knee_lines(table, rows, "two") == [] and nearlimit.other_knee_lines(table, rows, "x") == []
    # a search with its knee at the same load is named only when it served more at every load both searched
    same = {**more, "two": {**more["two"], "knee": {"concurrency": 4, "throughput": 12.5, "p99_ms": 1}}}
    table = nearlimit.knee_table(same, {"one": 1, "batched": 4, "two": 1})
    assert nearlimit.other_knee_lines(table, rows, "one") == [
        f"'two' ended its search at the same load as the kept 'one', c=4 ({top}; one run; the kept: {top}; the median "
        "of 3 runs), with a higher rate there and at every load above it that both searched (c=4: 1.04x the kept's); "
        "at the loads both searched (c=4) its rate was 1.04x the kept's"]
    slower = rows.assign(throughput=[11.0 if (s, c) == ("two", 4) else t for s, c, t in
                                     zip(rows["search"], rows["concurrency"], rows["throughput"])])
    assert nearlimit.other_knee_lines(table, slower, "one") == []
    # the kept variant has no knee (its first level was over the budget): every batch-1 search with a knee is named
    over = {**more, "one": {"rows": [{"concurrency": 4, "throughput": 12, "p99_ms": 99}], "knee": None,
                            "above": {"concurrency": 4}, "why": "p99 99 ms at concurrency 4 is over the 10 ms budget"}}
    table = nearlimit.knee_table(over, {"one": 1, "batched": 4, "two": 1})
    rows = pd.DataFrame([{"search": label, **row} for label, found in over.items() for row in found["rows"]])
    assert nearlimit.other_knee_lines(table, rows, "one") == [
        f"'two' has a level within the budget where the kept 'one' has none: c=8 ({top}; one run); 'one' stopped: p99 "
        "99 ms at concurrency 4 is over the 10 ms budget; at the loads both searched (c=4) its rate was 1.04x the kept's"]


def test_lever_lines_and_the_served_split():
    levers = pd.DataFrame([{"lever": "batch-1", "stable": True, "throughput": 10.0, "p99_ms": 5.0, "x batch-1": 1.0},
                           {"lever": "4 per request", "stable": True, "throughput": 20.0, "p99_ms": 4.0, "x batch-1": 2.0,
                            "repeats": 3, "throughput_min": 19.0, "throughput_max": 21.0},
                           {"lever": "C API", "stable": False, "throughput": float("nan"), "p99_ms": float("nan"),
                            "x batch-1": float("nan"), "error": "stopped"}])
    lines = nearlimit.lever_lines(levers, 16)
    assert lines == ["lever at 16 images in flight: 4 per request: 20 infer/s (3 runs: 19-21) (p99 4.0 ms), 2.00x the "
                     "batch-1 row", "lever at 16 images in flight: C API: not measured (stopped)"]
    levers.loc[2, ["stable", "throughput", "p99_ms", "x batch-1"]] = [True, 15.0, 3.0, 1.5]
    levers["server"] = [None, None, "perf_analyzer's own server"]
    assert nearlimit.lever_lines(levers, 16)[1] == ("lever at 16 images in flight: C API: 15 infer/s (p99 3.0 ms), 1.50x "
                                                    "the batch-1 row (two servers: this row ran in perf_analyzer's own server)"
                                                    "; one run: no gain this run can tell")
    # repeated rows: a gain only when the ranges do not overlap (the batch-1 row's range, or its one figure)
    levers.loc[0, ["repeats", "throughput_min", "throughput_max"]] = [3, 9.0, 19.5]
    assert nearlimit.lever_lines(levers, 16)[0].endswith("2.00x the batch-1 row; its range overlaps the batch-1 row's: "
                                                         "no gain this run can tell")
    assert not nearlimit.lever_lines(levers, 16)[0].endswith("server)")
    # Triton counts a batch's compute once per request in it: 12 ms per request, 11 ms per execution
    knee = pd.Series({"concurrency": 8, "throughput": 100.0, "compute_infer_ms": 12.0, "queue_ms": 3.0, "network_ms": 1.0,
                      "client_cores": 1.5, "server compute_infer_ms_per_execution": 11.0})
    said = nearlimit.served_split(knee, 10.0, 200.0, "4", 2)
    assert "served 100 infer/s = 50% of in-process batch 4, 2 at once (200 img/s)" in said
    assert re.search(r"^compute infer per batch beyond in-process batch 4 +1\.0$", said, re.M) and "queue " in said
    assert re.search(r"^compute infer per request above the mean batch's +1\.0$", said, re.M)
    assert "larger batches weigh more" in said and "measured windows and every run of the level" in said
    # a served row against in-process, where the reference is no slower than the server's own batches
    lever = pd.Series({"throughput": 90.0, "p99_ms": 4.0, "server compute_infer_ms_per_execution": 11.0})
    assert nearlimit.versus_inprocess(lever, 10.0, 100.0, 4.0, 1, "w") == (
        "w: served 90 infer/s = 90% of in-process batch 4, 1 at once (100 img/s), p99 4.00 ms")
    assert nearlimit.versus_inprocess(lever, 12.0, 100.0, 4.0, 1, "w") == (
        "w: not set against in-process: in-process batch 4 took 12.0 ms per stream, the server's batches 11.0 ms")
    assert re.search(r"^in-process batch 4 +10\.0$", said, re.M)
    assert "the server's mean batch took 11.00 ms to compute (its execution statistics" in said
    # the reference already runs one stream per instance: the part beyond it is not named as contention
    assert said.startswith("at the knee (c=8): served") and "the part beyond in-process, 2 stream(s) at once" in said
    alone = nearlimit.served_split(knee, 10.0, 200.0, "4", 1)
    assert "the part beyond in-process, 1 stream(s) at once" in alone and "contention" not in alone + said
    top = nearlimit.served_split(knee, 10.0, 200.0, "4", 2, "at the top level searched (c=8; no knee reached)")
    assert top.startswith("at the top level searched (c=8; no knee reached): served 100 infer/s")


def test_saved_names_the_notebook_to_run_first(tmp_path):
    with pytest.raises(FileNotFoundError, match="run notebook 14_near_the_limit first"):
        nearlimit.saved(tmp_path, "14_near_the_limit")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "14_near_the_limit.json").write_text('{"best": "x"}')
    assert nearlimit.saved(tmp_path, "14_near_the_limit") == {"best": "x"}


def test_a_models_shared_memory_rate_sizes_the_windows_of_its_grpc_row(tmp_path, monkeypatch):
    """Rows keeps each model's fastest stable request rate; its later row with tensors in the requests gets fewer
    trials (whole-second windows at that rate), or is not run when three windows would pass the limit."""
    from types import SimpleNamespace

    from helpers import metrics, perf

    calls = []

    def level(model, url, csv, concurrency, **settings):
        calls.append(settings)
        return {"concurrency": concurrency, "stable": True, "throughput": 6000.0 * settings.get("batch_size", 1),
                "p99_ms": 2.0}

    monkeypatch.setattr(perf, "measure_level", level)
    monkeypatch.setattr(metrics, "scrape", lambda url: {})
    monkeypatch.setattr(metrics, "executions", lambda url, model: (0, 0, 0))
    server = SimpleNamespace(grpc_url="127.0.0.1:1", metrics_url="127.0.0.1:2", url="127.0.0.1:3")
    rows = nearlimit.Rows(server, tmp_path, "t", base={}, limit_gb=24, trials=6, most=2000, warmup_requests=0)
    fp32 = 3 * 224 * 224 * 4
    before = rows.measure("grpc first", "other", fp32, {}, 16)  # no rate known yet: sized from the limit alone
    assert before["stable"] and calls[-1]["max_trials"] == 6
    rows.measure("shm", "m", fp32, {"shared_memory": "system"}, 16)
    assert rows.rates == {"other": 6000.0, "m": 6000.0} and calls[-1]["max_trials"] == 6
    rows.measure("grpc", "m", fp32, {}, 16)
    assert calls[-1]["max_trials"] == perf.request_budget(fp32, 24) // 6000 < 6
    small = nearlimit.Rows(server, tmp_path, "s", base={}, limit_gb=3.5, trials=6, most=2000, warmup_requests=0)
    small.measure("shm", "m", fp32, {"shared_memory": "system", "batch_size": 4}, 16)
    assert small.rates == {"m": 6000.0}  # 24,000 images/s in requests of 4
    refused = small.measure("grpc", "m", fp32, {}, 16)
    assert not refused["stable"] and "expected room for 3 count windows" in refused["error"] and len(calls) == 4
    # measure_all: shared-memory rows first, whatever their place; the rows come back in the given order
    order = []
    monkeypatch.setattr(nearlimit.Rows, "measure", lambda self, label, *spec: order.append(label) or {"variant": label})
    specs = {"a grpc": ("m", fp32, {}), "a shm": ("m", fp32, {"shared_memory": "system"}), "b grpc": ("n", fp32, {})}
    assert list(rows.measure_all(specs, 16)) == list(specs) and order == ["a shm", "a grpc", "b grpc"]


def test_a_row_the_memory_guard_stops_is_measured_once_more_with_three_windows(tmp_path, monkeypatch, capsys):
    """A gRPC row stopped by the memory guard runs again with --max-trials 3 and says so; one already at 3 windows,
    or a row through shared memory, is not run again."""
    from types import SimpleNamespace

    from helpers import metrics, perf

    calls = []

    def level(model, url, csv, concurrency, **settings):
        calls.append(settings)
        if settings["max_trials"] > perf.STABLE_WINDOWS or model == "always":
            return {"concurrency": concurrency, "stable": False, "throughput": float("nan"), "p99_ms": float("nan"),
                    "error": "perf_analyzer passed the memory limit of 24 GB (24724 MB resident after 13 s)"}
        return {"concurrency": concurrency, "stable": True, "throughput": 3000.0, "p99_ms": 5.0, "error": ""}

    monkeypatch.setattr(perf, "measure_level", level)
    monkeypatch.setattr(metrics, "scrape", lambda url: {})
    monkeypatch.setattr(metrics, "executions", lambda url, model: (0, 0, 0))
    server = SimpleNamespace(grpc_url="127.0.0.1:1", metrics_url="127.0.0.1:2", url="127.0.0.1:3")
    rows = nearlimit.Rows(server, tmp_path, "t", base={}, limit_gb=24, trials=6, most=2000, warmup_requests=100)
    fp32 = 3 * 224 * 224 * 4
    row = rows.measure("grpc", "m", fp32, {}, 16)
    assert [c["max_trials"] for c in calls] == [6, 3] and calls[1]["warmup_requests"] == 0
    assert row["stable"] and row["throughput"] == 3000.0 and "max-trials 3" in row["memory_retry"]
    assert "measured once more with 3" in capsys.readouterr().out
    calls.clear()
    shm = rows.measure("shm", "other", fp32, {"shared_memory": "system"}, 16)
    assert [c["max_trials"] for c in calls] == [6] and not shm["stable"] and "memory_retry" not in shm
    calls.clear()
    again = rows.measure("grpc", "always", fp32, {}, 16)
    assert [c["max_trials"] for c in calls] == [6, 3] and not again["stable"] and "memory limit" in again["error"]


def test_in_process_at_the_servers_mean_batch_lies_between_the_whole_batches():
    assert nearlimit.around(1.4) == [1, 2] and nearlimit.around(7.0) == [7]
    with pytest.raises(ValueError, match="at least 1"):
        nearlimit.around(0.5)
    # two streams: batch 1 at 40 img/s (50 ms per batch), batch 2 at 50 img/s (80 ms per batch)
    ms, rate = nearlimit.at_mean_batch({1: 40.0, 2: 50.0, 8: 90.0}, 1.4, 2)
    assert ms == pytest.approx(50 + 0.4 * 30) and rate == pytest.approx(1000 * 1.4 * 2 / 62)
    assert nearlimit.at_mean_batch({4: 80.0}, 4.0, 1) == pytest.approx((50.0, 80.0))
    with pytest.raises(ValueError, match=r"batches \[2, 3\] expected around the mean batch 2.50; measured at \[1, 2\]"):
        nearlimit.at_mean_batch({1: 40.0, 2: 50.0}, 2.5, 2)


def test_withheld_says_how_many_instances_the_server_kept_busy():
    """Reviews s24 and s25 (GPU, 16): the reference runs one stream per instance; at the knee the server kept fewer
    busy, counted with an instance's whole time per execution (compute input, infer and output), so the reference's
    batch came out slower; the ratio is then printed as the product of two measured factors, with no cause asserted."""
    knee = pd.Series({"throughput": 23800.0, "server avg_batch": 45.45, "server compute_infer_ms_per_execution": 2.23,
                      "server instance_ms_per_execution": 2.82})
    said = nearlimit.withheld(knee, 2.5, 2.23, "45.5", 2, "at the knee (c=128)")
    assert said.startswith("in-process batch 45.5 took 2.5 ms per stream, 2 stream(s) at once; the server's mean batch "
                           "took 2.2 ms to compute at the knee (c=128), so the gap is not split by stage ")
    assert ("the server kept 1.48 of its 2 instances busy on average (524 executions/s x 2.82 ms of compute input, "
            "infer and output each), the reference all 2 all the time") in said
    assert said.endswith("the rates still compare, as the product below")
    assert nearlimit.rates_compare(knee, 2.5, 2.23, 2)
    # a row from before the whole time was read: compute infer alone
    older = knee.drop("server instance_ms_per_execution")
    assert nearlimit.busy_instances(older)[1] == pytest.approx(23800 / 45.45 * 2.23 / 1000)
    busy = pd.Series({"throughput": 40000.0, "server avg_batch": 45.45, "server instance_ms_per_execution": 2.82})
    assert not nearlimit.rates_compare(busy, 2.5, 2.23, 2) and not nearlimit.rates_compare(knee, 2.5, 2.23, 1)
    assert ("served/in-process is not printed here: the server kept 2.48 of its 2 instance(s) busy, not clearly fewer "
            "than the reference's streams") in nearlimit.withheld(busy, 2.5, 2.23, "45.5", 2, "w")
    assert "may have shared the device" in nearlimit.withheld(knee, 2.5, 2.23, "45.5", 1, "w")
    # the rates, without the split by stage: the ratio as busy share x in-process batch over an instance's time
    said = nearlimit.served_split(knee, 2.5, 36590.0, "45.5", 2, "at the knee (c=128)", by_stage=False)
    assert said.startswith("at the knee (c=128): served 23800 infer/s = 65% of in-process batch 45.5, 2 at once")
    assert said.endswith("served/in-process = 1.48 of 2 instances busy (74%) x in-process batch over an instance's "
                         "time per batch (2.50 / 2.82 ms, compute input and output included: 0.89)")
    assert 0.74 * 0.89 == pytest.approx(23800 / 36590, abs=0.01)  # the product is the ratio
    assert "where an average request's time went" not in said and "idle" not in said
    lever = pd.Series({"throughput": 23800.0, "p99_ms": 5.0, "server avg_batch": 45.45,
                       "server compute_infer_ms_per_execution": 2.23, "server instance_ms_per_execution": 2.82})
    assert nearlimit.versus_inprocess(lever, 2.5, 36590.0, 45.45, 2, "w") == (
        "w: served 23800 infer/s = 65% of in-process batch 45.5, 2 at once (36590 img/s) = 1.48 of 2 instances busy "
        "(74%) x in-process batch over an instance's time per batch (2.50 / 2.82 ms, compute input and output "
        "included: 0.89), p99 5.00 ms")


def test_a_repeated_level_keeps_the_single_run_that_picked_it(tmp_path, monkeypatch, capsys):
    """Review s24 (GPU, 16): a level reused from the knee search was measured again `repeats` times; the single run
    (the one the plot shows) lay outside their range and nothing said so."""
    from types import SimpleNamespace

    from helpers import metrics, perf

    monkeypatch.setattr(perf, "measure_level", lambda model, url, csv, c, **s: {"concurrency": c, "stable": True,
                                                                                "throughput": 15642.1, "p99_ms": 2.0})
    monkeypatch.setattr(perf, "repeat_level", lambda model, url, csv, c, repeats, **s: {
        "concurrency": c, "stable": True, "throughput": 12932.2, "throughput_min": 12914.4, "throughput_max": 13103.8,
        "p99_ms": 2.1, "repeats": repeats})
    monkeypatch.setattr(metrics, "scrape", lambda url: {})
    monkeypatch.setattr(metrics, "executions", lambda url, model: (0, 0, 0))
    server = SimpleNamespace(grpc_url="127.0.0.1:1", metrics_url="127.0.0.1:2", url="127.0.0.1:3")
    rows = nearlimit.Rows(server, tmp_path, "t", base={}, limit_gb=24, trials=6, most=2000, warmup_requests=0, reuse=True)
    rows.measure("v, 16 images per request", "m", 16, {"batch_size": 16}, 1)
    assert "reused" in (rows.measure("v, 16 images per request", "m", 16, {"batch_size": 16}, 1) and capsys.readouterr().out)
    again = rows.measure("v, 16 images per request", "m", 16, {"batch_size": 16}, 1, times=3)
    assert again["screened"] == 15642.1 and again["throughput"] == 12932.2
    assert ("its single run above gave 15642.1 infer/s, outside these 3 runs' range 12914.4-13103.8"
            in capsys.readouterr().out)
    fresh = rows.measure("w", "m", 16, {}, 1, times=3)  # no single run before it: nothing to keep
    assert "screened" not in fresh and "outside" not in capsys.readouterr().out
