"""Run the numbered notebooks with papermill into a run folder, with parameter profiles, and write a short report."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
PROFILES_FILE = NOTEBOOK_DIR / "profiles.yml"


def notebooks() -> list[Path]:
    """The numbered notebooks in run order."""
    return sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def resolve_device(device: str = "auto") -> str:
    """`cpu` or `cuda`; `auto` picks cuda when PyTorch sees a GPU."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda; got {device!r}")
    if device != "cpu":
        import torch

        if torch.cuda.is_available():
            return "cuda"
        if device == "cuda":
            raise RuntimeError("device='cuda' asked for, but PyTorch sees no CUDA GPU here")
    return "cpu"


def instance_kind(runtime: str, device: str) -> str:
    """Where the server runs a model: on the GPU in docker mode (the runtime needs one), else where `device` says.

    Not where this kernel's PyTorch can run: the host's PyTorch may not see a GPU the containers can use (a CUDA 13
    build of PyTorch needs driver 580; NGC 24.05 containers run on 545)."""
    if runtime not in ("docker", "local"):
        raise ValueError(f"runtime must be a resolved 'docker' or 'local'; got {runtime!r}")
    return "KIND_GPU" if runtime == "docker" or device == "cuda" else "KIND_CPU"


def profile_parameters(profile: str | None, notebook: str) -> dict:
    """Parameters a profile of notebooks/profiles.yml sets for one notebook (its `all` entry, then the notebook's)."""
    if not profile:
        return {}
    import yaml

    profiles = yaml.safe_load(PROFILES_FILE.read_text())
    if profile not in profiles:
        raise ValueError(f"profile must be one of {sorted(profiles)} (from {PROFILES_FILE}); got {profile!r}")
    entry = profiles[profile] or {}
    return {**(entry.get("all") or {}), **(entry.get(notebook) or {})}


def auto_profile() -> tuple[str | None, str]:
    """The profile that fits this machine, and why: Docker + GPU -> the article's sweeps (no profile); a GPU
    without Docker -> gpu-local; CPU only -> ci (short sweeps)."""
    from .runtime import choose_runtime

    choice = choose_runtime("auto")
    if choice.name == "docker":
        return None, f"{choice}: the article's parameters (16 concurrency levels, 5 s windows)"
    import torch

    if torch.cuda.is_available():
        return "gpu-local", f"{choice}; PyTorch sees {torch.cuda.get_device_name(0)}: GPU profile, sweeps of 4 levels"
    return "ci", f"{choice}; no GPU: the CPU profile (short sweeps; the article's 16-level sweeps take 40+ min here)"


def expected_duration(profile: str | None) -> str:
    """What a whole series took with this profile when it was last measured (notebooks/profiles.yml `about`)."""
    import yaml

    entry = yaml.safe_load(PROFILES_FILE.read_text()).get(profile or "", {}) or {}
    return entry.get("about", "not measured for this profile yet")


def save_results(run_dir: str | Path, notebook: str, results: dict) -> None:
    """Store a notebook's key numbers as results/<notebook>.json in the run folder, for the report."""
    path = Path(run_dir) / "results" / f"{notebook}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=str))
    print(f"results saved to {path}")


def write_report(run_dir: Path, rows: list[dict]) -> Path:
    """report.md: each notebook's status and time, then the numbers the notebooks saved."""
    lines = [f"# Run {run_dir.name}", "", "| notebook | status | seconds |", "|---|---|---|"]
    lines += [f"| {r['notebook']} | {r['status']} | {r['seconds']:.0f} |" for r in rows]
    for path in sorted((run_dir / "results").glob("*.json")):
        lines += ["", f"## {path.stem}", "", "```json", path.read_text().strip(), "```"]
    report = run_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    return report


def run_series(run_dir: str | Path | None = None, profile: str | None = None, only: list[str] | None = None,
               kernel: str = "python3", overrides: dict | None = None) -> Path:
    """Execute the notebooks in order into `run_dir` (default runs/<timestamp>); stop at the first failure.
    `overrides` (e.g. models_dir, build_dir) go to every notebook that declares them, after the profile's values."""
    import papermill

    run_dir = Path(run_dir or ROOT / "runs" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    selected = [nb for nb in notebooks() if not only or any(nb.stem.startswith(o) for o in only)]
    if not selected:
        raise ValueError(f"no notebook matches {only}; have {[nb.stem for nb in notebooks()]}")
    rows = []
    for nb in selected:
        declared = papermill.inspect_notebook(str(nb))
        params = {**profile_parameters(profile, nb.stem), "run_dir": str(run_dir),
                  **{k: v for k, v in (overrides or {}).items() if k in declared}}
        shared = profile_parameters(profile, "all") if profile else {}
        params = {k: v for k, v in params.items() if k in declared or k not in shared}
        unknown = sorted(set(params) - set(declared))
        if unknown:
            raise ValueError(f"{nb.name} has no parameters {unknown}; its parameters cell declares {sorted(declared)}")
        print(f"== {nb.name} {params}", flush=True)
        start = time.monotonic()
        try:
            papermill.execute_notebook(str(nb), str(run_dir / nb.name), parameters=params, cwd=str(NOTEBOOK_DIR),
                                       kernel_name=kernel, progress_bar=False)
        except Exception:
            rows.append({"notebook": nb.stem, "status": "FAILED", "seconds": time.monotonic() - start})
            write_report(run_dir, rows)
            raise
        rows.append({"notebook": nb.stem, "status": "ok", "seconds": time.monotonic() - start})
    report = write_report(run_dir, rows)
    print(f"executed notebooks and {report.name} in {run_dir}")
    return run_dir


def prepare_lab(profile: str, target: str | Path | None = None) -> Path:
    """Copies of the notebooks with a profile's values injected as papermill would inject them (a cell tagged
    `injected-parameters` after the `parameters` cell), not executed, for `./tutorial lab --profile NAME`. The
    repository's folders are given as absolute paths, since the copies live outside notebooks/."""
    import nbformat
    import papermill
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    target = Path(target or ROOT / "runs" / f"lab-{profile}").resolve()
    target.mkdir(parents=True, exist_ok=True)
    folders = {"models_dir": ROOT / "models", "build_dir": ROOT / "build", "run_dir": target / "run"}
    for nb in notebooks():
        declared = papermill.inspect_notebook(str(nb))
        params = {k: v for k, v in profile_parameters(profile, nb.stem).items() if k in declared}
        params.update({k: str(v) for k, v in folders.items() if k in declared})
        parameterized = parameterize_notebook(load_notebook_node(str(nb)), params)
        nbformat.write(parameterized, str(target / nb.name))
    print(f"notebooks with the {profile!r} profile's parameters in {target}")
    return target


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Run the tutorial notebooks with papermill.")
    parser.add_argument("--profile", default="auto",
                        help="parameter profile from notebooks/profiles.yml (ci, gpu-local, docker-ci), 'article' for "
                             "the notebooks' own parameters, or auto (default: chosen from this machine)")
    parser.add_argument("--run-dir", help="output folder (default runs/<timestamp>)")
    parser.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 00 05")
    parser.add_argument("--tag", help="the NGC release tag for every notebook and container (sets $TUTORIAL_NGC_TAG)")
    parser.add_argument("--prepare-lab", metavar="DIR",
                        help="write parameterized copies for JupyterLab into DIR instead of running (needs --profile)")
    ns = parser.parse_args()
    if ns.tag:
        from .ngc import SERIES_TAG_VARIABLE, check_tag

        os.environ[SERIES_TAG_VARIABLE] = check_tag(ns.tag)  # the kernels papermill starts inherit it
    if ns.prepare_lab:
        if ns.profile in ("auto", "article"):
            parser.error("--prepare-lab needs --profile NAME (a profile of notebooks/profiles.yml)")
        prepare_lab(ns.profile, ns.prepare_lab)
        raise SystemExit(0)
    chosen, why = (auto_profile() if ns.profile == "auto" else
                   (None if ns.profile == "article" else ns.profile, "asked for with --profile"))
    print(f"profile: {chosen or 'article'} ({why}); expected: {expected_duration(chosen)}", flush=True)
    run_series(ns.run_dir, chosen, ns.only)
