"""CI definitions for a real forge: linted, and the GPU workflow runs the README's commands."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from helpers import series

WORKFLOWS = series.ROOT / ".github" / "workflows"


def _actionlint() -> str:
    found = Path(sys.executable).with_name("actionlint")
    assert found.exists() or shutil.which("actionlint"), "actionlint is pinned in requirements.txt"
    return str(found) if found.exists() else shutil.which("actionlint")


def test_workflows_pass_actionlint():
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert [f.name for f in files] == ["cpu.yml", "gpu.yml"]
    out = subprocess.run([_actionlint(), "-no-color", *map(str, files)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_cpu_workflow_runs_ci_and_gpu_workflow_runs_the_readme_commands():
    cpu = yaml.safe_load((WORKFLOWS / "cpu.yml").read_text())
    assert [s.get("run") for s in cpu["jobs"]["test"]["steps"] if s.get("run")] == ["bash .ci/run"]
    gpu = yaml.safe_load((WORKFLOWS / "gpu.yml").read_text())
    job = gpu["jobs"]["series"]
    assert {"self-hosted", "gpu", "docker"} <= set(job["runs-on"])
    runs = [s["run"] for s in job["steps"] if "run" in s]
    readme = (series.ROOT / "README.md").read_text()
    for command in runs:
        base = re.sub(r" --run-dir \S+", "", command)
        assert f"`{base}`" in readme or f"{base} " in readme, f"{command!r} is not a command the README gives"
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and uploads[0]["with"]["path"] == "runs/gpu-ci" and uploads[0]["if"] == "always()"
