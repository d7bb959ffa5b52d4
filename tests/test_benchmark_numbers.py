"""docs/benchmarks.md quotes only numbers computed from docs/data (scripts/benchmark_numbers.py)."""
from __future__ import annotations

import importlib.util

from helpers import series

spec = importlib.util.spec_from_file_location("benchmark_numbers", series.ROOT / "scripts" / "benchmark_numbers.py")
numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(numbers)


def test_generated_sections_equal_what_the_data_gives():
    for doc in numbers.SECTIONS:
        text = doc.read_text()
        assert numbers.render(text, doc) == text, f"{doc.name} differs from its data: python scripts/benchmark_numbers.py --write"


def test_a_hand_edited_number_is_caught():
    text = numbers.DOC.read_text()
    knee = f"{numbers.json.loads((numbers.DATA / 'h200_14_results.json').read_text())['knee']['throughput']:.0f} infer/s"
    assert knee in text
    assert numbers.render(text.replace(knee, "25000 infer/s", 1)) != text.replace(knee, "25000 infer/s", 1)


def _quoted_time(path, where: str):
    """(low, high) seconds a notebook's objectives cell quotes for a run `where` describes, or None."""
    import json
    import re

    head = next("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                if "".join(c["source"]).startswith("**You will learn**"))
    quoted = re.search(r"(\d+)(?:-(\d+))? s[^;]*? " + where, head)
    return None if not quoted else (float(quoted.group(1)), float(quoted.group(2) or quoted.group(1)))


def test_run_times_quoted_by_the_notebooks_match_the_recorded_runs():
    """Each notebook's CPU and H200 times agree with docs/runs' reports (the runs they cite): H200 within 20 %,
    the CPU run's as recorded."""
    recorded = numbers.recorded_times()
    checked = 0
    for path in series.notebooks():
        for kind, where, slack in (("h200", r"on an H200 \(`gpu-local` profile, 2026-12-0\d", 0.2),
                                   ("cpu", r"on 2 CPU cores \(`ci` profile, docs/runs/ci-", 0.0)):
            quoted = _quoted_time(path, where)
            if quoted is None:
                continue
            assert path.stem in recorded[kind], f"{path.name} quotes a {kind} time that no recorded report holds"
            low, high = quoted
            assert all((1 - slack) * low - 0.5 <= s <= (1 + slack) * high + 0.5 for s in recorded[kind][path.stem]), (
                path.name, kind, quoted, recorded[kind][path.stem])
            checked += 1
    assert checked >= 5


def test_numbers_quoted_outside_benchmarks_md_match_the_data():
    """README's headline ratio and notebook 11's memory figure are the recorded run's, not typed from memory."""
    import json

    import pandas as pd

    variants = pd.read_csv(numbers.DATA / "h200_14_variants.csv")
    ok = variants[variants["stable"].astype(bool)]
    base = ok[ok["variant"].str.startswith("article baseline")]["throughput"].iloc[0]
    assert f"reached {ok['throughput'].max() / base:.0f}x the article's baseline" in (series.ROOT / "README.md").read_text()
    memory = json.loads((numbers.DATA / "h200_11_results.json").read_text())["memory_peak_mb"]
    cells = json.loads((series.ROOT / "notebooks" / "11_baseline_benchmark.ipynb").read_text())["cells"]
    text = "".join("".join(c["source"]) for c in cells)
    # issue 24, items 2-3: 3828 MB is where the guard stopped it, not what a window reached; the growth is per second
    assert f"the guard stopped perf_analyzer at\n{memory['none']:.0f} MB" in text
    assert f"stays small ({memory['system']:.0f} MB in the H200 demonstration" in text
    stopped = json.loads((numbers.DATA / "h200_14_results.json").read_text())["errors"]["FP32 + batching, gRPC"]
    assert f"within 2 s ({numbers._resident(stopped).split(' after')[0]} resident" in text
    assert "after 2 s" in numbers._resident(stopped) and "a\nminute" not in text and "a minute" not in text


def test_the_knee_is_explained_by_its_own_row():
    """Issue 24, items 10, 11 and 14: the knee's batch size is the knee's row's (not the c=128 row's), the in-process
    model is named as the UINT8 one, the two clocks are not subtracted, and no target appears that the series never
    set."""
    import pandas as pd

    text = numbers.DOC.read_text()
    knee = numbers.json.loads((numbers.DATA / "h200_14_results.json").read_text())["knee"]
    sweep = pd.read_csv(numbers.DATA / "h200_14_saturation.csv").set_index("concurrency")
    row = sweep.loc[int(knee["concurrency"])]
    assert f"at concurrency {int(knee['concurrency'])}, p99 {knee['p99_ms']:.2f} ms, where the server's batcher formed " \
           f"batches of {row['server avg_batch']:.1f} on average" in text
    assert "the UINT8-input TorchScript of the same weights, not the FP32-input model the sweep served" in text
    # 25,000 infer/s is a target only where the levers section states its targets (issue 21), generated from TARGETS
    levers = numbers.render(text).split(numbers.BEGIN.format(name="levers"))[1].split(numbers.END)[0]
    assert f"at the knee {numbers.TARGETS['knee'][0]:,} infer/s with p99 <=" in levers
    assert "25,000" not in text.replace(levers, "") and "the rest is the client and the transport" not in text


def test_recorded_13_run_is_quoted_from_its_report():
    """Issue 24, item 8: the 2026-12-01 run of notebook 13 ran the 1000 us delay, the transports and the combined
    configuration; benchmarks.md quotes them from that run's report, not 'did not run'."""
    later = numbers.recorded_13()
    text = numbers.DOC.read_text()
    assert f"served {later['best']['throughput']:.0f} infer/s with p99 {later['best']['p99_ms']:.2f} ms" in text
    assert f"{later['best']['vs_baseline']:.2f}x that run's baseline" in text
    x = later["speedup_at_top"]["baseline + dynamic batching"]["throughput x"]
    assert f"({x:.2f}x)" in text and "did not run in run 3" in text
