"""docs/benchmarks.md, whole, and the generated blocks of README.md and docs/*.md, rendered from the two recordings
(docs/runs/gpu, docs/runs/cpu) and the archive of older ones (docs/data/archive/<name>/), so no measured number on
those pages is typed by hand.

    python scripts/benchmark_numbers.py           # print benchmarks.md as it would be rendered
    python scripts/benchmark_numbers.py --write   # write benchmarks.md and every generated block
    python scripts/benchmark_numbers.py --claims  # the claims in prose without a source (tests/test_claims.py)

One renderer reads a recording folder: run.json (conditions), results/<notebook>.json and the NN_*.csv and NN_*.png
files the notebooks saved. A section whose data the recording lacks says so on the page. A block elsewhere is
`<!-- generated: NAME -->...<!-- /generated -->`; tests/test_benchmark_numbers.py fails when a committed page
differs from its rendering, tests/test_generated_docs.py when a measured figure stands outside a block.
"""
from __future__ import annotations

import csv
import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from helpers import nearlimit, plots, recordings  # noqa: E402
from helpers.perf import LATENCY_PARTS  # noqa: E402  (they add up to a request's mean latency)

RUNS = ROOT / "docs" / "runs"
ARCHIVE = ROOT / "docs" / "data" / "archive"
DOC = ROOT / "docs" / "benchmarks.md"
BLOCK = re.compile(r"<!-- generated: (?P<name>[\w-]+) -->(?P<body>.*?)<!-- /generated -->", re.S)
BLOCK_DOCS = ("README.md", "docs/workshop.md", "docs/cluster.md", "docs/glossary.md", "solutions/answers.md")


class Missing(LookupError):
    """A section's data is not in the recording."""


# ------------------------------------------------------------------------------------------------ reading a recording
def recording(folder: Path) -> dict:
    """A recording folder read whole: run.json, results by notebook number, and its NN_*.csv / NN_*.png names."""
    run_file = folder / "run.json"
    run = json.loads(run_file.read_text()) if run_file.exists() else {}
    results = {p.stem[:2]: json.loads(p.read_text()) for p in sorted((folder / "results").glob("*.json"))}
    results.update({p.name[:2]: json.loads(p.read_text()) for p in sorted(folder.glob("[0-9][0-9]_results.json"))})
    return {"folder": folder, "run": run, "results": results,
            "csv": sorted(p.name for p in folder.glob("[0-9][0-9]_*.csv")),
            "plots": sorted(p.name for p in folder.glob("[0-9][0-9]_*.png"))}


def ran_with(rec: dict, notebook: str) -> dict:
    """The parameters a recorded notebook ran with: its `parameters` cell, then the ones papermill injected."""
    found = sorted(rec["folder"].glob(f"{notebook}_*.ipynb"))
    values: dict = {}
    for cell in json.loads(found[0].read_text())["cells"] if found else []:
        tags = cell["metadata"].get("tags", [])
        if "parameters" in tags or "injected-parameters" in tags:  # literal assignments only, in this order
            exec("".join(cell["source"]), {}, values)
    return values


def _load(rec: dict, notebook: str, concurrency: str, transport: str) -> str:
    """'Concurrency 16 over gRPC, tensors through system shared memory, count windows of 1000 requests' from the
    parameters a notebook ran with; '' where the recording has no such notebook."""
    given = ran_with(rec, notebook)
    if concurrency not in given:
        return ""
    window = given.get("measurement_request_count")
    return (f"Concurrency {given[concurrency]} over {transport}"
            + (f", count windows of {window} requests" if window else ""))


def need(rec: dict, notebook: str, *keys: str):
    """results/<notebook>.json's value at `keys`; Missing names the file and key where it is absent."""
    value = rec["results"].get(notebook)
    if value is None:
        raise Missing(f"no results of notebook {notebook} (expected results/{notebook}_*.json)")
    for key in keys:
        if not isinstance(value, dict) or value.get(key) is None:
            raise Missing(f"notebook {notebook}'s results have no {'/'.join(keys)}")
        value = value[key]
    return value


def _num(value) -> float | None:
    """A float, or None for a missing or NaN value."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _f(value, fmt: str = ".0f") -> str:
    """A number formatted, or '-' where there is none."""
    number = _num(value)
    return "-" if number is None else format(number, fmt)


def _contest_runs(contest: dict | None, setting: str) -> str:
    """'4244-5359 (3 of 3 runs stable)' for one setting of a contest's recorded runs; '' when it has none."""
    runs = [r for r in (contest or {}).get("runs") or [] if r.get("setting") == setting]
    ok = [_num(r.get("throughput")) for r in runs if r.get("stable") in (True, "True", 1)]
    ok = [v for v in ok if v is not None]
    if not ok:
        return f"no stable run of {len(runs)}" if runs else ""
    return f"{min(ok):.0f}-{max(ok):.0f} ({len(ok)} of {len(runs)} runs stable)"


def _range(row: dict, low: str = "throughput_min", high: str = "throughput_max") -> str:
    """'4587-7114 (3 runs)' for a repeated row, '-' for a row with no figure, 'one run' otherwise."""
    if _num(row.get("throughput")) is None:
        return "-"
    lo, hi, runs = _num(row.get(low)), _num(row.get(high)), _num(row.get("repeats"))
    if lo is None or hi is None or not runs or runs < 2:
        return "one run"
    return f"{lo:.0f}-{hi:.0f} ({runs:.0f} runs, {hi / lo - 1:.0%} apart)"


def _repeated(*rows: dict) -> bool:
    """Whether any of `rows` is the median of several runs (else each is one run, and 'medians' would say too much)."""
    return any((_num(row.get("repeats")) or 0) > 1 for row in rows)


def _little_rate(row: dict) -> float | None:
    """A stable row's concurrency over its mean latency (Little's law), in images per second."""
    parts = [_num(row.get(k)) for k in LATENCY_PARTS]
    concurrency = _num(row.get("concurrency"))
    if None in parts or not concurrency or not sum(parts) or row.get("stable") not in (True, "True", 1):
        return None
    return concurrency * (_num(row.get("images/request")) or 1) * 1000 / sum(parts)


LITTLE_COLUMN = ("c / latency", "c_over_latency", ".0f")


def _little_column(rows: list[dict]) -> list[tuple[str, str, str]]:
    """Sets each row's concurrency over mean latency ('c_over_latency'); the table column for it, or none where no
    row has one (a recording that kept no latency parts)."""
    for row in rows:
        row["c_over_latency"] = _little_rate(row)
    return [LITTLE_COLUMN] if any(row["c_over_latency"] for row in rows) else []


IN_FLIGHT_DOC = "https://github.com/triton-inference-server/perf_analyzer/blob/main/src/infer_context.cc"
LITTLE_NOTE = ("c / latency: the concurrency (times the images per request) over the mean latency (Little's law), the "
               "rate with every slot always holding a request.")
FAR_BELOW = 0.02  # a row this much below its c / latency, and 3x the table's median gap, is named by the note


def _little_note(rows: list[dict], name: Callable[[dict], str], carries: Callable[[dict], bool]) -> list[str]:
    """LITTLE_NOTE, and the rows that print far below their c / latency; the cause from perf_analyzer's source only
    where every one of them carries its tensors in the request (`carries`), the span of the gaps where none is far."""
    # a repeated row's latencies are its middle run's: its gap is that run's own rate against them
    rate = lambda r: _num(r.get("middle_throughput")) or _num(r.get("throughput"))  # noqa: E731
    found = [(name(r), 1 - rate(r) / r["c_over_latency"], carries(r)) for r in rows
             if r.get("c_over_latency") and rate(r) is not None]
    if not found:
        return []
    gaps = [g for _, g, _ in found]
    middle = statistics.median(gaps)
    far = [(n, g, c) for n, g, c in found if g > max(FAR_BELOW, 3 * middle)]
    if not far:
        return [f"{LITTLE_NOTE} Every row here printed {min(gaps):.1%} to {max(gaps):.1%} below it.", ""]
    named = f"{LITTLE_NOTE} Far below it: " + ", ".join(f"{n} ({g:.1%})" for n, g, _ in far) + \
        f", against a median of {middle:.1%}."
    if not all(c for _, _, c in far):
        return [named + " Not all of them carry their tensors in the request: this page does not measure why.", ""]
    return [named + f" Their requests carry their tensors. perf_analyzer copies a request's inputs before its clock "
            f"starts (`SendRequest` in [infer_context.cc]({IN_FLIGHT_DOC})), and the slot holds no request meanwhile: "
            "such a row can print less than its c / latency, and a ratio to a shared-memory row holds that too.", ""]


def _model_14(results: dict) -> str:
    """What notebook 14's batched variants serve besides batching and bytes: its traced model's options."""
    return "its model " + ("FP16 inside, " if results.get("fp16") else "") + "frozen, channels_last"


def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> list[str]:
    """A markdown table of `rows`: each column (header, key, format; format '' prints the value as it is)."""
    lines = ["| " + " | ".join(h for h, _, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [(_f(row.get(k), fmt) if fmt else str(row.get(k, "-"))).replace("|", "/") for _, k, fmt in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _top_level(levels) -> str:
    """The highest concurrency of perf_analyzer's `start:end:step` range (or of a single level)."""
    parts = str(levels).split(":")
    return parts[1] if len(parts) > 1 else parts[0]


def _settings(settings) -> str:
    """'instances 2, preferred batch sizes [8, 16], ...' from a settings dict."""
    if not isinstance(settings, dict):
        return "not recorded"
    return ", ".join(f"{k} {v}" for k, v in settings.items())


def _plots(rec: dict, notebook: str) -> list[str]:
    """The recording's plots of one notebook, as images linked from docs/."""
    rel = rec["folder"].relative_to(ROOT / "docs").as_posix()
    return [f"![{name}]({rel}/{name})" for name in rec["plots"] if name.startswith(notebook + "_")]


def _plots_named(rec: dict, suffix: str) -> list[str]:
    """The recording's plots whose name ends with `suffix` (e.g. `_saturation.png`), whichever notebook made them."""
    rel = rec["folder"].relative_to(ROOT / "docs").as_posix()
    return [f"![{name}]({rel}/{name})" for name in rec["plots"] if name.endswith(suffix)]


def _holding(rec: dict, key: str) -> tuple[str, dict]:
    """(notebook, results) of the newest notebook whose results hold `key`: the knee and the levers were 14's until
    the split and are 16's since, so both kinds of recording render."""
    for notebook in sorted(rec["results"], reverse=True):
        if rec["results"][notebook].get(key) is not None:
            return notebook, rec["results"][notebook]
    raise Missing(f"no results hold {key} (expected results/16_*.json, or 14's in a recording made before the split)")


def _best(variants: list[dict]) -> dict | None:
    """The stable row with the highest throughput."""
    ok = [v for v in variants if v.get("stable") and _num(v.get("throughput")) is not None]
    return max(ok, key=lambda v: float(v["throughput"])) if ok else None


def _kept(results: dict, variants: list[dict]) -> dict | None:
    """The row notebook 14 kept (its winner rule's, `best` in its results), else the fastest stable row."""
    return next((v for v in variants if v.get("variant") == results.get("best") and _num(v.get("throughput"))),
                None) or _best(variants)


def _baseline(variants: list[dict]) -> dict | None:
    """The article's configuration among 14's variants."""
    return next((v for v in variants if str(v.get("variant", "")).startswith("article baseline")
                 and _num(v.get("throughput")) is not None), None)


def _knee_short(results: dict) -> str:
    """The knee for a table cell: 'X at c=Y', '>= X at c=Y (top level)', 'none' or '-'."""
    knee = results.get("knee")
    if not results:
        return "-"
    if not knee:
        return "none found"
    levels = [_num(r.get("concurrency")) for r in results.get("saturation", []) if _num(r.get("concurrency"))]
    text = f"{_f(knee.get('throughput'))} at c={_f(knee.get('concurrency'))}"
    budget, p99 = _budget_ms(results), _num(knee.get("p99_ms"))
    if budget is not None and p99 is not None and p99 > budget:  # an older search kept a level its own runs put over
        text += f" (its p99 {p99:.1f} ms is over the {_f(budget)} ms budget: no knee by this page's rule)"
    return f">= {text} (top level, no knee)" if levels and _num(knee.get("concurrency")) == max(levels) else text


def _budget_ms(results: dict) -> float | None:
    """The p99 budget a run's knee search used, as its saved search texts state it ('over the 10 ms budget')."""
    said = [str(k.get("stopped because", "")) for k in results.get("knees") or []] + [str(results.get("knee_search", ""))]
    found = {float(m) for text in said for m in re.findall(r"over the ([0-9.]+) ms budget", text)}
    return found.pop() if len(found) == 1 else None


def _knee(results: dict) -> str:
    """The knee as measured: 'X infer/s at c=Y', '>= X infer/s at c=Y (the sweep's top level; no knee reached)', or
    why there is none."""
    knee = results.get("knee")
    if not knee:
        return "not found" + (f": {results['knee_search'][:160]}..." if results.get("knee_search") else "")
    levels = [_num(r.get("concurrency")) for r in results.get("saturation", []) if _num(r.get("concurrency"))]
    top = levels and _num(knee.get("concurrency")) == max(levels)
    text = f"{_f(knee.get('throughput'))} infer/s at c={_f(knee.get('concurrency'))}"
    row = next((r for r in results.get("saturation", []) if _num(r.get("concurrency")) == _num(knee.get("concurrency"))
                and _num(r.get("repeats"))), None)
    search = next((k for k in results.get("knees") or [] if _num(k.get("knee c")) == _num(knee.get("concurrency"))), None)
    first = _num((row or {}).get("search_run"))
    if first is None and search and _num(search.get("runs at the knee")) is None:  # recorded before knees were confirmed
        first = _num(search.get("throughput (img/s)"))
    if row:  # the knee confirmed: its median and range, then the search's own single run
        p99 = (f"; p99 {_f(knee.get('p99_ms'), '.2f')} ms, the runs' {_f(row['p99_min'], '.2f')}-"
               f"{_f(row['p99_max'], '.2f')}" if _num(row.get("p99_min")) is not None else "")
        text += (f" (median of {_f(row['repeats'])} runs, {_f(row.get('throughput_min'))}-{_f(row.get('throughput_max'))}"
                 + p99 + (f"; the search's own run: {_f(first)}" if first is not None else "") + ")")
    return f">= {text} (the sweep's top level: no knee reached)" if top else text


# ----------------------------------------------------------------------------------------------------- the sections
def _window_settings(folder: Path) -> str:
    """The count windows each recorded notebook was given (its papermill parameters), as one sentence; "" if none."""
    given = []
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        p = json.loads(path.read_text()).get("metadata", {}).get("papermill", {}).get("parameters", {})
        if "measurement_request_count" in p:
            given.append(f"{path.stem[:2]}: {p['measurement_request_count']}, "
                         f"{p.get('max_trials', 'the default')}, {p.get('stability_percentage', 'the default ')}%")
    return ("perf_analyzer's count windows, as the profile gave them to each notebook (requests per window, at most "
            "that many windows, stability): " + "; ".join(given) + ". perf_analyzer's own default stability is 10 % "
            "([cli.md](https://github.com/triton-inference-server/perf_analyzer/blob/main/docs/cli.md))."
            if given else "")


def conditions(rec: dict) -> list[str]:
    """Where and with what the recording ran: run.json, and the count windows its notebooks were given."""
    run = rec["run"]
    if not run:
        raise Missing("no run.json")
    world = rec["folder"].name
    machine = run.get("machine") or {}
    calls = _calls(run)
    rows = [{"notebook": stem, "status": e.get("status"), "seconds": e.get("seconds"),
             "commit": (e.get("commit") or run.get("commit") or "unknown")[:7], "call": calls.get(stem)}
            for stem, e in run.get("notebooks", {}).items()]
    groups = {}
    for stem, number in calls.items():
        groups.setdefault(number, []).append(stem[:2])
    gpu = f"{machine['gpu']}, driver {machine.get('driver')}" if machine.get("gpu") else "no GPU"
    where = (f"{gpu}, {machine.get('cpu_cores')} CPU cores" if machine
             else "machines differ (see each notebook's `machine` in run.json)")
    return [f"`docs/runs/{world}`: {where}, `{run.get('profile')}` profile; "
            f"{recordings.label(world) if world in recordings.WORLDS else 'not a current recording'}.",
            *([f"Note: {run['note']}."] if run.get("note") else []),
            *([f"The notebooks ran in {len(groups)} calls of the series runner, one after another, into this folder "
               f"({'; '.join(', '.join(g) for g in groups.values())}; the table's column `call`): notebooks of two calls "
               "ran at two times, and what else held the machine may have changed in between."]
              if len(groups) > 1 else []),
            *([f"The notebooks ran in this order (papermill's start times): {', '.join(s[:2] for s in ran)}; a notebook "
               "that ran before one whose results it reads measured its fallback for them."]
              if (ran := recordings.out_of_order(rec["folder"])) else []),
            *(["The `ci` profile's count windows are a few requests with a loose stability check (notebooks/"
               "profiles.yml): they check the pipeline, not speed. Its verdicts and ratios are not speed claims."]
              if run.get("profile") == "ci" else []),
            *([windows] if (windows := _window_settings(rec["folder"])) else []),
            "Each notebook starts its own Triton servers (12, 13 and 15 more than one; 16's C API row runs one inside "
            "perf_analyzer): the same configuration measured by two notebooks (14's kept row and 15's measurement of "
            "the same pick, say) comes from two servers, and two servers' runs can differ by more than the range of "
            "one server's repeated runs. On a CPU, the other models a server holds may also slow each one (notebook 13's "
            "recap prints the gap and the settings that differ; its markdown names a suspected cause, not measured).", "",
            *table(rows, [("notebook", "notebook", ""), ("status", "status", ""), ("seconds", "seconds", ".0f"),
                          ("commit", "commit", ""), *([("call", "call", "")] if len(groups) > 1 else [])])]


def _calls(run: dict) -> dict[str, int]:
    """Each notebook's call of the series runner (1, 2, ... in the order the calls started), where run.json says."""
    started = sorted({e["call"] for e in run.get("notebooks", {}).values() if e.get("call")})
    return {stem: started.index(e["call"]) + 1 for stem, e in run.get("notebooks", {}).items() if e.get("call")}


def article_comparison(rec: dict) -> list[str]:
    """Notebook 13: the article's three models at its top concurrency, and each against in-process."""
    top = need(rec, "13", "at_top_concurrency")
    speed = need(rec, "13", "speedup_at_top")
    inproc = rec["results"]["13"].get("served_vs_inprocess") or {}
    batch = rec["results"]["13"].get("inprocess_batch")
    base = _num((top.get("baseline") or {}).get("throughput"))

    def ratio(a, b):  # from the measured values, not from ratios the notebook rounded
        return None if _num(a) is None or not _num(b) else _num(a) / _num(b)

    rows = [{"model": name, "infer/s": v.get("throughput"), "p99 (ms)": v.get("p99_ms"),
             "x baseline": ratio(v.get("throughput"), base) if base else (speed.get(name) or {}).get("throughput x"),
             "in-process": (inproc.get(name) or {}).get("in-process (img/s)"),
             "served / in-process": ratio(next((x for k, x in (inproc.get(name) or {}).items() if k.startswith("served at")),
                                               None), (inproc.get(name) or {}).get("in-process (img/s)"))}
            for name, v in top.items()]
    settings = rec["results"]["13"].get("settings") or {}
    level = _num(_top_level(settings.get("concurrency", "")))
    for row in rows:  # a row without a figure: why, from the sweep's own table (perf_analyzer's error, trimmed)
        row["why"] = "" if _num(row["infer/s"]) is not None else _why_13(rec, row["model"], level)
    return [f"The article's comparison at concurrency {_top_level(settings.get('concurrency'))} "
            f"({settings.get('protocol', '?')}, shared memory {settings.get('shared_memory', '?')}; one measurement "
            f"per row). In-process is the same model at batch {batch} in the notebook's own process, so a model "
            f"without batching is compared with a batch it never forms"
            + (f"; at concurrency {level:.0f}, below batch {batch}, the batched models form smaller batches too"
               if level is not None and _num(batch) is not None and level < float(batch) else "") + ":", "",
            *table(rows, [("model", "model", ""), ("infer/s", "infer/s", ".0f"), ("p99 (ms)", "p99 (ms)", ".2f"),
                          ("x baseline", "x baseline", ".2f"), (f"in-process, batch {batch} (img/s)", "in-process",
                                                                ".0f"),
                          ("served / in-process", "served / in-process", ".0%"), ("", "why", "")]), "",
            *[p for p in _plots(rec, "13") if "_knob_" not in p]]


def _why_13(rec: dict, model: str, level: float | None) -> str:
    """Why notebook 13's sweep row of `model` at `level` has no figure: its error in 13_comparison.csv, trimmed."""
    path = rec["folder"] / "13_comparison.csv"
    if not path.exists() or level is None:
        return "no result (no 13_comparison.csv to say why)"
    with path.open(newline="") as f:
        row = next((r for r in csv.DictReader(f)
                    if r.get("model") == model and _num(r.get("concurrency")) == level), None)
    return plots.failure_reason(row.get("error"), 120) if row else f"not measured at concurrency {level:g}"


def _why_knob_13(rec: dict, knob: dict) -> str:
    """Why one of 13's knob rows has no figure: its error in 13_knobs.csv (results keep none), trimmed."""
    path = rec["folder"] / "13_knobs.csv"
    if not path.exists():
        return "no stable measurement (no 13_knobs.csv to say why)"
    with path.open(newline="") as f:
        row = next((r for r in csv.DictReader(f)
                    if r.get("knob") == knob.get("knob") and r.get("value") == str(knob.get("value"))), None)
    return plots.failure_reason(row.get("error")) if row and row.get("error") else "no stable measurement"


def candidates_12(rec: dict) -> list[str]:
    """Notebook 12: the optimized model's candidates through the server."""
    rows = need(rec, "12", "candidates")
    parity = rec["results"]["12"].get("parity_vs_baseline") or {}
    told = "; ".join(f"{k}: top-1 agreement {_f(v.get('top1_agreement'), '.2f')}, max |diff| "
                     f"{_f(v.get('max_abs_diff'), '.1e')}" for k, v in parity.items())
    contest = rec["results"]["12"].get("contest")
    screened = len(rows) > 2  # notebook 12 screens with one run each only when there are more than two candidates
    said = (f"Kept: `{contest['kept']}` ("
            + (f"the two finalists of the screening measured {contest['runs_per_finalist']} more times each" if screened else
               f"both measured {contest['runs_per_finalist']} times each")
            + f", in turns: {contest['verdict']})" if contest else
            f"Kept: `{rec['results']['12'].get('winner', '?')}` (one measurement per candidate, no winner rule)")
    for row in rows:  # results from before the runs were saved show "one run" only where they were one
        row["range"] = _range({**row, "repeats": row.get("runs")}) if "runs" in row else "not recorded"
    given = ran_with(rec, "12")
    load = _load(rec, "12", "candidate_concurrency", f"gRPC, tensors through {given.get('shared_memory', 'system')} shared memory")
    return [*([f"{load}; every candidate with the same dynamic batching."] if load else []),
            f"{said}; {told or 'no parity recorded'}. A candidate's row is the median of all its runs"
            + (", the first one included." if screened else "."), "",
            *table(rows, [("candidate", "variant", ""), ("infer/s", "throughput", ".0f"), ("runs", "range", ""),
                          ("p99 (ms)", "p99_ms", ".2f"), ("stable", "stable", "")]), "", *_plots(rec, "12")]


def _kept_13(best: dict) -> str:
    """What 13 kept after its winner rule: 'Kept: best settings' or 'Kept: start configuration'; older: best of each."""
    kept = (best.get("contest") or {}).get("kept")
    return f"Kept: {kept}" if kept else "Best of each knob together"


CROSS_SERVER = "two servers: the kept run is the finalists' server's, the baseline the sweep's"  # 13's results that predate vs_baseline_how


def knobs_13(rec: dict) -> list[str]:
    """Notebook 13: one knob at a time, and the spread of the rows that measure the same configuration."""
    rows = need(rec, "13", "knobs")
    best = rec["results"]["13"].get("best") or {}
    # each knob's row at the start configuration's value (13 saves them; older recordings: the profile's values then)
    start_settings = rec["results"]["13"].get("start_settings") or {
        "instances": 1, "preferred batch sizes": [8, 16], "queue delay (us)": 100, "backend parameters": "defaults",
        "transport": "gRPC + system shm"}
    same = [float(r["throughput"]) for r in rows if _num(r.get("throughput")) is not None
            and str(r["value"]) == str(start_settings.get(r["knob"]))]
    # the sweep measured the same model and batching at its top level, in its own server: the same configuration
    results = rec["results"]["13"]
    at_top = results.get("at_top_concurrency") or {}
    label = next((k for k in at_top if k.endswith("+ dynamic batching") and not k.startswith("baseline")),
                 "baseline + dynamic batching")
    sweep = _num((at_top.get(label) or {}).get("throughput"))
    top = _num(_top_level((results.get("settings") or {}).get("concurrency", "")))
    also = sweep is not None and top is not None and top == _num(best.get("concurrency"))
    # the winner rule's start configuration is the knobs' shared configuration too, measured in the finalists' server
    start = [float(r["throughput"]) for r in (best.get("contest") or {}).get("runs", [])
             if r.get("setting") == "start configuration" and r.get("stable") and _num(r.get("throughput")) is not None]
    wider = [*same, *([sweep] if also else []), *start]
    widened = [f"the sweep's row of the same configuration at the same concurrency ({label}, {sweep:.0f} infer/s, "
               f"measured in the sweep's own server)"] if also else []
    widened += [f"the winner rule's {len(start)} run{'s' * (len(start) > 1)} of its start configuration (the same configuration, in the "
                f"finalists' server: {min(start):.0f}-{max(start):.0f})"] if start else []
    spread = [f"The rows that all measure the article's optimized configuration (this run's optimized model with the "
              f"article's batching) served {min(same):.0f}-{max(same):.0f} "
              f"infer/s ({max(same) / min(same) - 1:.0%} apart, one run each)"
              + (f"; with {' and '.join(widened)}, the same configuration measured " + (
                     "inside that range" if min(same) <= min(wider) and max(wider) <= max(same) else
                     f"{min(wider):.0f}-{max(wider):.0f} ({max(wider) / min(wider) - 1:.0%} apart)")
                 if widened else "")
              + ": a knob whose row lies inside the widest range did nothing this run can tell."] if len(same) >= 2 else []
    for row in rows:
        row["what"] = "" if row.get("stable") in (True, "True", 1) and not row.get("error") else _why_knob_13(rec, row)
    knobs_csv = rec["folder"] / "13_knobs.csv"
    parts = {(r["knob"], r["value"]): _little_rate(r) for r in csv.DictReader(knobs_csv.open())} if knobs_csv.exists() else {}
    for row in rows:
        row["c_over_latency"] = parts.get((str(row.get("knob")), str(row.get("value"))))
    given = ran_with(rec, "13")
    protocol = {"grpc": "gRPC", "http": "HTTP"}.get(str(given.get("protocol", "grpc")), str(given.get("protocol")))
    load = _load(rec, "13", "knob_concurrency", f"{protocol} with {given.get('shared_memory', 'system')} shared memory")
    return [*([f"{load} (the transport rows change the transport and size their own windows; each row prints its "
               f"command); each row one run; the kept settings are the fastest within p99 "
               f"{given.get('p99_budget_ms'):g} ms."] if load else []), "",
            *spread, "", *table(rows, [("knob", "knob", ""), ("value", "value", ""), ("infer/s", "throughput", ".0f"),
                                      *([LITTLE_COLUMN] if any(parts.values()) else []), ("p99 (ms)", "p99_ms", ".2f"),
                                      ("", "what", "")]), "", *_little_note(rows, lambda r: f"{r['knob']} {r['value']}",
                                                    lambda r: r["knob"] == "transport" and "shm" not in str(r["value"])),
            (f"Best of each knob together (each knob's fastest row, one run each, noise included): "
             f"{_settings(best['best_of_each_knob'])}. " if best.get("best_of_each_knob") else "")
            + f"{_kept_13(best)} ({_settings(best.get('settings'))}): {_f(best.get('throughput'))} "
            f"infer/s (its median stable run; with two, the lower), p99 {_f(best.get('p99_ms'), '.2f')} ms, "
            + (f"{_f(best['vs_baseline'], '.1f')}x this run's baseline"
               + f" ({best.get('vs_baseline_how') or CROSS_SERVER}); "
               if _num(best.get("vs_baseline")) is not None
               else f"no ratio to this run's baseline ({best.get('no_baseline_ratio') or 'none recorded'}); ")
            + (f"against the start configuration, {best['contest']['runs_per_finalist']} runs each in turns: "
               f"{best['contest']['verdict']}. Runs: " + "; ".join(
                   f"{name} {_contest_runs(best['contest'], name)}" for name in ("start configuration", "best settings")
                   if _contest_runs(best["contest"], name)) + "." if best.get("contest") else "one run."),
            "", *[p for p in _plots(rec, "13") if "_knob_" in p]]


def variants_14(rec: dict) -> list[str]:
    """Notebook 14: every variant at concurrency 16, with its runs' range."""
    rows = need(rec, "14", "variants")
    levels = sorted({_f(r.get("concurrency")) for r in rows if _num(r.get("concurrency")) is not None})
    errors = rec["results"]["14"].get("errors") or {}
    for row in rows:
        row["runs"] = _range(row)
        if _num(row.get("screened")) is None and row["runs"] == "one run":  # a single run is its own screening run
            row["screened"] = row.get("throughput")
        why = str(errors.get(row.get("variant"), ""))
        row["note"] = (plots.failure_reason(why) if why else
                       "; ".join(filter(None, [row.get("verdict"), "3 windows after a memory-guard stop"
                                               if row.get("memory_retry") else ""])))
    best, base = _kept(rec["results"]["14"], rows), _baseline(rows)
    contest = rec["results"]["14"].get("variants_contest")
    lines = [f"Concurrency {', '.join(levels)}; a repeated row shows its median and range. The screening run is each "
             "row's first, single run: the winner rule's finalists are the baseline and the two fastest there within "
             "the p99 budget ('-': a finalist's, not kept by recordings made before it was).", "",
             *table(rows, [("variant", "variant", ""), ("infer/s (median)", "throughput", ".0f"), ("runs", "runs", ""),
                           ("screening run", "screened", ".0f"), *_little_column(rows), ("p99 (ms)", "p99_ms", ".2f"),
                           ("", "note", "")])]
    if best and base:
        lines += ["", f"Kept row: {best['variant']} ({_model_14(rec['results']['14'])}, as every row but the "
                      f"baseline's), {float(best['throughput']) / float(base['throughput']):.1f}x the "
                      f"article's baseline (FP32, no batching, tensors over gRPC) measured in the same run ("
                      + (f"medians; kept {_range(best)}, baseline {_range(base)})." if _repeated(best, base)
                         else "one run each).")]
    lines += ["", *_little_note(rows, lambda r: str(r["variant"]), lambda r: "shm" not in str(r["variant"]))][:-1]
    if contest:
        lines += ["", f"The winner rule ({contest['runs_per_finalist']} runs of each finalist, in turns): "
                      f"{contest['verdict']}."]
    elif best:  # one run each: the rule was not run, and the kept row is the fastest single run within the budget
        runner_up = max((float(r["throughput"]) for r in rows if r is not best and _num(r.get("throughput")) is not None
                         and r.get("stable") in (True, "True", 1)), default=None)
        lines += ["", "The winner rule did not run (one run of each variant): the kept row is the fastest single run "
                      "within the p99 budget, a pick within one run's noise" + (
                          f"; the fastest other stable row served {runner_up:.0f} infer/s "
                          f"({runner_up / float(best['throughput']) - 1:+.1%})" if runner_up else "") + "."]
    return [*lines, "", *(_plots_named(rec, "_variants.png") or _plots(rec, "14")[:1])]  # older: 14_plot1.png


def levers(rec: dict) -> list[str]:
    """The levers past batch-1 requests (notebook 16; 14 before the split)."""
    notebook, results = _holding(rec, "levers")
    rows = results["levers"]
    reference = next((_num(r.get("throughput")) for r in rows if _num(r.get("x batch-1")) == 1.0), None)
    for row in rows:
        row["runs"] = _range(row)
        if reference and _num(row.get("throughput")) is not None:  # from the measured rates, rounded once
            row["x batch-1"] = _num(row["throughput"]) / reference
    first = next((r for r in rows if _num(r.get("x batch-1")) == 1.0), None)
    n14 = rec["results"].get("14") or {}
    kept = _kept(n14, n14.get("variants") or []) if notebook == "16" else None
    servers = ([f"Notebook 14's kept row ({kept['variant']}) served {_f(kept.get('throughput'))} infer/s in 14's server "
                f"({_range(kept)}); the same configuration, this table's first row, served "
                f"{_f(first.get('throughput'))} in notebook 16's ({first['runs']}"
                + ("; another call of the series runner" if len(set(_calls(rec["run"] or {}).get(n) for n in
                   ("14_near_the_limit", "16_saturation_and_knee")) - {None}) > 1 else "")
                + "): each ratio here divides by 16's own row.",
                ""] if kept and first else [])
    return [f"Notebook {notebook}, at the images in flight of 14's comparison.", "", *servers,
            *table(rows, [("lever", "lever", ""), ("infer/s", "throughput", ".0f"), ("runs", "runs", ""),
                          *_little_column(rows), ("p99 (ms)", "p99_ms", ".2f"), ("x batch-1 row", "x batch-1", ".2f"),
                          ("server batch", "server avg_batch", ".1f")]), "",
            *_little_note(rows, lambda r: str(r["lever"]),  # the C API row's inputs go in host memory; the others
                          lambda r: "C API" in str(r["lever"]) or "shm" not in str(n14.get("best", ""))),  # 14's kept transport
            "A lever measured once, or whose range overlaps the batch-1 row's, shows no gain this run can tell."
            + "".join(f" The {r['lever']} row ran in {r['server']}, the others in notebook {notebook}'s: its ratio also "
                      "holds whatever differs between two servers" + (
                          " (that server holds this model only), and its inputs go in host memory, not "
                          + ("shared memory" if "shm" in str(n14.get("best", "")) else "over gRPC")
                          if "C API" in str(r.get("lever")) else "") + "."
                      for r in rows if isinstance(r.get("server"), str))]


def knee(rec: dict) -> list[str]:
    """The knee search, and served against in-process at equal batch size (notebook 16; 14 before the split)."""
    notebook, results = _holding(rec, "saturation")
    inproc = results.get("inprocess") or {}
    streams = f", {results['inprocess_streams']} stream(s)" if results.get("inprocess_streams") else ""
    lines = [f"Notebook {notebook}. Knee (p99 within the budget, throughput still rising): {_knee(results)}."]
    if results.get("knees"):
        lines += ["", "Every knee search (images in flight = concurrency x images per request):", "",
                  *table(results["knees"], [("search", "search", ""), ("images/request", "images/request", ""),
                                            ("knee c", "knee c", ".0f"), ("images in flight", "images in flight", ".0f"),
                                            ("img/s", "throughput (img/s)", ".0f"), ("p99 (ms)", "p99 (ms)", ".2f"),
                                            ("runs at the knee", "runs at the knee", ".0f"),
                                            ("level above", "level above", ".0f"), ("stopped because", "stopped because", "")]),
                  ""]
        searched = rec["folder"] / f"{notebook}_knee_searches.csv"
        others = nearlimit.other_knee_lines(nearlimit.pd.DataFrame(results["knees"]), nearlimit.pd.read_csv(searched),
                                            results.get("best", "")) if searched.exists() else []
        lines += [f"Search {line}." for line in others] + ([""] if others else [])
    if not results.get("knee"):
        lines.append("Without a knee there is no served rate at a batch size to set against in-process.")
    elif (results.get("inprocess_comparable") or results.get("inprocess_rates_compare")) \
            and results.get("inprocess_at_knee") is not None:
        mean = float(results["knee_batch"])
        where = "at the knee" if results.get("above_knee") is not None else "at the top level searched (no knee reached)"
        lines.append(f"In-process at the server's mean batch {where}, " + (
            f"{mean:.0f} (a whole batch)" if mean.is_integer() else f"{mean:.3g} (time per batch linear between the whole batches "
                                                                     "around it)") + f"{streams}: "
                     f"{_f(results['inprocess_at_knee'])} img/s." + ("" if results.get("inprocess_comparable") else
                     " Its batches took longer than the server's compute, and the server kept fewer of its instances "
                     "busy than the reference ran streams: the rates compare, and notebook 16 prints the ratio as the "
                     "busy share times in-process batch time over an instance's time per execution, not split by stage."))
    elif results.get("inprocess_comparable"):  # results from before the mean batch: the nearest whole batch
        lines.append(f"In-process at batch {results.get('knee_batch')}{streams}: "
                     f"{_f(inproc.get(str(results.get('knee_batch'))))} img/s.")
    elif inproc and not results.get("inprocess_skipped"):
        lines.append("In-process is not set against the served rate: the reference took longer per batch than the "
                     "server took to compute its own batches (notebook 16 prints both).")
    if inproc:
        lines.append(f"In-process (img/s, by batch size{streams}): "
                     + ", ".join(f"batch {k}: {_f(v)}" for k, v in inproc.items()) + ".")
    return [*lines, "", *(_plots_named(rec, "_saturation.png") or _plots(rec, notebook)[1:])]  # older: 14_plot2.png


def compare_15(rec: dict) -> list[str]:
    """Notebook 15: Model Analyzer's pick against the series' picks, measured in one run."""
    rows = need(rec, "15", "comparison")
    fp32 = any(r.get("model") == "resnet18_pytorch" for r in rows)
    verdicts = rec["results"]["15"].get("verdicts") or {}
    for row in rows:
        row["range"] = _range({**row, "repeats": row.get("runs")})
    given, budget_14 = ran_with(rec, "15"), ran_with(rec, "14").get("p99_budget_ms")
    load = _load(rec, "15", "concurrency", "gRPC with shared memory")
    return [*([f"{load}, for Model Analyzer's search and the comparison alike; the search's constraint: p99 within "
               f"{given.get('p99_budget_ms'):g} ms" + (f" (notebook 14 kept its row within {budget_14:g} ms)"
                                                    if budget_14 not in (None, given.get("p99_budget_ms")) else "") + "."]
              if load else []), "",
            *table(rows, [("model", "model", ""), ("pick", "pick", ""), ("instances", "instances", ""),
                          ("max batch", "max_batch_size", ""), ("infer/s (median)", "throughput", ".0f"),
                          ("runs", "range", ""), ("p99 (ms)", "p99_ms", ".2f"),
                          ("Model Analyzer's own (infer/s)", "analyzer_throughput", ".0f"),
                          ("time (s)", "search_s", ".0f")]), "",
            "time: Model Analyzer's search of every model it searched; for a series pick, the whole notebook that "
            "chose it (its seconds in the run folder's run.json), so the two are not the same kind of time."
            + (" Notebook 13 searched its settings on its optimized model; for resnet18_pytorch they are carried "
               "over, not searched on it." if fp32 else ""), "",
            *(f"- {model}: {text}" for model, text in verdicts.items()),
            *(_thirteen_kept_note(rec) if fp32 else [])]


def _thirteen_kept_note(rec: dict) -> list[str]:
    """When 13 kept its start configuration without a winner, what its best settings measured in 13's contest."""
    contest = ((rec["results"].get("13") or {}).get("best") or {}).get("contest") or {}
    if contest.get("kept") != "start configuration" or contest.get("winner") or not _contest_runs(contest, "best settings"):
        return []
    return ["", f"Notebook 13's pick is its start configuration because 13's winner rule named no winner "
                f"({contest.get('verdict')}). Its best settings measured {_contest_runs(contest, 'best settings')} "
                f"there, in notebook 13's own server (not this one): read a win over 13's pick as a win over its "
                f"start configuration, not over its search."]


def _archived_card(name: str, meta: dict) -> str:
    """The card an archived recording ran on: its recorded.json's machine, else its folder name's world (the h200
    world was always an NVIDIA H200), else '-'."""
    machine = meta.get("machine") or {}
    if machine.get("gpu") or machine.get("cpu_cores"):
        return machine.get("gpu") or f"CPU ({machine['cpu_cores']} cores)"
    return {"h200": "NVIDIA H200", "cpu": "CPU", "ci": "CPU"}.get(name.split("-")[0], "-")


def history() -> list[str]:
    """One row per archived recording: date, commit, notebook 14's kept row at 14's concurrency, and its knee."""
    rows = []
    for folder in sorted(ARCHIVE.iterdir()) if ARCHIVE.exists() else []:
        meta = json.loads((folder / "recorded.json").read_text())
        rec = recording(folder)
        n14 = rec["results"].get("14") or {}
        best, base = _kept(n14, n14.get("variants", [])), _baseline(n14.get("variants", []))  # kept: winner rule
        try:
            knee_results = _holding(rec, "saturation")[1]
        except Missing:
            knee_results = {}
        rows.append({"date": meta["date"], "recording": folder.name, "commit": meta["commit"][:7],
                     "card": _archived_card(folder.name, meta),
                     "best": f"{float(best['throughput']):.0f}"
                             + (f" at c={_f(best['concurrency'])}" if _num(best.get("concurrency")) is not None else "")
                             + f" ({best['variant']})" if best else "-",
                     "x": f"{float(best['throughput']) / float(base['throughput']):.1f}x" if best and base else "-",
                     "knee": _knee_short(knee_results)})
    rows.sort(key=lambda r: (r["date"], r["recording"]))
    return ["Older recordings keep only their data and reports, under `docs/data/archive/<name>/`. Their code is not "
            "today's: read them as history, not as results. Each ratio is the row that run's notebook 14 kept (its "
            "winner rule's pick, which a tie gives to the simpler variant; the fastest row where the run had no rule) "
            "over its own baseline, as the run printed them. Until commit ff70ebd, a row measured by a request count printed a rate over whole "
            "seconds, so a baseline measured that way reads low and its ratio high.", "",
            *table(rows, [("date", "date", ""), ("recording", "recording", ""), ("recorded in", "commit", ""),
                          ("on", "card", ""),
                          ("14: kept row (infer/s at concurrency c)", "best", ""), ("x its baseline", "x", ""),
                          ("knee", "knee", "")])]


SECTIONS = [  # (heading, section over a recording); history() reads the archive
    ("Conditions", conditions), ("The article's comparison (notebook 13)", article_comparison),
    ("The optimized model's candidates (notebook 12)", candidates_12), ("13's knobs", knobs_13),
    ("14's variants", variants_14), ("Levers past one batch-1 client", levers),
    ("The knee, and served against in-process", knee), ("Model Analyzer against the series (notebook 15)", compare_15)]


def _section(heading: str, make, rec: dict) -> list[str]:
    """One section, or a line saying which data the recording lacks."""
    try:
        body = make(rec)
    except Missing as missing:
        body = [f"Not in this recording: {missing}."]
    return [f"### {heading}", "", *body, ""]


def benchmarks(gpu: Path | None = None, cpu: Path | None = None) -> str:
    """docs/benchmarks.md, whole."""
    worlds = [("The GPU recording", recording(gpu or RUNS / "gpu")),
              ("The CPU recording", recording(cpu or RUNS / "cpu"))]
    lines = ["<!-- generated: benchmarks -->", "# Benchmarks", "",
             "Rendered by `scripts/benchmark_numbers.py --write` from the two recordings, `docs/runs/gpu` and "
             "`docs/runs/cpu`: their `run.json`, the results each notebook saved and its plots. Nothing here is "
             "typed by hand; a test fails when this page differs from its rendering. A row measured once is one "
             "measurement: where a row was measured several times, its range is shown.", ""]
    for title, rec in worlds:
        lines += [f"## {title}", ""]
        for heading, make in SECTIONS:
            lines += _section(heading, make, rec)
    lines += ["## History", "", *history(), "<!-- /generated -->"]
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


# ----------------------------------------------------------------------------------- blocks in README.md and docs/*.md
def block_headline() -> str:
    """README's headline figure: 14's best row at c=16 against the article's configuration, same run."""
    rec = recording(RUNS / "gpu")
    try:
        rows = need(rec, "14", "variants")
    except Missing as missing:
        return f"(The GPU recording has no headline figure: {missing}.)"
    best, base = _kept(rec["results"]["14"], rows), _baseline(rows)
    if not (best and base):
        return "(The GPU recording's notebook 14 has no stable kept row and baseline to compare.)"
    return (f"In the GPU recording ({recordings.card('gpu')}, [docs/benchmarks.md](docs/benchmarks.md); "
            f"{recordings.label('gpu', 3)}), "
            f"the row notebook 14 kept at concurrency 16 ({best['variant']}; {_model_14(rec['results']['14'])}) served "
            f"{float(best['throughput']) / float(base['throughput']):.1f}x the article's baseline (FP32, no batching, "
            f"tensors over gRPC) measured in the same run ("
            + (f"medians; the kept row's runs {_range(best)}, the baseline's {_range(base)}" if _repeated(best, base)
               else "one run each")
            + (f"; turn by turn (each run against the baseline's run of the same turn), "
               f"{min(turns):.1f}x to {max(turns):.1f}x" if (turns := _by_turn(
                   rec["results"]["14"].get("variants_contest") or {}, best["variant"], base["variant"])) else "")
            + (f"; by concurrency over mean latency (Little's law), {little:.1f}x"
               if (little := _little_ratio(best, base)) else "")
            + ").")


def _little_ratio(a: dict, b: dict) -> float | None:
    """Row a over row b, each as concurrency over its mean latency (Little's law); None where either lacks one."""
    rate_a, rate_b = _little_rate(a), _little_rate(b)
    return rate_a / rate_b if rate_a and rate_b else None


def _by_turn(contest: dict, a: str, b: str) -> list[float]:
    """Throughput of `a` over `b` in each turn of a contest (their i-th runs, measured in the same turn), where both
    were stable."""
    runs = contest.get("runs") or []
    of = {name: [r for r in runs if r.get("setting") == name] for name in (a, b)}
    return [float(x["throughput"]) / float(y["throughput"]) for x, y in zip(of[a], of[b])
            if x.get("stable") and y.get("stable") and _num(x.get("throughput")) and _num(y.get("throughput"))]


def block_ci_time() -> str:
    """README's expected time of a ci series, from the CPU recording."""
    run = recordings.load("cpu")
    total = sum(float(e["seconds"]) for e in run["notebooks"].values() if e.get("status") == "ok")
    return (f"`ci` (local server, random weights, short sweeps; about {total / 60:.0f} min on "
            f"{(run.get('machine') or {}).get('cpu_cores', 'unrecorded')} cores, the recorded CI run in `docs/runs/cpu`)")


def block_recordings() -> str:
    """README's paragraph on the two recordings, each with its label."""
    lines = []
    for world in recordings.WORLDS:
        run = recordings.load(world)
        what = "every notebook" if world == "cpu" else f"notebooks {_span(run)}"
        machine = run.get("machine") or {}
        where = machine.get("gpu") or f"{machine.get('cpu_cores')} CPU cores"
        lines.append(f"* [docs/runs/{world}](docs/runs/{world}): {what}, `{run.get('profile')}` profile, {where}; "
                     f"{recordings.label(world)}.")
    return "\n".join(lines)


def _span(run: dict) -> str:
    """'10-15': the first and last notebook numbers a recording's run.json lists."""
    numbers = sorted(stem[:2] for stem in run.get("notebooks", {}))
    return f"{numbers[0]}-{numbers[-1]}" if numbers else "none"


def block_workshop_times() -> str:
    """docs/workshop.md's table of notebook run times, from the recordings' run.json."""
    runs = {world: recordings.load(world) for world in recordings.WORLDS}
    names = sorted(set(runs["cpu"]["notebooks"]) | set(runs["gpu"]["notebooks"]))
    rows = [f"| notebook | CPU, `ci` profile (`docs/runs/cpu`) | {recordings.card('gpu')}, `gpu-local` profile "
            f"(`docs/runs/gpu`) |",
            "|---|---|---|"]
    totals = {}
    for world in recordings.WORLDS:
        totals[world] = sum(float(e["seconds"]) for e in runs[world]["notebooks"].values())
    for name in names:
        cells = [_f((runs[w]["notebooks"].get(name) or {}).get("seconds")).replace("-", "not timed")
                 for w in recordings.WORLDS]
        rows.append(f"| {name} | {cells[0]} | {cells[1]} |")
    rows.append(f"| **total** | **{totals['cpu']:.0f}** | **{totals['gpu']:.0f}** |")
    keras = sum(float(e["seconds"]) for n, e in runs["cpu"]["notebooks"].items() if n[:2] < "10")
    half = sum(float(e["seconds"]) for n, e in runs["cpu"]["notebooks"].items() if n[:2] in ("10", "11", "13"))
    return "\n".join(["Measured notebook times (seconds), from the recordings' `run.json`:", "", *rows, "",
                      f"The half day's run time on a CPU: {keras / 60:.1f} min for 00-07, {half / 60:.1f} min for 10, "
                      f"11 and 13 (the recording's 13, which also compared 12's model; without it 13 does less); "
                      f"the full day adds {totals['gpu'] / 60:.0f} min for {_span(runs['gpu'])} on the recording's "
                      f"{recordings.card('gpu')}.",
                      "", f"CPU: {recordings.label('cpu', 3)}. GPU: {recordings.label('gpu', 3)}."])


BLOCKS = {"headline": block_headline, "ci_time": block_ci_time, "recordings": block_recordings,
          "workshop_times": block_workshop_times}


def render_blocks(text: str, doc: str = "") -> str:
    """`text` with every `<!-- generated: NAME -->...<!-- /generated -->` block re-rendered (a block that starts
    on its own line keeps its lines)."""
    def one(match: re.Match) -> str:
        name = match["name"]
        if name not in BLOCKS:
            raise ValueError(f"{doc}: generated block {name!r} is not one of {sorted(BLOCKS)}")
        made = BLOCKS[name]()
        body = f"\n{made}\n" if match["body"].startswith("\n") else made
        return f"<!-- generated: {name} -->{body}<!-- /generated -->"

    return BLOCK.sub(one, text)


def rendered() -> dict[Path, str]:
    """Every generated page as it should be: benchmarks.md whole, the other documents' blocks."""
    pages = {DOC: benchmarks()}
    for name in BLOCK_DOCS:
        path = ROOT / name
        pages[path] = render_blocks(path.read_text(), name)
    return pages


# ---------------------------------------------------------------------------------------------------------------
# Claims in prose. A *claim* is a number with the unit of a measured quantity (CLAIM_UNITS) in the markdown of
# README.md, docs/*.md or a notebook's markdown cells. Each one must be rendered from data (a generated block
# above), or carry a source in its own paragraph, list item or table (CLAIM_SOURCES). Everything exempt is listed
# here, in one place; tests/test_claims.py fails on any other claim and on a number planted in a copy of the text.
# ---------------------------------------------------------------------------------------------------------------
CLAIM_DOCS = ("README.md", "docs/workshop.md", "docs/glossary.md", "docs/cluster.md", "docs/benchmarks.md")
CLAIM_UNITS = ("infer/s", "img/s", "images/s", "req/s", "GB/s", "MB/s", "ms", "us", "s", "min", "h", "GB", "MB", "KB",
               "GiB", "MiB", "KiB", "%", "x", "times", "seconds", "minutes", "hours")
CLAIM_SOURCES = {  # what, in a claim's paragraph (or its table's lead-in), names where the number comes from
    "a link": r"https?://",
    "docs/data": r"docs/data/|data/h200_\w+\.(?:csv|json)",
    "a recorded run": r"docs/runs/",
    "a page rendered from data": r"benchmarks\.md|\bthe table(?:'s)?\b",
}
CLAIM_SOURCES_IN_SENTENCE = {  # markers that count only in the claim's own sentence
    "the articles (the seeds: a number one of them reports)": r"\b(?:[Tt]he|[Bb]oth) (?:first |second )?articles?(?:'s)?\b",
}
CLAIM_EXEMPT = {  # text taken out of the prose before claims are read, each with why it needs no source
    "fenced code (shown code and commands)": r"```.*?```",
    "generated from the recordings (this script)": r"<!-- generated: [\w-]+ -->.*?<!-- /generated -->",
    "HTML comments": r"<!--.*?-->",
    "questions and exercises (hypothetical values a reader reasons about)":
        r"\*\*Check your understanding\*\*.*?(?=\n#|\Z)|\n## Exercises.*?(?=\n## |\Z)",
}
CLAIM_EXEMPT_INLINE = {  # the same, inside a paragraph (sources found there still count)
    "code spans (parameter values, commands, file names)": r"`[^`]+`",
    "link targets": r"\]\([^)]*\)",
    "arithmetic shown in the sentence (a product of the shapes before it)":
        r"\d[\d.]*(?:\s?x\s?\d[\d.]*)+(?: \w+)? = [\d.]+ \w+",
    "definitions (p99: the latency 99 % of requests stay under)": r"\b(?:half / )?99 % of requests",
}
# Settings, limits and counts the series itself sets (not measurements), by file: each phrase with where it is set.
CLAIM_SETTINGS = {
    "README.md": {"each test 20 times": "tests/test_server.py's reliability repetitions (.ci/run)",
                  "the 20x reliability step": ".ci/run", "(20 minutes in all on 2 cores)": ".ci/run's budget"},
    "11_baseline_benchmark.ipynb": {"at most 3.5 GB": "perf.MEMORY_CAP_GB (tests/test_claims.py checks it)"},
    "13_dynamic_batching_compare.ipynb": {"every 200 ms": "helpers/gpu.py's sampling interval"},
    "14_near_the_limit.ipynb": {"every 200 ms": "helpers/gpu.py's sampling interval"},
    "docs/workshop.md": {"**Half day (3.5 h)**": "the agenda's length", "**Full day (6.5 h)**": "the agenda's length",
                         "about 1 h 45 min with explanation": "the agenda's plan, not a measurement",
                         "about 1 h)": "the agenda's plan, not a measurement"},
}
_CLAIM = re.compile(r"(?<![\w.\-/#])(\d[\d,]*(?:\.\d+)?(?:\s?(?:-|to)\s?\d[\d,]*(?:\.\d+)?)?)(?:\s?("
                    + "|".join(re.escape(u) for u in sorted(CLAIM_UNITS, key=len, reverse=True) if u != "x")
                    + r")|(x))(?![\w/])(?!\s\d)")


def claim_texts() -> dict[str, str]:
    """The prose the claims test reads: each document's markdown, each notebook's markdown cells."""
    texts = {name: (ROOT / name).read_text() for name in CLAIM_DOCS}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        texts[path.name] = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return texts


def _units_of(text: str) -> list[tuple[str, str]]:
    """(body, context) of each paragraph, list item and table row; a table row's context adds the paragraph before
    its table (where a table names its source)."""
    units, lead = [], ""
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.split("\n") if line.strip()]
        if lines and all(line.lstrip().startswith("|") for line in lines):
            units += [(line, f"{lead}\n{lines[0]}\n{line}") for line in lines]
            continue
        units += [(item, item) for item in re.split(r"\n(?=\s*(?:[*-]|\d+\.) )", block)]
        lead = lead if block.lstrip().startswith("#") else block  # a table's lead-in: the paragraph above its heading
    return units


def claims(text: str, name: str = "") -> list[dict]:
    """Every claim in `text` (markdown) that is not exempt: its number and unit, the source found near it (or
    None), and the text around it."""
    for pattern in CLAIM_EXEMPT.values():
        text = re.sub(pattern, " ", text, flags=re.S)
    settings = []
    for phrase in CLAIM_SETTINGS.get(name, {}):
        settings.append(r"\s+".join(re.escape(word) for word in phrase.split()))
        if not re.search(settings[-1], text):
            raise ValueError(f"{name}: CLAIM_SETTINGS lists {phrase!r}, which the text no longer has: remove it")
    found = []
    for body, context in _units_of(text):
        source = next((what for what, pattern in CLAIM_SOURCES.items() if re.search(pattern, context)), None)
        for pattern in [*CLAIM_EXEMPT_INLINE.values(), *settings]:
            body = re.sub(pattern, " ", body)
        for m in _CLAIM.finditer(body):
            start = max(body.rfind(". ", 0, m.start()), 0)
            end = body.find(". ", m.end())
            sentence = body[start:end if end >= 0 else len(body)]
            source = source or next((what for what, pattern in CLAIM_SOURCES_IN_SENTENCE.items()
                                     if re.search(pattern, sentence)), None)
            found.append({"doc": name, "claim": m.group(0), "source": source,
                          "near": re.sub(r"\s+", " ", body[max(0, m.start() - 80):m.end() + 40])})
    return found


def unsourced(texts: dict[str, str] | None = None) -> list[dict]:
    """Claims without a source near them, over every document the claims test reads."""
    texts = claim_texts() if texts is None else texts
    return [c for name, text in texts.items() for c in claims(text, name) if c["source"] is None]


if __name__ == "__main__":
    if "--claims" in sys.argv:
        for c in unsourced():
            print(f"{c['doc']}: {c['claim']!r} in ...{c['near']}...")
        sys.exit(0)
    if "--write" in sys.argv:
        for page, text in rendered().items():
            if page.read_text() != text:
                page.write_text(text)
                print(f"wrote {page.relative_to(ROOT)}")
    else:
        print(benchmarks())
