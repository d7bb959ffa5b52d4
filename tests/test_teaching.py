"""The lesson is in the page: every notebook names its source, links the references it uses, ends with a recap of
this run's numbers and questions whose answers are in solutions/answers.md."""
from __future__ import annotations

import json
import re

import pytest

from helpers import series

LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def _cells(path):
    return json.loads(path.read_text())["cells"]


def _markdown(path) -> str:
    return "\n".join("".join(c["source"]) for c in _cells(path) if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", series.notebooks(), ids=lambda p: p.stem)
def test_notebook_names_its_source_and_links_its_references(path):
    text = _markdown(path)
    assert "".join(_cells(path)[1]["source"]).startswith("**You will learn**"), "objectives and banner come second"
    source = "Tan Pengshi Alvin" if path.stem < "10" else "deploying an optimized model on Triton"
    assert source in text, f"{path.name} does not name its source article"
    links = LINK.findall(text)
    assert len([u for u in links if u.startswith("https://")]) >= 3, f"{path.name} links fewer than 3 references"
    assert all(u.startswith(("https://", "#")) for u in links), f"{path.name} links a local path: {links}"
    assert "## References" in text and ("**Runs on this machine**" in text or "**What runs here**" in text)


@pytest.mark.parametrize("path", series.notebooks(), ids=lambda p: p.stem)
def test_notebook_ends_with_a_recap_and_questions_answered_in_solutions(path):
    cells = _cells(path)
    recap = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Recap"))
    assert cells[recap + 1]["cell_type"] == "code", "the recap computes its numbers in a code cell"
    tail = "".join(cells[-1]["source"])
    assert cells[-1]["cell_type"] == "markdown" and "Check your understanding" in tail, path.name
    questions = re.findall(r"^\d\. ", tail, re.M)
    assert 2 <= len(questions) <= 3, path.name
    answers = (series.ROOT / "solutions" / "answers.md").read_text()
    section = answers.split(f"## {path.stem}\n", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"^\d\. \*", section, re.M)) == len(questions), f"answers for {path.name}"
    # each question quoted whole (joined across its line breaks), not cut where the notebook's line ends
    asked = [" ".join(q.split()) for q in re.split(r"^\d\. ", tail.split("\n", 1)[1], flags=re.M)[1:]]
    quoted = [" ".join(q.split()) for q in re.findall(r"^\d\. \*(.+?)\*  $", section, re.M)]
    assert quoted == asked, f"solutions/answers.md quotes {path.stem}'s questions as {quoted}; the notebook asks {asked}"


@pytest.mark.notebooks
def test_recaps_quote_this_runs_numbers(ci_run):
    for path in series.notebooks():
        cells = _cells(ci_run / path.name)
        recap = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("## Recap"))
        printed = "".join("".join(o.get("text", "")) for o in cells[recap + 1].get("outputs", []))
        assert re.search(r"\d", printed), f"{path.name}'s recap printed no number: {printed!r}"
