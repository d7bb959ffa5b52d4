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
        for kind, where, slack in (("h200", r"on an H200 \(`gpu-local` profile, 2026-12-01\)", 0.2),
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
    memory = json.loads((numbers.DATA / "h200_11_results.json").read_text())["memory_peak_mb"]["none"]
    cells = json.loads((series.ROOT / "notebooks" / "11_baseline_benchmark.ipynb").read_text())["cells"]
    assert f"took it to\n{memory:.0f} MB" in "".join("".join(c["source"]) for c in cells)
