"""`./tutorial lab --profile NAME`: the notebooks a workshop opens carry the profile's parameters, as papermill's."""
from __future__ import annotations

import json
import subprocess
import sys

from helpers import series


def test_lab_profile_copies_carry_the_profiles_parameters(tmp_path):
    out = subprocess.run([sys.executable, "-m", "helpers.series", "--profile", "ci", "--prepare-lab", str(tmp_path)],
                         cwd=series.ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for nb in series.notebooks():
        cells = json.loads((tmp_path / nb.name).read_text())["cells"]
        tags = [c["metadata"].get("tags", []) for c in cells]
        at = tags.index(["injected-parameters"])
        assert tags[at - 1] == ["parameters"], nb.name  # right after the notebook's own, as papermill puts it
        seen: dict = {}
        exec("".join(cells[at - 1]["source"]) + "\n" + "".join(cells[at]["source"]), {}, seen)  # what a kernel sees
        expected = series.profile_parameters("ci", nb.stem)
        assert {k: seen[k] for k in expected if k in seen} == {k: v for k, v in expected.items() if k in seen}
        assert seen.get("models_dir", str(series.ROOT / "models")) == str(series.ROOT / "models"), nb.name


def test_tutorial_lab_profile_opens_the_prepared_copies():
    script = (series.ROOT / "tutorial").read_text()
    assert '-m helpers.series --profile "$2" --prepare-lab "$notebook_dir"' in script
    assert 'notebook_dir="$ROOT/runs/lab-$2"' in script and '--notebook-dir="$notebook_dir"' in script


def test_a_profile_that_does_not_exist_is_named():
    out = subprocess.run([sys.executable, "-m", "helpers.series", "--profile", "nope", "--prepare-lab", "/nonexistent"],
                         cwd=series.ROOT, capture_output=True, text=True)
    assert out.returncode != 0 and "profile must be one of" in out.stderr
