"""Keep a finished run of the series as one of the repository's two recordings, docs/runs/cpu or docs/runs/gpu.

    python scripts/record_run.py RUN_DIR WORLD [--root PATH] [--bin-dir DIR ...] [--replace OLD=NEW ...]

WORLD is `cpu` (every notebook, ci profile) or `gpu` (10-16, gpu-local profile, on whichever card the run had: its
run.json names it). The run folder's run.json (the series runner writes it) must show every notebook run with the
same notebooks/, helpers/ and scripts/ trees on the same machine (GPU and driver), and a commit of this repository
must have those trees: the recording names that commit. The folder docs/runs/WORLD is
replaced whole: the executed notebooks, report*.md, run.json, results/*.json and the run's NN_*.csv and NN_*.png,
with the machine's own paths written as a reader's (the run folder as runs/WORLD, the checkout as $PWD, binaries by
their names). --root is the checkout the run executed from, when it is not this one (a device machine's copy).
The recording it replaces, when it ran another commit, is kept first as docs/data/archive/WORLD-DATE-COMMIT7/: its
report*.md, NN_*.csv and results/*.json, with recorded.json (the date of its commit, the commit); benchmarks.md's
History lists it.

The CPU world in one command (from a clean checkout): scripts/record_cpu.sh
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from helpers import recordings, series  # noqa: E402

RUNS = ROOT / "docs" / "runs"
ARCHIVE = ROOT / "docs" / "data" / "archive"  # older recordings' data and reports, one folder each
ARCHIVED = ("report*.md", "[0-9][0-9]_*.csv", "results/*.json")  # what an archive folder keeps of a recording
PROFILES = {"cpu": "ci", "gpu": "gpu-local"}  # the profile each world is recorded with


class MixedRun(ValueError):
    """The run folder's notebooks ran with different trees, or with trees no commit has."""


def replacements(run_dir: Path, name: str, roots: list[Path], extra: list[tuple[str, str]],
                 bin_dirs: list[Path] = ()) -> list[tuple[str, str]]:
    """(old, new) pairs, longest first, so the run folder (often inside a root) is rewritten before its root, as the
    absolute path it would have in a reader's checkout (a `docker run -v` needs one); a binary in one of `bin_dirs`
    (where the machine that ran it kept tritonserver, perf_analyzer) by its name alone."""
    pairs = [(str(run_dir), f"$PWD/runs/{name}"), *((f"{d}/", "") for d in bin_dirs), *((f"{r}/", "$PWD/") for r in roots),
             *((str(r), "$PWD") for r in roots), *extra]
    return sorted(dict(pairs).items(), key=lambda p: -len(p[0]))


def rewrite(text: str, pairs: list[tuple[str, str]]) -> str:
    """`text` with every old string of `pairs` replaced by its new one."""
    for old, new in pairs:
        text = text.replace(old, new)
    return text


def one_trees(run: dict) -> dict[str, str]:
    """The trees every notebook of a run ran with; MixedRun names the notebooks and trees where they differ."""
    groups: dict[str, list[str]] = {}
    for stem, entry in run.get("notebooks", {}).items():
        groups.setdefault(json.dumps(entry.get("trees"), sort_keys=True), []).append(stem)
    if not groups:
        raise MixedRun("run.json lists no notebook: expected the series runner's entries under 'notebooks'")
    if len(groups) > 1:
        told = "; ".join(f"{', '.join(stems)} ran with {trees}" for trees, stems in groups.items())
        raise MixedRun(f"the run's notebooks ran with different code, expected one set of trees: {told}")
    return json.loads(next(iter(groups)))


def one_machine(run: dict) -> dict:
    """The machine every notebook of a run ran on (an entry without one ran on the run's); MixedRun names the notebooks
    and machines where they differ: a recording's numbers come from one card, driver and CPU core count."""
    groups: dict[str, list[str]] = {}
    entries = run.get("notebooks", {})
    for stem, entry in entries.items():
        groups.setdefault(json.dumps(entry.get("machine", run.get("machine")), sort_keys=True), []).append(stem)
    unnamed = [stem for stem, entry in entries.items() if "machine" not in entry]
    if unnamed and len({entry.get("call") for entry in entries.values()}) > 1:
        raise MixedRun(f"{', '.join(unnamed)} name no machine of their own (written before run.json kept each "
                       f"notebook's machine) and the folder holds several calls: cannot tell whether they ran on one "
                       f"machine; record them again in one call")
    if len(groups) > 1:
        told = "; ".join(f"{', '.join(stems)} ran on {found}" for found, stems in groups.items())
        raise MixedRun(f"the run's notebooks ran on different machines, expected one GPU, driver and CPU core count: {told}")
    found = json.loads(next(iter(groups))) if groups else None
    if not found:
        raise MixedRun("run.json names no machine: expected the series runner's `machine` (CPU cores, GPU, driver)")
    return found


def commit_of(trees: dict[str, str], root: Path = ROOT) -> str:
    """The newest commit (of `git log`) whose notebooks/, helpers/ and scripts/ trees are `trees`."""
    log = recordings.git_output("log", "--format=%H", root=root)
    if log is None:
        raise MixedRun(f"git log failed in {root}: a recording names its commit, so it needs the repository's history")
    for commit in log.split():
        listed = recordings.git_output("ls-tree", commit, "--", *trees, root=root) or ""
        found = {row.split("\t")[1]: row.split()[2] for row in listed.splitlines()}
        if found == trees:
            return commit
    raise MixedRun(f"no commit of `git log` has the trees the run ran with ({trees}): commit the code the run "
                   f"executed, then record")


def archive_target(world: str, new_commit: str) -> tuple[Path, dict] | None:
    """The archive folder and recorded.json of docs/runs/`world`, before a recording at `new_commit` replaces it; None
    when there is no recording or it ran the same commit."""
    run_file = RUNS / world / series.RUN_FILE
    if not run_file.exists():
        return None
    old = json.loads(run_file.read_text()).get("commit")
    if not old:
        raise ValueError(f"{run_file} names no commit: expected the commit the recording ran, to archive it under")
    if old == new_commit:
        return None
    date = (recordings.git_output("show", "-s", "--format=%cs", old) or "").strip()
    if not date:
        raise LookupError(f"git knows no commit {old} (named by {run_file}): expected it in the history, to date the "
                       f"archived recording")
    folder = ARCHIVE / f"{world}-{date}-{old[:7]}"
    if folder.exists():
        raise FileExistsError(f"{folder} exists: expected a new archive folder for the recording at {old[:7]}; move "
                              f"the one there aside first")
    note = f"docs/runs/{world} as recorded at {old[:7]}, replaced by the recording at {new_commit[:7]}"
    machine = json.loads(run_file.read_text()).get("machine")  # the card, so the History table can name it
    return folder, {"date": date, "commit": old, "note": note, **({"machine": machine} if machine else {})}


def archive(world: str, folder: Path, recorded: dict) -> list[Path]:
    """Copy docs/runs/`world`'s data and reports (ARCHIVED) to `folder`, with `recorded` as recorded.json; returns
    the files written."""
    source = RUNS / world
    folder.mkdir(parents=True)
    for path in sorted(p for pattern in ARCHIVED for p in source.glob(pattern)):
        (folder / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, folder / path.relative_to(source))
    (folder / "recorded.json").write_text(json.dumps(recorded, indent=2) + "\n")
    return sorted(p for p in folder.rglob("*") if p.is_file())


def record(run_dir: Path, world: str, *, roots: list[Path] | None = None, extra: list[tuple[str, str]] | None = None,
           bin_dirs: list[Path] | None = None) -> list[Path]:
    """Replace docs/runs/`world` with the run: its notebooks (rewritten), reports, results, tables, plots and
    run.json (with the commit), after archiving the recording it replaces; returns the files written."""
    run_dir = run_dir.resolve()
    if world not in PROFILES:
        raise ValueError(f"world must be one of {sorted(PROFILES)}; got {world!r}")
    target = RUNS / world
    run_file = run_dir / series.RUN_FILE
    if not run_file.exists():
        raise FileNotFoundError(f"{run_file} is missing: expected the series runner's run.json in the run folder "
                                f"(./tutorial series writes it as each notebook finishes)")
    run = json.loads(run_file.read_text())
    if run.get("profile") != PROFILES[world]:
        raise MixedRun(f"the {world} recording is made with the {PROFILES[world]!r} profile; the run used "
                       f"{run.get('profile')!r}")
    trees = one_trees(run)
    machine = one_machine(run)
    if world != "cpu" and not machine.get("gpu"):
        raise MixedRun(f"the {world} recording is made on a GPU; the run's machine names none ({machine}): did "
                       f"nvidia-smi answer on that machine?")
    commit = commit_of(trees)
    failed = [stem for stem, entry in run["notebooks"].items() if entry.get("status") != "ok"]
    if failed:
        raise MixedRun(f"notebooks {failed} did not finish ok in {run_dir}: expected every notebook ok")
    executed = sorted(run_dir.glob("*.ipynb"))
    if {p.stem for p in executed} != set(run["notebooks"]):
        raise MixedRun(f"run.json lists {sorted(run['notebooks'])}, the folder holds {[p.stem for p in executed]}")
    if ran := recordings.out_of_order(run_dir):  # a later notebook reads the results of those before it (15: 13, 14)
        raise MixedRun(f"the notebooks ran in the order {[stem[:2] for stem in ran]}, expected their number order: "
                       f"a notebook that ran before one it reads from measured its fallback; run them again in order")
    archived = archive_target(world, commit)
    pairs = replacements(run_dir, world, [ROOT, *(roots or [])], extra or [], bin_dirs or [])
    json_pairs = [(json.dumps(o)[1:-1], json.dumps(n)[1:-1]) for o, n in pairs]
    staging = Path(tempfile.mkdtemp(prefix=f"record-{world}-", dir=target.parent))
    try:
        for path in executed:
            (staging / path.name).write_text(rewrite(path.read_text(), json_pairs))
        for report in sorted(run_dir.glob("report*.md")):
            (staging / report.name).write_text(rewrite(report.read_text(), pairs))
        for results in sorted((run_dir / "results").glob("*.json")):
            (staging / "results").mkdir(exist_ok=True)
            (staging / "results" / results.name).write_text(rewrite(results.read_text(), json_pairs))
        for table in sorted([*run_dir.glob("[0-9][0-9]_*.csv"), *run_dir.glob("[0-9][0-9]_*.png")]):
            if table.suffix == ".csv":
                (staging / table.name).write_text(rewrite(table.read_text(), pairs))
            else:
                shutil.copyfile(table, staging / table.name)
        for entry in run["notebooks"].values():
            entry["commit"] = commit
        run.update(world=world, commit=commit, trees=trees, machine=machine)
        (staging / series.RUN_FILE).write_text(json.dumps({k: run[k] for k in series.RUN_KEYS if k in run},
                                                          indent=2) + "\n")
        if archived:
            archive(world, *archived)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    refresh_headers()
    return sorted(p for p in target.rglob("*") if p.is_file())


def refresh_headers() -> list[Path]:
    """Print the header cells (tagged `header`) of every recorded notebook again, from the recordings as they are now:
    a notebook's header ran before its own run.json existed, so it printed the recording it replaced."""
    changed = []
    for path in sorted(RUNS.glob("*/*.ipynb")):
        notebook = json.loads(path.read_text())
        headers = [c for c in notebook["cells"] if "header" in c.get("metadata", {}).get("tags", [])]
        for cell in headers:
            cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": [recordings.header(path.stem) + "\n"]}]
        if headers:
            path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("world", choices=recordings.WORLDS, help="the recording to replace: docs/runs/WORLD")
    parser.add_argument("--root", action="append", type=Path, default=[], help="the checkout the run executed from")
    parser.add_argument("--bin-dir", action="append", type=Path, default=[],
                        help="a folder of the machine's binaries (tritonserver, perf_analyzer): named alone")
    parser.add_argument("--replace", action="append", default=[], help="OLD=NEW, one more rewrite")
    ns = parser.parse_args(argv)
    extra = []
    for item in ns.replace:
        if "=" not in item:
            parser.error(f"--replace takes OLD=NEW; got {item!r}")
        extra.append(tuple(item.split("=", 1)))
    try:
        written = record(ns.run_dir, ns.world, roots=ns.root, extra=extra, bin_dirs=ns.bin_dir)
    except MixedRun as refused:
        raise SystemExit(f"record_run: refused: {refused}") from None
    print(f"{len(written)} files in {(RUNS / ns.world).relative_to(ROOT)}; now: python scripts/benchmark_numbers.py "
          f"--write" + ("; then scripts/record_cpu.sh (the CPU recording's notebook 20 reads docs/runs/gpu)"
                        if ns.world == "gpu" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
