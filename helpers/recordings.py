"""The series' two recordings, docs/runs/cpu and docs/runs/gpu: what they ran, and what changed since."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "runs"
WORLDS = ("cpu", "gpu")
TRACKED = ("notebooks", "helpers", "scripts")  # the folders whose trees a recording names
RUN_FILE = "run.json"
LISTED_PATHS = 8  # a label names at most this many changed files, then how many more
HEADER_PATHS = 3  # a notebook's header line names fewer


def git_output(*args: str, root: Path = ROOT) -> str | None:
    """A git command's output in `root`, or None where git or the repository is absent or the command fails."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def tracked_files(root: Path = ROOT, folders: tuple[str, ...] = TRACKED) -> list[str]:
    """The files git would track under `folders` (committed or not ignored), that exist; without git, every file
    but __pycache__ and *.pyc."""
    listed = git_output("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *folders, root=root)
    if listed is not None:
        names = {name for name in listed.split("\0") if name}
        return sorted(name for name in names if (root / name).is_file())
    found = []
    for folder in folders:
        for path in (root / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.append(path.relative_to(root).as_posix())
    return sorted(found)


def blob_id(path: Path) -> str:
    """git's blob id of a file: sha1 of "blob <size>\\0" and its bytes."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _mode(path: Path) -> bytes:
    """git's file mode: 100755 when executable, else 100644."""
    return b"100755" if os.access(path, os.X_OK) else b"100644"


def _tree_id(entries: dict, root: Path, prefix: str) -> str:
    """git's tree id of one folder, given {name: None (a file) or {...} (a folder)}."""
    rows = []
    for name, sub in entries.items():
        rel = f"{prefix}{name}"
        if sub is None:
            rows.append((name.encode(), _mode(root / rel) + b" " + name.encode() + b"\0"
                         + bytes.fromhex(blob_id(root / rel))))
        else:
            rows.append(((name + "/").encode(), b"40000 " + name.encode() + b"\0"
                         + bytes.fromhex(_tree_id(sub, root, rel + "/"))))
    body = b"".join(row for _, row in sorted(rows))  # git sorts a folder's name as if it ended with "/"
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()


def tree_ids(root: Path = ROOT, folders: tuple[str, ...] = TRACKED) -> dict[str, str]:
    """git's tree id of each folder as the working tree holds it (equal to `git rev-parse HEAD:<folder>` on a clean
    checkout), computed from the files alone, so a copy with a stale .git still names its code truly."""
    files = tracked_files(root, folders)
    trees = {}
    for folder in folders:
        nested: dict = {}
        for name in files:
            if not name.startswith(folder + "/"):
                continue
            *parts, leaf = name[len(folder) + 1:].split("/")
            node = nested
            for part in parts:
                node = node.setdefault(part, {})
            node[leaf] = None
        trees[folder] = _tree_id(nested, root, folder + "/")
    return trees


def machine() -> dict:
    """This machine: CPU cores, and the GPU's name and driver where nvidia-smi answers."""
    found = {"cpu_cores": os.cpu_count(), "gpu": None, "driver": None}
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return found
    if done.returncode == 0 and done.stdout.strip():
        name, _, driver = done.stdout.strip().splitlines()[0].partition(",")
        found.update(gpu=name.strip(), driver=driver.strip())
    return found


def folder(world: str) -> Path:
    """The recording folder of a world: docs/runs/cpu or docs/runs/gpu."""
    if world not in WORLDS:
        raise ValueError(f"world must be one of {WORLDS}; got {world!r}")
    return RUNS / world


def load(world: str) -> dict:
    """A world's run.json ("cpu" or "gpu")."""
    path = folder(world) / RUN_FILE
    if not path.exists():
        raise FileNotFoundError(f"the {world} recording has no {RUN_FILE}: expected {path.relative_to(ROOT)}")
    return json.loads(path.read_text())


def commits(run: dict) -> list[str]:
    """The commits a recording's notebooks ran at, in the order they first appear (one for a clean recording)."""
    seen = [run["commit"]] if run.get("commit") else []
    for entry in run.get("notebooks", {}).values():
        if entry.get("commit") and entry["commit"] not in seen:
            seen.append(entry["commit"])
    return seen


@lru_cache(maxsize=None)
def _files_at(commit: str) -> dict[str, str] | None:
    """{path: blob id} of the tracked folders at a commit, or None where this checkout's git does not have it."""
    listed = git_output("ls-tree", "-r", "-z", commit, "--", *TRACKED)
    if listed is None:
        return None
    files = {}
    for row in filter(None, listed.split("\0")):
        meta, _, path = row.partition("\t")
        files[path] = meta.split()[2]
    return files


@lru_cache(maxsize=None)
def _files_now() -> dict[str, str]:
    """{path: blob id} of the tracked folders as the working tree holds them."""
    return {name: blob_id(ROOT / name) for name in tracked_files()}


def _differ(commit: str) -> list[str] | None:
    """The files under notebooks/, helpers/ and scripts/ that differ between a commit and the working tree."""
    then = _files_at(commit)
    if then is None:
        return None
    now = _files_now()
    return sorted(name for name in set(then) | set(now) if then.get(name) != now.get(name))


def current(world: str) -> bool:
    """Whether every notebook of a world's recording ran with the working tree's notebooks/, helpers/, scripts/."""
    run, now = load(world), tree_ids()
    trees = [entry.get("trees") or run.get("trees") for entry in run.get("notebooks", {}).values()]
    return bool(trees) and all(t == now for t in trees)


def changed_since(world: str) -> list[str]:
    """The files of notebooks/, helpers/ and scripts/ changed since the recording's commits (empty when current)."""
    if current(world):
        return []
    changed: set[str] = set()
    for commit in commits(load(world)):
        found = _differ(commit)
        if found is None:
            raise LookupError(f"the {world} recording's commit {commit} is not in this checkout's git history: "
                              f"expected `git ls-tree {commit}` to list it")
        changed.update(found)
    return sorted(changed)


def _at(run: dict) -> str:
    """'abc1234', or 'abc1234 (10-14), def5678 (15)' when the notebooks ran at several commits."""
    by_commit: dict[str, list[str]] = {}
    for stem, entry in run.get("notebooks", {}).items():
        by_commit.setdefault(entry.get("commit") or run.get("commit") or "unknown", []).append(stem[:2])
    if len(by_commit) <= 1:
        return (run.get("commit") or next(iter(by_commit), "unknown"))[:7]
    return ", ".join(f"{c[:7]} ({s[0] if len(s) == 1 else f'{s[0]}-{s[-1]}'})" for c, s in by_commit.items())


def label(world: str, limit: int = LISTED_PATHS) -> str:
    """'recorded at <commit>; changed since: <paths>' (at most `limit` named; with 0, their count), or 'recorded at
    <commit>' if current."""
    run = load(world)
    text = f"recorded at {_at(run)}"
    try:
        changed = changed_since(world)
    except LookupError:
        return text + "; changed since: unknown here (that commit is not in this checkout's git history)"
    if changed and limit <= 0:
        return text + f"; changed since: {len(changed)} file{'s' * (len(changed) > 1)}"
    if changed:
        shown = ", ".join(changed[:limit])
        more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
        text += f"; changed since: {shown}{more}"
    return text


def _where(run: dict, world: str) -> str:
    """'an NVIDIA H200' or 'the CPU, 2 cores'."""
    gpu = (run.get("machine") or {}).get("gpu")
    if world != "cpu" and gpu:
        return f"an {gpu}" if gpu[:1].upper() in "AEIOUN" else f"a {gpu}"
    return f"the CPU, {(run.get('machine') or {}).get('cpu_cores', '?')} cores"


def card(world: str) -> str:
    """The GPU a world's recording ran on ('NVIDIA H200'); 'the CPU' for the CPU world, 'an unnamed GPU' where a GPU
    world's run.json names none."""
    return (load(world).get("machine") or {}).get("gpu") or ("the CPU" if world == "cpu" else "an unnamed GPU")


def header(notebook_stem: str) -> str:
    """The line a notebook's header prints: its recorded time in each world that ran it, with where and at what."""
    parts = []
    for world in WORLDS:
        try:
            run = load(world)
        except FileNotFoundError:
            continue
        entry = run.get("notebooks", {}).get(notebook_stem)
        if not entry:
            continue
        status = "" if entry.get("status", "ok") == "ok" else f", {entry['status']}"
        parts.append(f"{entry['seconds']:.0f} s on {_where(run, world)}{status} ({run.get('profile') or 'article'} "
                     f"profile, docs/runs/{world}, {label(world, HEADER_PATHS)})")
    if not parts:
        return f"Recorded: {notebook_stem} is in no recording yet (docs/runs/cpu, docs/runs/gpu)."
    return "Recorded: " + "; ".join(parts) + "."


def started(executed: Path) -> str | None:
    """When papermill started an executed notebook (ISO time from its metadata), None when it names no start."""
    meta = json.loads(executed.read_text()).get("metadata", {}).get("papermill", {})
    return meta.get("start_time")


def out_of_order(run_dir: Path) -> list[str]:
    """The run folder's notebooks in the order they started, when that is not their number order; [] otherwise."""
    times = {p.stem: started(p) for p in sorted(run_dir.glob("[0-9][0-9]_*.ipynb"))}
    if None in times.values():
        return []
    ran = sorted(times, key=lambda stem: times[stem])
    return ran if ran != sorted(times) else []
