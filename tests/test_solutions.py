"""The exercises' solutions (solutions/*.ipynb) execute after the ci run, so a broken solution fails CI."""
from __future__ import annotations

import json

import pytest

from helpers import series

SOLUTIONS = series.ROOT / "solutions"
# the exercise names notebook 13's knob_concurrency: the solution measures there, as the ci profile sets it
KNOB_CONCURRENCY = series.profile_parameters("ci", "13_dynamic_batching_compare")["knob_concurrency"]
CI_WINDOWS = {k: series.profile_parameters("ci", "13_dynamic_batching_compare")[k]
              for k in ("measurement_request_count", "max_trials", "stability_percentage")}


@pytest.mark.notebooks
@pytest.mark.parametrize("name", ["07_exercises", "13_exercises"])
def test_solutions_execute_and_answer(ci_run_through, name, tmp_path):
    import papermill

    # what each reads: 07's results; 11's results and 10's model (it measures while the ci run goes on, so with the
    # ci profile's noise-tolerant windows)
    ci_run = ci_run_through({"07_exercises": "07_local_vs_triton", "13_exercises": "11_baseline_benchmark"}[name])

    papermill.execute_notebook(str(SOLUTIONS / f"{name}.ipynb"), str(tmp_path / f"{name}.ipynb"),
                               parameters={"runtime": "local", "run_dir": str(ci_run),
                                           **({"concurrency": KNOB_CONCURRENCY, **CI_WINDOWS} if name == "13_exercises" else {})},
                               cwd=str(SOLUTIONS),
                               kernel_name="python3", progress_bar=False)
    answer = json.loads((ci_run / "results" / f"{name}.json").read_text())
    if name == "07_exercises":
        assert "32" in answer["refused"] and "TYPE_FP16 in config" in answer["preflight"]
        assert answer["triton_said"].startswith(("refused at load", "loaded"))  # Triton's own word, beside pre-flight
        assert set(answer["extra_ms_per_image"]) == {"1", "8"}
    else:
        assert [row["setting"] for row in answer["knobs"]] == ["delay 0 us", "delay 5000 us", "2 instances"]
        assert answer["largest"] in answer["baseline_split"]
        assert answer["concurrency"] == KNOB_CONCURRENCY and answer["arriving_in_5ms"] > 0


def test_each_track_ends_with_exercises_that_point_to_their_solutions():
    for notebook, solution in (("07_local_vs_triton", "07_exercises"), ("13_dynamic_batching_compare", "13_exercises")):
        cells = json.loads((series.NOTEBOOK_DIR / f"{notebook}.ipynb").read_text())["cells"]
        texts = ["".join(c["source"]) for c in cells]
        at = next(i for i, t in enumerate(texts) if t.startswith("## Exercises"))
        last = texts[at]  # the track's last section before the references, the recap and the questions
        assert texts[at + 1].startswith("## References") and f"solutions/{solution}.ipynb" in last
        assert last.count("\n1. ") + last.count("\n2. ") + last.count("\n3. ") == 3
        assert (SOLUTIONS / f"{solution}.ipynb").exists()
