"""docs/benchmarks.md quotes only numbers computed from docs/data (scripts/benchmark_numbers.py)."""
from __future__ import annotations

import importlib.util

from helpers import series

spec = importlib.util.spec_from_file_location("benchmark_numbers", series.ROOT / "scripts" / "benchmark_numbers.py")
numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(numbers)


def test_generated_sections_equal_what_the_data_gives():
    text = numbers.DOC.read_text()
    assert numbers.render(text) == text, "docs/benchmarks.md differs from docs/data: python scripts/benchmark_numbers.py --write"


def test_a_hand_edited_number_is_caught():
    text = numbers.DOC.read_text()
    knee = f"{numbers.json.loads((numbers.DATA / 'h200_14_results.json').read_text())['knee']['throughput']:.0f} infer/s"
    assert knee in text
    assert numbers.render(text.replace(knee, "25000 infer/s", 1)) != text.replace(knee, "25000 infer/s", 1)


def test_h200_run_times_quoted_by_the_notebooks_match_the_recorded_run():
    """Each notebook's 'on an H200' time agrees within 20 % with docs/runs' reports (the run it cites)."""
    import json
    import re

    recorded: dict[str, list[float]] = {}
    for report in (series.ROOT / "docs" / "runs" / "h200-2026-12-01").glob("report*.md"):
        for name, seconds in re.findall(r"\| (\d\d_\w+) \| ok \| (\d+) \|", report.read_text()):
            recorded.setdefault(name, []).append(float(seconds))
    checked = 0
    for path in series.notebooks():
        head = next("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if "".join(c["source"]).startswith("**You will learn**"))
        quoted = re.search(r"(\d+)(?:-(\d+))? s[^;]*? on an H200 \(`gpu-local` profile, 2026-12-01\)", head)
        if not quoted:
            continue
        low, high = float(quoted.group(1)), float(quoted.group(2) or quoted.group(1))
        assert path.stem in recorded, f"{path.name} quotes an H200 time that no recorded report holds"
        assert all(0.8 * low <= s <= 1.2 * high for s in recorded[path.stem]), (path.name, quoted.group(0), recorded[path.stem])
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
