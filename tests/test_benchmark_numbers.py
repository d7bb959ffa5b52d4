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
