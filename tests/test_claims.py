"""Claims in the series' prose that a file can check: limits, counts and numbers that must equal the helpers' values,
docs/data or a recorded run (issue 24's list of mismatches; the numbering below is that list's)."""
from __future__ import annotations

import importlib.util
import json
import re

import pandas as pd
import pytest

from helpers import perf, series

ROOT = series.ROOT
DATA = ROOT / "docs" / "data"

spec = importlib.util.spec_from_file_location("benchmark_numbers", ROOT / "scripts" / "benchmark_numbers.py")
numbers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(numbers)


def _cells(path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _markdown(stem: str) -> str:
    return "\n".join("".join(c["source"]) for c in _cells(series.NOTEBOOK_DIR / f"{stem}.ipynb")
                     if c["cell_type"] == "markdown")


def _code(stem: str) -> str:
    return "\n".join("".join(c["source"]) for c in _cells(series.NOTEBOOK_DIR / f"{stem}.ipynb")
                     if c["cell_type"] == "code")


def _flat(text: str) -> str:
    """Markdown with its line breaks taken out, so a quoted phrase may wrap anywhere."""
    return re.sub(r"\s+", " ", text)


def test_memory_limit_quoted_is_the_helpers():
    """1. Every 'at most N GB' in the notebooks (prose and parameter comments) is perf.MEMORY_CAP_GB."""
    quoted = []
    for path in series.notebooks():
        text = "\n".join("".join(c["source"]) for c in _cells(path))
        quoted += [(path.stem, float(v)) for v in re.findall(r"at most (\d+(?:\.\d+)?) GB", _flat(text))]
    assert len(quoted) >= 3, quoted
    assert all(v == perf.MEMORY_CAP_GB for _, v in quoted), (perf.MEMORY_CAP_GB, quoted)


def test_14_opening_numbers_are_the_data():
    """5-6. 14 opens with where a request's time goes (the queue, not the bytes), quoted from the H200's variants."""
    text = _flat(_markdown("14_near_the_limit"))
    variants = pd.read_csv(DATA / "h200_14_variants.csv").set_index("variant")
    base = variants.loc["article baseline: FP32, no batching, gRPC"]
    assert (f"waited {base['queue_ms']:.1f} ms in the server's queue per request, against {base['compute_infer_ms']:.1f} "
            f"ms of compute and {base['network_ms']:.1f} ms on the network and in the server's send/receive") in text
    three = variants.loc[["FP32 + batching, cuda shm", "UINT8 + batching, gRPC", "UINT8 + batching, cuda shm"],
                         "throughput"]
    assert (f"FP32 over CUDA shared memory ({three.iloc[0]:.0f} infer/s), UINT8 over gRPC ({three.iloc[1]:.0f}) and "
            f"UINT8 over CUDA shared memory ({three.iloc[2]:.0f}) served within "
            f"{1 - three.min() / three.max():.0%}".replace("%", " %")) in text
    assert "FP32 tensors sent over gRPC" not in text and "receiving 602 KB per image, not computing" not in text


def test_13_names_what_the_recorded_run_could_not_measure():
    """7. The recorded H200 run of 13 measured two instances; what the memory guard stopped were the transports that
    carry the tensor (its report)."""
    knobs = pd.DataFrame(numbers.recorded_13()["knobs"])
    failed = list(knobs.loc[~knobs["stable"].astype(bool), "value"])
    assert knobs.set_index(["knob", "value"]).loc[("instances", "2"), "stable"]
    text = _flat(_markdown("13_dynamic_batching_compare"))
    assert f"the {' and '.join(failed)} transport rows" in text and "two instances included, was measured" in text
    assert "killed while measuring two GPU instances" not in text


def test_13_and_its_solution_say_what_a_preferred_size_does():
    """21. A preferred-size batch leaves at once; the batcher waits only up to the queue delay (Triton's batcher.md)."""
    text = _flat(_markdown("13_dynamic_batching_compare"))
    assert "the batch sizes the batcher waits for" not in text
    assert "batcher.md#preferred-batch-sizes" in text and "should not be used for most models" in text
    solution = _flat("\n".join("".join(c["source"]) for c in _cells(ROOT / "solutions" / "13_exercises.ipynb")))
    assert "batcher.md#delayed-batching" in solution and "of the 16 preferred" not in solution


def test_keras_runs_where_the_pinned_tensorflow_runs():
    """20. requirements.txt pins the CPU-only TensorFlow wheel: 01 does not promise a GPU."""
    pins = (ROOT / "requirements.txt").read_text()
    banner = next(line for line in _markdown("01_keras_resnet50").splitlines() if line.startswith("**Runs on this machine**"))
    if re.search(r"^tensorflow_cpu==", pins, re.M):
        assert "CPU or GPU" not in banner and "tensorflow_cpu" in banner


def test_workshop_counts_and_times_are_the_series():
    """23. The notebook count, the run times the agendas quote and the H200 figures of 14's row."""
    text = (ROOT / "docs" / "workshop.md").read_text()
    words = {12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen"}
    assert f"the {words[len(series.notebooks())]} notebooks in `notebooks/`" in text
    times = numbers.recorded_times()
    gpu = numbers.gpu_total(times)
    timed = sorted(times["h200"])
    span = f"{timed[0][:2]}-{timed[-1][:2]}"
    assert f"about {gpu / 60:.0f} min of run time for {span} on an H200, the table's {gpu:.0f} s" in _flat(text)
    cpu = {name: max(v) for name, v in times["cpu"].items()}
    keras = sum(s for name, s in cpu.items() if name[:2] in {"00", "01", "02", "03", "04", "05", "06", "07"})
    resnet = sum(s for name, s in cpu.items() if name[:2] in {"10", "11", "13"})
    assert f"({keras / 60:.1f} min of run time on a CPU" in text and f"({resnet / 60:.1f} min of run time" in text
    runs = [*numbers._repeat_runs().values(), json.loads((DATA / "h200_14_results.json").read_text())]
    best = [numbers._best_at_16(r)["throughput"] for r in runs]
    knees = [r["knee"]["throughput"] for r in runs]
    assert (f"over the five recorded runs of benchmarks.md: {min(best):.0f}-{max(best):.0f} infer/s for the best row "
            f"at c=16, the knee at {min(knees):.0f}-{max(knees):.0f} infer/s") in text and len(runs) == 5


def test_workshop_shared_server_says_which_transport_crosses_hosts():
    """24. 11 defaults to system shared memory, which needs perf_analyzer and the server on one machine."""
    text = _flat((ROOT / "docs" / "workshop.md").read_text())
    assert '**11** with `shared_memory = "none"`' in text
    cells = _cells(series.NOTEBOOK_DIR / "11_baseline_benchmark.ipynb")
    params = next("".join(c["source"]) for c in cells if "parameters" in c["metadata"].get("tags", []))
    assert re.search(r'^shared_memory = "system"', params, re.M)


def test_glossary_counts_instances_as_notebook_20_does():
    """27. KIND_GPU: `count` instances on each listed GPU (model_configuration.md, and 20's own text)."""
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    line = next(line for line in glossary.splitlines() if line.startswith("| **KIND_GPU / KIND_CPU**"))
    assert "one per listed GPU" not in line and "`count` instances on **each** GPU" in line
    assert "places `count` instances on **each** GPU it lists" in _flat(_markdown("20_kubernetes"))


def test_every_notebook_reads_the_series_tag_and_readme_names_the_pinned_ones():
    """28. README: the notebooks read the series' tag; the solutions that pin one are named with the tag they pin."""
    readme = _flat((ROOT / "README.md").read_text())
    for path in series.notebooks():
        params = next("".join(c["source"]) for c in _cells(path) if "parameters" in c["metadata"].get("tags", []))
        tag = re.search(r'^ngc_tag = "([^"]+)"', params, re.M)
        assert tag is None or tag.group(1) == "series", path.name
    pinned = set()
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        params = "".join(_cells(path)[1]["source"])  # the solutions' parameters: the cell after the title
        tag = re.search(r'^ngc_tag = "([^"]+)"', params, re.M)
        if tag and tag.group(1) != "series":
            pinned.add(tag.group(1))
    assert pinned, "no solution pins a tag: README's sentence about them can go"
    for tag in pinned:  # README names them, the tag they pin, and how to pass them the series' tag
        assert f"solution notebooks in `solutions/` set `ngc_tag = \"{tag}\"`" in readme and "-p ngc_tag" in readme


def test_capacity_plan_divides_by_a_rate_measured_over_the_network():
    """30. A pod behind a Service is reached over the network: 20's H200 rate is the knee of a sweep that sent the
    tensor in every request (notebook 13, 2026-11-30), not 14's knee through CUDA shared memory."""
    code, text = _code("20_kubernetes"), _flat(_markdown("20_kubernetes"))
    assert "h200_14_results.json" not in code and "h200_native_sweeps.csv" in code
    sweep = pd.read_csv(DATA / "h200_native_sweeps.csv").query(
        "notebook == 13 and model == 'resnet18_opt' and run == 'run1'")
    knee = perf.best(sweep, 10.0)
    assert f"{knee['throughput']:.0f} infer/s at concurrency {int(knee['concurrency'])} with p99 {knee['p99_ms']:.1f} ms" in text
    assert int(knee["concurrency"]) == int(sweep["concurrency"].max()) and "so a lower bound" in text
    shm_knee = json.loads((DATA / "h200_14_results.json").read_text())["knee"]["throughput"]
    assert f"knee of {shm_knee:,.0f} infer/s" in text
    grpc = pd.read_csv(DATA / "h200_14_variants.csv").set_index("variant").loc["UINT8 + batching, gRPC", "throughput"]
    assert f"UINT8 row over gRPC ({grpc:.0f} infer/s" in text


def test_10_says_why_torchscript_with_the_backends_readme():
    """The TorchScript note: torch_aoti (PT2 archives) since 26.03, no batch sizes above 1 yet, per the README."""
    text = _flat(_markdown("10_resnet18_torchscript"))
    assert "https://github.com/triton-inference-server/pytorch_backend#aot-inductor-support-beta" in text
    assert '`platform: "torch_aoti"` since Triton 26.03' in text and "batch sizes greater than 1" in text


def test_ci_run_time_quoted_is_the_recorded_runs():
    """25. README and the console's expected time both come from the recorded CI run's report (profiles.yml
    `recorded:`), not from two hand-typed copies."""
    import yaml

    folders = yaml.safe_load(series.PROFILES_FILE.read_text())["ci"]["recorded"]
    rows = [row for folder in folders for report in sorted((ROOT / folder).glob("report*.md"))
            for row in re.findall(r"^\| (\d\d_\w+) \| ok \| (\d+) \|", report.read_text(), re.M)]
    total = sum(float(s) for _, s in rows)
    assert rows and total > 60
    printed = series.expected_duration("ci")
    assert f"about {total / 60:.0f} minutes ({total:.0f} s) for all {len(rows)} notebooks" in printed, printed
    readme = _flat((ROOT / "README.md").read_text())
    quoted = re.findall(r"`ci` \(local server, random weights, short sweeps; about (\d+) min on 2 cores, the recorded "
                        r"CI run in `([^`]+)`\)", readme)
    assert quoted == [(f"{total / 60:.0f}", folders[-1])], quoted
    profiles = yaml.safe_load(series.PROFILES_FILE.read_text())
    for name, entry in profiles.items():  # a profile with recorded runs quotes their times, not a copy of them
        if isinstance(entry, dict) and entry.get("recorded"):
            assert "{minutes}" in entry["about"] and not re.search(r"\d+ s\b", entry["about"]), (name, entry["about"])
    gpu = series.expected_duration("gpu-local")
    for notebook, seen in series.recorded_ranges("gpu-local").items():
        low, high = f"{min(seen):.0f}", f"{max(seen):.0f}"
        assert f"{notebook[:2]}: {low if low == high else f'{low}-{high}'} s" in gpu, (notebook, seen, gpu)


def test_04_and_10_say_what_triton_completes_itself():
    """31. Auto-complete (on by default, `--disable-auto-complete-config`) in prose with its link; 10 serves a config
    without platform and instance group and prints what the server reports (get_model_config) beside its own."""
    anchor = "model_configuration.html#auto-generated-model-configuration"
    for stem in ("04_model_repository", "10_resnet18_torchscript"):
        text = _flat(_markdown(stem))
        assert anchor in text and "--disable-auto-complete-config" in text, stem
    assert "default-max-batch-size" in _flat(_markdown("04_model_repository"))
    assert "not supported for pytorch backend" in _flat(_markdown("10_resnet18_torchscript"))
    code = _code("10_resnet18_torchscript")
    minimal = re.search(r'minimal_text = f"""(.*?)"""', code, re.S).group(1)
    assert "platform" not in minimal and "instance_group" not in minimal and 'backend: "pytorch"' in minimal
    assert "client.get_model_config(name)" in code and "repository.fields(" in code


def test_every_number_in_prose_is_rendered_from_data_or_names_its_source():
    """What to build 5: every claim (a number with a unit of a measured quantity) in README, docs/*.md and the
    notebooks' markdown is generated from docs/data or has a source in its paragraph; the rules and every exemption
    are in scripts/benchmark_numbers.py (CLAIM_UNITS, CLAIM_SOURCES, CLAIM_EXEMPT, CLAIM_SETTINGS)."""
    texts = numbers.claim_texts()
    assert {"README.md", "docs/workshop.md", "docs/glossary.md", "11_baseline_benchmark.ipynb"} <= set(texts)
    found = [c for name, text in texts.items() for c in numbers.claims(text, name)]
    assert len(found) > 40 and {c["source"] for c in found} >= {"a link", "docs/data", "a recorded run"}
    assert not numbers.unsourced(texts), "\n".join(f"{c['doc']}: {c['claim']!r} in ...{c['near']}..."
                                                   for c in numbers.unsourced(texts))


def test_a_planted_number_without_a_source_is_caught():
    """The claims check can fail: a measured number planted in a copy of README, of a notebook's markdown and of a
    generated page outside its generated section is listed; the same number in code, or with its source, is not."""
    texts = numbers.claim_texts()
    planted = "On a laptop the baseline serves 4321 infer/s with p99 12.5 ms."
    for name in ("README.md", "14_near_the_limit.ipynb", "docs/benchmarks.md", "docs/glossary.md"):
        copy = {**texts, name: texts[name].replace("\n\n", f"\n\n{planted}\n\n", 1)}  # after the first paragraph
        assert {(c["doc"], c["claim"]) for c in numbers.unsourced(copy)} == {(name, "4321 infer/s"), (name, "12.5 ms")}
    for harmless in ("`4321 infer/s`", planted + " (`docs/data/h200_14_variants.csv`)",
                     "Check it: 3 x 224 x 224 x 4 = 602 KB."):
        copy = {**texts, "README.md": texts["README.md"].replace("\n\n", f"\n\n{harmless}\n\n", 1)}
        assert not numbers.unsourced(copy), harmless
    wrong = texts["docs/workshop.md"].replace("the table's CPU times", "as measured", 1).replace(
        "min of run time, the table's;", "min of run time;", 1)  # the sources taken away
    quoted = re.findall(r"\((\d\.\d min) of run time", texts["docs/workshop.md"])[:2]
    assert [c["claim"] for c in numbers.unsourced({"docs/workshop.md": wrong})] == quoted and len(quoted) == 2


def test_an_exempt_setting_that_left_the_text_is_reported():
    """CLAIM_SETTINGS cannot keep exempting a phrase the text no longer has."""
    text = numbers.claim_texts()["README.md"].replace("the 20x reliability step", "the reliability step")
    with pytest.raises(ValueError, match="no longer has"):
        numbers.claims(text, "README.md")
