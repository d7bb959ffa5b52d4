"""Every `docker run` shown in README.md and in the notebooks' markdown is the command the helpers run by default."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

from helpers import convert, ngc, perf, series
from helpers.runtime import RuntimeChoice
from helpers.server import TritonServer

ROOT = series.ROOT


def shown_commands(text: str) -> list[list[str]]:
    """`docker run` lines of the fenced bash blocks in `text`, continuation lines joined, $PWD as this folder."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if line.startswith("docker run"):
                line = line.replace("$PWD", str(ROOT)).replace("$(id -u):$(id -g)", f"{os.getuid()}:{os.getgid()}")
                found.append(shlex.split(line))
    return found


def helper_commands() -> list[list[str]]:
    """What the helpers run with the notebooks' default parameters."""
    for folder in ("build/keras", "build/resnet18", "runs/latest/perf", "models"):
        (ROOT / folder).mkdir(parents=True, exist_ok=True)  # docker_run wants volume sources to exist
    return [
        convert.in_tensorrt_container(convert.trtexec_args("resnet50.onnx", "model.plan", "input_1", (224, 224, 3),
                                                           batches=(1, 8, 32)), ROOT / "build" / "keras"),
        convert.in_tensorrt_container(convert.trtexec_args("model.onnx", "model.plan", "INPUT__0", (3, 224, 224),
                                                           batches=(1, 8, 64)), ROOT / "build" / "resnet18"),
        # the default ports, asked for: while another test's server holds 8000, the helper picks the next free ones
        TritonServer(ROOT / "models", RuntimeChoice("docker", "shown"), models=["resnet50_onnx"],
                     http_port=8000, grpc_port=8001, metrics_port=8002).command(),
        perf.level_command("resnet18_pytorch", "127.0.0.1:8001", ROOT / "runs" / "latest" / "perf" / "11_baseline_c1.csv",
                           ngc.NGC_TAG, **_first_level("11_baseline_benchmark"))[0],
    ]


def notebook_parameters(stem: str) -> dict:
    """The values a notebook's `parameters` cell sets, as its kernel sees them (no profile injected)."""
    cells = json.loads((series.NOTEBOOK_DIR / f"{stem}.ipynb").read_text())["cells"]
    seen: dict = {}
    exec(next("".join(c["source"]) for c in cells if "parameters" in c["metadata"].get("tags", [])), {}, seen)
    return seen


def _first_level(stem: str) -> dict:
    """perf_analyzer's settings for the first concurrency level of a notebook's sweep, from its own parameters: what
    the notebook runs by default, not the helper's defaults (issue 24, item 4: 11 sets shared_memory="system")."""
    p = notebook_parameters(stem)
    window = perf.count_window(0 if p["shared_memory"] != "none" else 3 * 224 * 224 * 4, trials=p["max_trials"],
                               limit_gb=perf.MEMORY_CAP_GB, most=p["measurement_request_count"])  # as 11 sizes it
    return {"protocol": p["protocol"], "concurrency": str(perf.concurrency_levels(p["concurrency"])[0]), **window,
            "stability_percentage": p["stability_percentage"], "shared_memory": p["shared_memory"]}


def documents() -> dict[str, str]:
    docs = {"README.md": (ROOT / "README.md").read_text()}
    for path in series.notebooks():
        cells = json.loads(path.read_text())["cells"]
        docs[path.name] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return docs


def test_every_shown_docker_command_is_one_the_helpers_run():
    expected = helper_commands()
    shown = {name: shown_commands(text) for name, text in documents().items()}
    assert sum(len(v) for v in shown.values()) >= 6, shown
    for name, commands in shown.items():
        for command in commands:
            assert command in expected, f"{name} shows a command no helper runs:\n  {ngc.as_shell(command)}"


def test_notebooks_that_run_containers_show_their_command():
    shown = {name: shown_commands(text) for name, text in documents().items()}
    for name in ("03_tensorrt_engine.ipynb", "05_start_triton.ipynb", "11_baseline_benchmark.ipynb",
                 "12_optimize_tensorrt.ipynb", "README.md"):
        assert shown[name], f"{name} shows no docker command"


def test_tutorial_help_prints_only_the_usage():
    out = subprocess.run([str(ROOT / "tutorial"), "help"], capture_output=True, text=True)
    assert out.returncode == 0 and "./tutorial setup" in out.stdout and "set -euo" not in out.stdout


def test_no_tracked_file_names_a_path_outside_the_repository():
    """Recorded runs and docs speak of the reader's checkout, not of the machine they were made on."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    outside = re.compile(r"/work/|\.\./shared|/tmp/run\b|/tmp/device-kit|/opt/torch")
    skip = {".ci/run", "tests/test_drift.py"}  # CI's own set-up lays the shared sources beside the checkout
    found = [f for f in files if f not in skip and (ROOT / f).is_file()
             and outside.search((ROOT / f).read_text(errors="replace"))]
    assert not found, f"these files name a path outside the repository: {found}"


def test_round_two_text_says_what_runs():
    """Round two, item 9: the world table named no Container Toolkit; 06 described 2.51 only; 05 showed one
    --load-model where two run after 03; 11 printed localhost:8001 where 127.0.0.1:<port> ran."""
    docs = documents()
    picked = next(line for line in docs["README.md"].splitlines() if line.startswith("| picked when"))
    assert "NVIDIA Container Toolkit" in picked
    assert "server version" in docs["README.md"] and "2.46" in docs["README.md"]
    assert "2.46 for 24.05" in docs["06_http_client.ipynb"]
    assert "--load-model=tensorrt_fp16_model" in docs["05_start_triton.ipynb"]
    code = "".join("".join(c["source"]) for c in json.loads((ROOT / "notebooks" / "11_baseline_benchmark.ipynb")
                                                             .read_text())["cells"] if c["cell_type"] == "code")
    assert '"localhost:8001"' not in code and 'perf.level_command("resnet18_pytorch", url,' in code
