"""Plumbing of notebooks 14 and 16: perf_analyzer rows with the server's view beside them, the winner rule over
variants, knee-search tables and config differences. What a learner writes (configs, client calls, the perf_analyzer
options and commands) stays on the pages."""
from __future__ import annotations

import difflib
import json
import math
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from helpers import gpu, metrics, perf


def config_differences(a: str, b: str) -> str:
    """What config text `b` changes in `a`, change by change (- a's lines, + b's); a change made n times shown once, xn."""
    a_lines, b_lines = a.splitlines(), b.splitlines()
    changes: Counter = Counter()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False).get_opcodes():
        while tag == "insert" and j2 < len(b_lines) and b_lines[j1] == b_lines[j2]:  # an added block: from its first line
            j1, j2 = j1 + 1, j2 + 1
        if tag != "equal":
            changes[tuple([f"- {line.strip()}" for line in a_lines[i1:i2]]
                          + [f"+ {line.strip()}" for line in b_lines[j1:j2]])] += 1
    return "\n".join("\n".join(f"    {line}" for line in change) + (f"   (x{n})" if n > 1 else "")
                     for change, n in changes.items())


def unregister(call: Callable[[str], object], name: str, *, tries: int = 20, wait_s: float = 0.1) -> object:
    """`call(name)`, retried while the server answers that the shared-memory region is still in use."""
    for attempt in range(tries):
        try:
            return call(name)
        except Exception as exc:  # tritonclient's InferenceServerException; anything but "in use" is raised at once
            if "in use" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(wait_s)
    raise ValueError(f"tries must be at least 1; got {tries}")


class Rows:
    """perf_analyzer levels against one server: count windows sized from each request's bytes, an unmeasured warm-up
    before a model's first row, each new command printed once, the server's metrics and the GPU read around it
    (`reuse`: a level measured once already is not measured again; a repeated measurement, `times` > 1, always is).
    A model's fastest request rate so far sizes the windows of its later rows with tensors in the requests
    (perf.count_window's `rate`): measure a model through shared memory first, and its gRPC row fits the limit."""

    def __init__(self, server, perf_dir: str | Path, prefix: str, *, base: dict, limit_gb: float, trials: int,
                 most: int, warmup_requests: int, metrics_model: dict[str, str] | None = None, reuse: bool = False):
        self.server, self.perf_dir, self.prefix = server, Path(perf_dir), prefix
        self.base, self.limit_gb, self.trials, self.most = base, limit_gb, trials, most
        self.warmup_requests, self.metrics_model = warmup_requests, metrics_model or {}
        self.warmed: set[str] = set()
        self.shown: set[tuple] = set()
        self.reuse, self.rows = reuse, {}  # with reuse: single runs kept by what they measured, not measured twice
        self.made = 0
        self.last_gpu: gpu.Sampler | None = None
        self.rates: dict[str, float] = {}  # model: its fastest stable requests/s so far

    def settings(self, model: str, nbytes: int, options: dict, trials: int | None = None) -> dict:
        """The perf_analyzer options of one row: the base, the row's own, and a count window that fits the limit."""
        through_shm = options.get("shared_memory", "none") != "none"  # nothing kept per request through shared memory
        window = perf.count_window(0 if through_shm else nbytes, trials=trials or self.trials, limit_gb=self.limit_gb,
                                   most=self.most, rate=self.rates.get(model))
        return {**self.base, **options, **window,
                "warmup_requests": 0 if model in self.warmed else self.warmup_requests}

    def measure(self, label: str, model: str, nbytes: int, options: dict, level: int, *, times: int = 1,
                trials: int | None = None) -> dict:
        """One level (`times` runs: the median with its range) as a row; a row the memory limit leaves no window for
        comes back not stable, with why. With `reuse`, a single run already made of the same level is returned, and said."""
        key = json.dumps([label, model, options, level, trials], sort_keys=True, default=str)
        if self.reuse and times == 1 and key in self.rows:
            print(f"{label}, concurrency {level}: measured above, reused")
            return self.rows[key]
        try:
            settings = self.settings(model, nbytes, options, trials)
        except ValueError as exc:
            return {"variant": label, "model": model, "bytes/request": nbytes, "concurrency": level, "stable": False,
                    "throughput": float("nan"), "p99_ms": float("nan"), "error": str(exc)}
        self.warmed.add(model)
        row = self._measured(label, model, nbytes, settings, level, times)
        fewest = perf.STABLE_WINDOWS
        if (not row["stable"] and "memory limit" in str(row.get("error", "")) and settings["max_trials"] > fewest
                and options.get("shared_memory", "none") == "none"):
            # a window with tensors can last longer than the second count_window assumes: the fewest windows that
            # can be stable keep the fewest requests
            print(f"{label}: stopped by the memory guard with --max-trials {settings['max_trials']}; measured once "
                  f"more with {fewest}, the fewest windows perf_analyzer can call stable")
            settings = {**settings, "max_trials": fewest, "warmup_requests": 0}
            row = {**self._measured(label, model, nbytes, settings, level, times),
                   "memory_retry": f"first run stopped by the memory guard; measured with --max-trials {fewest}"}
        if row["stable"]:  # perf_analyzer's throughput counts images: requests/s is that over the images per request
            rate = row["throughput"] / settings.get("batch_size", 1)
            self.rates[model] = max(rate, self.rates.get(model, 0.0))
        if times == 1:
            self.rows[key] = row
        elif key in self.rows and row.get("stable") and self.rows[key].get("stable"):  # the single run that picked it
            once, low, high = self.rows[key]["throughput"], row.get("throughput_min"), row.get("throughput_max")
            row["screened"] = once
            if low is not None and high is not None and not low <= once <= high:
                print(f"{label}, concurrency {level}: its single run above gave {once:.1f} infer/s, outside these "
                      f"{times} runs' range {low:.1f}-{high:.1f}; the table shows their median (`screened`: that run), and "
                      "where a plot shows this level from the knee search, it shows that single run")
        return row

    def _measured(self, label: str, model: str, nbytes: int, settings: dict, level: int, times: int) -> dict:
        """One perf_analyzer row with these settings, its command printed once, the server's metrics, its execution
        statistics and the GPU around it."""
        self.made += 1
        csv = self.perf_dir / f"{self.prefix}_{self.made:03d}_{model}_c{level}.csv"
        shown = (label, settings["max_trials"])
        if shown not in self.shown:  # later levels of a command differ only in --concurrency-range
            self.shown.add(shown)
            print(f"{label}:\n  {perf.shown_command(model, self.server.grpc_url, csv, level, **settings)}")
        counted = self.metrics_model.get(model, model)
        before, ran = metrics.scrape(self.server.metrics_url), metrics.executions(self.server.url, counted)
        with gpu.Sampler() as self.last_gpu:
            row = (perf.repeat_level(model, self.server.grpc_url, csv, level, repeats=times, **settings) if times > 1
                   else perf.measure_level(model, self.server.grpc_url, csv, level, **settings))
        seen = metrics.between(before, metrics.scrape(self.server.metrics_url), counted)
        done = metrics.executions(self.server.url, counted)
        seen.update(compute_infer_ms_per_execution=metrics.per_execution_ms(ran, done),
                    instance_ms_per_execution=metrics.per_execution_ms(ran, done, whole=True))
        if not row.get("stable"):  # a stopped or unstable row: what the server and the GPU saw is not a measurement of it
            return {"variant": label, "model": model, "bytes/request": nbytes, **row}
        return {"variant": label, "model": model, "bytes/request": nbytes, **row, **self.last_gpu.columns(),
                **{f"server {k}": v for k, v in seen.items()}}

    def measure_all(self, specs: dict[str, tuple], level: int, *, desc: str = "") -> dict[str, dict]:
        """Every row of `specs` (label: (model, bytes per request, options)) at one level, with a progress bar:
        shared-memory rows first, so that a model's rate there sizes the windows of its gRPC row; in `specs`' order."""
        from tqdm.auto import tqdm

        first = sorted(specs, key=lambda label: specs[label][2].get("shared_memory", "none") == "none")
        rows = {label: self.measure(label, *specs[label], level) for label in tqdm(first, desc=desc)}
        return {label: rows[label] for label in specs}


def winner_rule(rows: dict[str, dict], order: Sequence[str], measure: Callable[[str], dict], *, baseline: str,
                p99_budget_ms: float, repeats: int) -> dict | None:
    """The baseline and the two fastest rows within the budget measured `repeats` times each in turns (perf.contest);
    each finalist's row in `rows` becomes its median run, its screening run's throughput kept as `screened`. None
    (rows untouched) below two finalists or one repeat."""
    stable = [r for r in rows.values() if r["stable"]]
    within = [r for r in stable if r["p99_ms"] <= p99_budget_ms] or stable
    fastest = [r["variant"] for r in sorted(within, key=lambda r: -r["throughput"]) if r["variant"] != baseline][:2]
    finalists = sorted([baseline] * (baseline in rows) + fastest, key=list(order).index)  # simplest first
    if repeats <= 1 or len(finalists) < 2:
        return None
    result = perf.contest(measure, finalists, simpler=finalists, runs=repeats)
    for label in finalists:
        screened = rows[label]["throughput"]  # the single run that made it a finalist
        rows[label] = {**perf.median_run([r for _, r in result["runs"][result["runs"]["setting"] == label].iterrows()]),
                       "screened": screened}
    return {**result, "finalists": finalists}


def verdicts(labels: Sequence[str], result: dict | None) -> list[str]:
    """The winner rule's word on each row: wins, kept (tie within noise), kept (no winner: fewer stable runs, or too
    few runs), finalist, or '' (not a finalist)."""
    if result is None:
        return [""] * len(labels)
    return ["" if label not in result["finalists"] else "wins" if result["winner"] == label else
            ("kept (tie within noise)" if result["verdict"].startswith("tie") else "kept (no winner)")
            if result["kept"] == label and not result["winner"] else "finalist"
            for label in labels]


def _runs(row: dict) -> int:
    """How many runs a row's figure is the median of (1 for a single run)."""
    repeats = row.get("repeats")
    return 1 if repeats is None or pd.isna(repeats) else int(repeats)


def knee_table(knees: dict[str, dict], images: dict[str, int]) -> pd.DataFrame:
    """One row per knee search (perf.find_knee's result, `images` per request): its levels, knee and why it stopped."""
    def at(found: dict, key: str, column: str, scale: int = 1):
        return None if found[key] is None else found[key][column] * scale

    return pd.DataFrame([{
        "search": label, "images/request": images[label],
        "levels (in order)": [int(r["concurrency"]) for r in found["rows"]],
        "knee c": at(found, "knee", "concurrency"), "images in flight": at(found, "knee", "concurrency", images[label]),
        "throughput (img/s)": at(found, "knee", "throughput"), "p99 (ms)": at(found, "knee", "p99_ms"),
        "runs at the knee": None if found["knee"] is None else _runs(found["knee"]),
        "level above": at(found, "above", "concurrency"), "stopped because": found["why"]}
        for label, found in knees.items()])


def knee_curves(knees: dict[str, dict], images: dict[str, int]) -> dict[str, pd.DataFrame]:
    """Every search's levels on one axis of images in flight (concurrency x images per request), for plots.sweep;
    each search's rows by level, not in the order searched, so that its line does not double back."""
    return {label + (f" (x {images[label]})" if images[label] > 1 else ""):
            pd.DataFrame(found["rows"]).sort_values("concurrency", kind="stable").reset_index(drop=True)
            .assign(concurrency=lambda d, k=images[label]: d["concurrency"] * k)
            for label, found in knees.items()}


def clean(records: list[dict]) -> list[dict]:
    """Table records with NaN as None, for a results JSON."""
    return [{k: (None if not isinstance(v, (list, dict)) and pd.isna(v) else v) for k, v in row.items()}
            for row in records]


def shortened(config: str, head: int = 12, tail: int = 3) -> str:
    """A long config's first `head` and last `tail` lines, the repeated middle (one warm-up entry per batch size) named."""
    lines = config.splitlines()
    if len(lines) <= head + tail + 1:
        return config.rstrip("\n")
    return "\n".join(lines[:head] + [f"  ... ({len(lines) - head - tail} more lines of the same warm-up entry, one "
                                     "per batch size)"] + lines[-tail:])


VARIANT_COLUMNS = ["variant", "bytes/request", "stable", "throughput", "throughput_min", "throughput_max", "screened",
                   "p50_ms", "p99_ms", "verdict", "window_requests", "requests", "peak_rss_mb", "client_cores",
                   "server avg_batch", "server queue_ms_per_request", "server compute_ms_per_request"]


def shown_columns(table: pd.DataFrame, gpu_sampled: bool) -> pd.DataFrame:
    """The variants table as shown: its columns in reading order, the GPU's only where one was sampled, rounded."""
    return table.reindex(columns=[*VARIANT_COLUMNS, *(["gpu_util_pct", "gpu_memory_mb"] if gpu_sampled else []),
                                  "error"]).round(2)


def kept(ok: pd.DataFrame, result: dict | None, p99_budget_ms: float) -> str:
    """The variant to drive further: the one the winner rule kept, else the fastest within the budget (else fastest)."""
    if ok.empty:
        raise ValueError("no stable variant: expected at least one row with a stable measurement, found none")
    if result is not None and result["kept"] in ok.index:
        return result["kept"]
    within = ok[ok["p99_ms"] <= p99_budget_ms]
    return (within if not within.empty else ok)["throughput"].idxmax()


def rule_said(result: dict | None, repeats: int) -> str:
    """The winner rule's verdict in one line, or why it did not run."""
    if result is None:
        return f"repeats={repeats}: one run each, so no winner is named (the winner rule needs three runs of each finalist)"
    return f"{', '.join(result['finalists'])}: {repeats} runs each, in turns: {result['verdict']}"


def contest_record(result: dict | None, repeats: int) -> dict | None:
    """The winner rule's result for a results JSON: verdict, winner, kept, ranges and every run."""
    if result is None:
        return None
    return {"verdict": result["verdict"], "winner": result["winner"], "kept": result["kept"], "runs_per_finalist": repeats,
            "ranges": {k: list(v) for k, v in result["ranges"].items()},
            "runs": result["runs"].reindex(columns=["setting", "stable", "throughput", "p99_ms"]).round(3)
            .to_dict(orient="records")}


def variants_recap(ok: pd.DataFrame, baseline: str, kept_label: str, concurrency: int) -> list[str]:
    """Recap lines of the variants (stable rows indexed by label): the baseline against the kept one, then each row."""
    best = ok.loc[kept_label]
    lines = [f"at c={concurrency}: the variant kept, '{kept_label}', {best['throughput']:.0f} infer/s "
             f"(p99 {best['p99_ms']:.1f} ms)"]
    if baseline in ok.index:
        base = ok.loc[baseline]
        lines[0] += (f", {best['throughput'] / base['throughput']:.1f}x the article's baseline "
                     f"({base['throughput']:.0f} infer/s, p99 {base['p99_ms']:.1f} ms)")
    return lines + [f"  {label}: {row['bytes/request']:,} bytes/request, {row['throughput']:.0f} infer/s, server batch "
                    f"{row['server avg_batch']:.1f}" + (f" ({row['verdict']})" if row.get("verdict") else "")
                    for label, row in ok.iterrows()]


def saved(run_dir: str | Path, notebook: str) -> dict:
    """A notebook's results in this run folder (results/<notebook>.json); an error says which notebook to run first."""
    path = Path(run_dir) / "results" / f"{notebook}.json"
    if not path.exists():
        raise FileNotFoundError(f"expected {path}: run notebook {notebook} first, with the same run_dir and models_dir")
    return json.loads(path.read_text())



def knee_lines(knees: pd.DataFrame) -> list[str]:
    """Recap lines of knee_table's rows: each search's knee (or none) and why it stopped."""
    def named(k: pd.Series) -> str:  # a search that ended within the budget at its top level reached no knee
        return "knee" if pd.notna(k.get("level above")) else "no knee reached; top level searched"

    return [f"knee search '{k['search']}': " + (
        f"{named(k)} at c={k['knee c']:.0f} ({k['images in flight']:.0f} images in flight), "
        f"{k['throughput (img/s)']:.0f} img/s, p99 {k['p99 (ms)']:.1f} ms" if pd.notna(k["knee c"]) else "no knee")
        + f"; stopped: {k['stopped because']}" for _, k in knees.iterrows()]


def other_knee_lines(knees: pd.DataFrame, rows: pd.DataFrame, kept: str) -> list[str]:
    """A recap line for each batch-1 search that ended at a higher load than the kept variant's (its knee, or its top
    level within the budget; or a level within the budget where the kept variant has none), or at the same load with
    a higher rate there and at every load above it that both searched; each line gives both knees' runs and its rate against the kept variant's at the loads both
    searched (`rows`: every search's levels, as 16_knee_searches.csv keeps them). Only the kept variant's knee is
    measured several times."""
    one = knees[(knees["images/request"] == 1) & knees["knee c"].notna()].set_index("search")
    if kept not in set(knees["search"]):
        return []
    rates = {label: level.dropna(subset=["throughput"]).set_index("concurrency")["throughput"]
             for label, level in rows.groupby("search")}

    def runs(k: pd.Series) -> str:  # how the search ended there (as knee_lines names it), and how often it ran
        count = int(k["runs at the knee"])
        ended = "its knee" if pd.notna(k.get("level above")) else "its top level searched, no knee reached"
        return f"{ended}; " + ("one run" if count == 1 else f"the median of {count} runs")

    stopped = knees.set_index("search").loc[kept, "stopped because"]
    lines = []
    for label, k in one.iterrows():
        if label == kept:
            continue
        both = rates.get(label, pd.Series(dtype=float)).to_frame("other").join(
            rates.get(kept, pd.Series(dtype=float)).to_frame("kept"), how="inner").sort_index()
        ratio = both["other"] / both["kept"]
        same = kept in one.index and k["knee c"] == one.loc[kept, "knee c"]
        upper = ratio[ratio.index >= k["knee c"]]  # at the knee and above it
        if kept in one.index and not (k["knee c"] > one.loc[kept, "knee c"] or same and len(upper) and upper.min() > 1):
            continue
        span = f"{ratio.min():.2f}-{ratio.max():.2f}x" if len(both) > 1 else f"{ratio.iloc[0]:.2f}x" if len(both) else ""
        shared = (f"; at the loads both searched (c={', '.join(str(int(c)) for c in both.index)}) its rate was {span} "
                  "the kept's" if span else "")
        if same:
            high = f"{upper.min():.2f}-{upper.max():.2f}x" if len(upper) > 1 else f"{upper.iloc[0]:.2f}x"
            lines.append(f"'{label}' ended its search at the same load as the kept '{kept}', c={k['knee c']:.0f} "
                         f"({runs(k)}; the kept: {runs(one.loc[kept])}), with a higher rate there and at every load above "
                         f"it that both searched (c={', '.join(str(int(c)) for c in upper.index)}: {high} the kept's)"
                         f"{shared}")
            continue
        lines.append(f"'{label}' ended its search at a higher load than the kept '{kept}': c={k['knee c']:.0f} "
                     f"({runs(k)}) against c={one.loc[kept, 'knee c']:.0f} ({runs(one.loc[kept])}){shared}"
                     if kept in one.index else f"'{label}' has a level within the budget where the kept '{kept}' has "
                     f"none: c={k['knee c']:.0f} ({runs(k)}); '{kept}' stopped: {stopped}{shared}")
    return lines


def lever_lines(levers: pd.DataFrame, in_flight: int) -> list[str]:
    """Recap lines of a levers table (its first row is the batch-1 row the others are set against)."""
    def spread(row) -> str:
        return (f" ({int(row['repeats'])} runs: {row['throughput_min']:.0f}-{row['throughput_max']:.0f})"
                if pd.notna(row.get("throughput_min")) and row.get("repeats", 0) > 1 else "")

    def across(row) -> str:
        server = row.get("server")  # a row served by another server than the batch-1 row's (the C API's own)
        return f" (two servers: this row ran in {server})" if isinstance(server, str) else ""

    def span(row) -> tuple[float, float]:
        repeated = pd.notna(row.get("throughput_min")) and row.get("repeats", 0) > 1
        return (row["throughput_min"], row["throughput_max"]) if repeated else (row["throughput"], row["throughput"])

    def tell(row) -> str:  # the rule benchmarks.md states: one run, or ranges that overlap, show no gain
        if not (pd.notna(row.get("repeats")) and row.get("repeats", 0) > 1):
            return "; one run: no gain this run can tell"
        (low, high), (base_low, base_high) = span(row), span(levers.iloc[0])
        return "; its range overlaps the batch-1 row's: no gain this run can tell" if low <= base_high and base_low <= high else ""

    return [f"lever at {in_flight} images in flight: {lever['lever']}: " + (
        f"{lever['throughput']:.0f} infer/s{spread(lever)} (p99 {lever['p99_ms']:.1f} ms), {lever['x batch-1']:.2f}x the "
        f"batch-1 row{across(lever)}{tell(lever)}" if lever["stable"] else f"not measured ({lever.get('error')})")
        for _, lever in levers.iloc[1:].iterrows()]


def around(mean_batch: float) -> list[int]:
    """The whole batch sizes on either side of a mean batch size (one size when the mean is whole)."""
    if not mean_batch >= 1:
        raise ValueError(f"a mean batch size of at least 1 expected; got {mean_batch!r}")
    return sorted({math.floor(mean_batch), math.ceil(mean_batch)})


def at_mean_batch(rates: dict[int, float], mean_batch: float, streams: int) -> tuple[float, float]:
    """In-process time per batch (ms) and images per second at a mean batch size: each stream's batch time, linear
    between the whole batches on either side (`rates`: img/s of `streams` streams at once, by batch size)."""
    missing = [b for b in around(mean_batch) if b not in rates]
    if missing:
        raise ValueError(f"in-process rates at batches {around(mean_batch)} expected around the mean batch "
                         f"{mean_batch:.2f}; measured at {sorted(rates)}")
    low, high = around(mean_batch)[0], around(mean_batch)[-1]
    ms = {b: 1000 * b * streams / rates[b] for b in (low, high)}
    per_batch = ms[low] + (mean_batch - low) * (ms[high] - ms[low])
    return per_batch, 1000 * mean_batch * streams / per_batch


def instance_ms(row: pd.Series) -> float:
    """An instance's time per execution (ms): compute input + infer + output, from the statistics extension (rows
    from before it was read: compute infer alone)."""
    whole = float(row.get("server instance_ms_per_execution", float("nan")))
    return whole if whole == whole else float(row.get("server compute_infer_ms_per_execution", float("nan")))


def busy_instances(row: pd.Series) -> tuple[float, float]:
    """Executions per second (images/s over the mean batch) and the instances they kept busy on average (x an
    instance's time per execution)."""
    executions = float(row["throughput"]) / max(float(row.get("server avg_batch", 1.0)), 1.0)
    return executions, executions * instance_ms(row) / 1000


def rates_compare(row: pd.Series, ref_ms: float, served_ms: float, streams: int) -> bool:
    """Whether served and in-process rates compare: the reference's batch is no slower than the server's compute, or
    slower while the server kept clearly fewer instances busy than the reference ran streams."""
    return bool(ref_ms <= served_ms or (streams > 1 and busy_instances(row)[1] < streams - 0.5))


def factors(row: pd.Series, ref_ms: float, streams: int) -> str:
    """Served over in-process as the product it is: the share of instances busy x in-process batch time over an
    instance's time per execution (served = executions/s x batch; in-process = streams x batch / its batch time)."""
    busy, whole = busy_instances(row)[1], instance_ms(row)
    return (f"= {busy:.2f} of {streams} instances busy ({busy / streams:.0%}) x in-process batch over an instance's "
            f"time per batch ({ref_ms:.2f} / {whole:.2f} ms, compute input and output included: {ref_ms / whole:.2f})")


def withheld(knee: pd.Series, ref_ms: float, served_ms: float, batch: str, streams: int, where: str) -> str:
    """Why the gap is not split by stage (the reference's batch took longer than the server's compute), with how many
    of its instances the server kept busy; where that does not set them apart, served/in-process is not printed."""
    text = (f"in-process batch {batch} took {ref_ms:.1f} ms per stream, {streams} stream(s) at once; the server's mean "
            f"batch took {served_ms:.1f} ms to compute {where}, so ")
    executions, busy = busy_instances(knee)
    if rates_compare(knee, ref_ms, served_ms, streams):
        return text + (f"the gap is not split by stage (that subtracts one batch time from the other): the server kept "
                       f"{busy:.2f} of its {streams} instances busy on average ({executions:.0f} executions/s x "
                       f"{instance_ms(knee):.2f} ms of compute input, infer and output each), the reference all "
                       f"{streams} all the time; the rates still compare, as the product below")
    return text + (f"served/in-process is not printed here: the server kept {busy:.2f} of its {streams} instance(s) busy, "
                   "not clearly fewer than the reference's streams, so the reference's longer batches make it no "
                   "reference; it may have shared the device with other work, or run with other settings than the "
                   "server's backend")


def served_split(knee: pd.Series, per_batch_ms: float, inprocess: float, batch: str, streams: int,
                 where: str = "", by_stage: bool = True) -> str:
    """Served at the knee (`where`: the line's label) against in-process at the server's mean batch, and (`by_stage`)
    where an average request's time went: its compute infer split into in-process, the server's batch beyond it, and
    what the per-request mean adds (Triton counts a batch's time once per request in it, so larger batches weigh more)."""
    per_request = knee.get("compute_infer_ms", float("nan"))
    per_execution = knee.get("server compute_infer_ms_per_execution", float("nan"))
    split = pd.Series({
        "client send + receive": knee.get("client_send_ms", 0) + knee.get("client_recv_ms", 0),
        "network + server send/recv": knee.get("network_ms", float("nan")),
        "queue": knee.get("queue_ms", float("nan")),
        "compute input + output": knee.get("compute_input_ms", 0) + knee.get("compute_output_ms", 0),
        "compute infer per request above the mean batch's": per_request - per_execution,
        f"compute infer per batch beyond in-process batch {batch}": per_execution - per_batch_ms,
        f"in-process batch {batch}": per_batch_ms})
    where = where or f"at the knee (c={int(knee['concurrency'])})"
    head = (f"{where}: served {knee['throughput']:.0f} infer/s = "
            f"{knee['throughput'] / inprocess:.0%} of in-process batch {batch}, {streams} at once ({inprocess:.0f} img/s); "
            f"perf_analyzer kept {knee.get('client_cores', float('nan')):.2f} cores busy\n")
    if not by_stage:  # two measured factors, no split: the batch times ran with different overlap
        return head + f"served/in-process {factors(knee, per_batch_ms, streams)}"
    return (head + f"the server's mean batch took {per_execution:.2f} ms to compute (its execution statistics over every "
            f"run of the level), in-process {per_batch_ms:.2f} ms; where an average request's time went (ms; "
            + f"the part beyond in-process, {streams} stream(s) at once as the server's instances run,"
            + " is the server's batch time minus in-process; per request, Triton counts a batch's time once for each "
            "request in it, so larger batches weigh more, and that row also holds what differs between perf_analyzer's "
            f"measured windows and every run of the level):\n{split.round(2).to_string()}")


def versus_inprocess(row: pd.Series, per_batch_ms: float, inprocess: float, batch: float, streams: int, where: str) -> str:
    """A served row against in-process at its mean batch; not compared where in-process took longer per batch than
    the server's own batches (its execution statistics) while the server kept about all instances busy."""
    served_ms = row.get("server compute_infer_ms_per_execution", float("nan"))
    if not rates_compare(row, per_batch_ms, served_ms, streams):
        return (f"{where}: not set against in-process: in-process batch {batch:.3g} took {per_batch_ms:.1f} ms per stream, "
                f"the server's batches {served_ms:.1f} ms")
    product = "" if per_batch_ms <= served_ms else f" {factors(row, per_batch_ms, streams)}"
    return (f"{where}: served {row['throughput']:.0f} infer/s = {row['throughput'] / inprocess:.0%} of in-process batch "
            f"{batch:.3g}, {streams} at once ({inprocess:.0f} img/s){product}, p99 {row['p99_ms']:.2f} ms")
