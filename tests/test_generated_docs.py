"""README.md and the docs carry measured figures only inside generated blocks (`<!-- generated: NAME -->...
<!-- /generated -->`, rendered from the recordings by scripts/benchmark_numbers.py): a figure typed outside one
goes stale with the next recording. Settings the series sets (CLAIM_SETTINGS) and figures quoted from the articles
or upstream with a link in the same sentence are the only numbers allowed there."""
from __future__ import annotations

import importlib.util
import re

from helpers import series

spec = importlib.util.spec_from_file_location("benchmark_numbers", series.ROOT / "scripts" / "benchmark_numbers.py")
numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(numbers)

DOCS = ("README.md", "docs/workshop.md", "docs/cluster.md", "docs/glossary.md", "docs/benchmarks.md")
LINK = re.compile(r"https?://|\(linked\)")


def typed_figures(text: str, name: str) -> list[str]:
    """Measured figures (a number with a unit, a ratio, a percentage) outside generated blocks, without a link in
    their own sentence."""
    found = []
    text = re.sub(r"\]\(https?://[^)]*\)", "] (linked)", text)  # a link's target would be taken out with it
    for claim in numbers.claims(text, name):
        near = claim["near"]
        at = near.find(claim["claim"])
        start = max(near.rfind(". ", 0, at), 0)
        end = near.find(". ", at)
        if not LINK.search(near[start:end if end >= 0 else len(near)]):
            found.append(f"{name}: {claim['claim']!r} in ...{near}...")
    return found


def test_no_measured_figure_is_typed_outside_a_generated_block():
    found = [f for name in DOCS for f in typed_figures((series.ROOT / name).read_text(), name)]
    assert not found, "type these as generated blocks (scripts/benchmark_numbers.py BLOCKS):\n" + "\n".join(found)


def test_a_planted_figure_is_caught_and_a_generated_or_linked_one_is_not():
    readme = (series.ROOT / "README.md").read_text()
    for planted in ("It served 4321 infer/s.", "That is 11x faster.", "The spread was 12 %.", "p99 fell to 3.2 ms."):
        assert typed_figures(readme + "\n\n" + planted + "\n", "README.md"), planted
    allowed = ("<!-- generated: headline -->It served 4321 infer/s.<!-- /generated -->",
               "The article reports 271.5 infer/s ([the article](https://example.com/a)).")
    for text in allowed:
        assert not typed_figures(readme + "\n\n" + text + "\n", "README.md"), text


def test_every_generated_block_has_a_renderer():
    for name in (*DOCS, *numbers.BLOCK_DOCS):
        for block in numbers.BLOCK.finditer((series.ROOT / name).read_text()):
            assert block["name"] in numbers.BLOCKS or block["name"] == "benchmarks", (name, block["name"])
