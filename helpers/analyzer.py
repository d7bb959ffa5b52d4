"""Triton Model Analyzer: its YAML rendered from one dict, its run with nothing left behind, its CSVs as tables."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import yaml

from . import ngc

# pandas, perf and launchers are imported where they are used: the reaper's cleanup (a fresh Python that imports
# this module when Model Analyzer ends) then starts in a fraction of a second
if TYPE_CHECKING:
    import pandas as pd

    from .perf import PerfAnalyzer
    from .runtime import LocalTriton

VERSION = "1.58.0"  # triton-model-analyzer on PyPI, pinned in requirements.txt (installed with --no-deps: see there)
ROOT = Path(__file__).resolve().parent.parent


def render_yaml(config: Mapping) -> str:
    """The Model Analyzer config file, as text, in the order the dict was written."""
    return yaml.safe_dump(dict(config), sort_keys=False, default_flow_style=False, width=120)


def local_launch(local: LocalTriton, perf_analyzer: PerfAnalyzer, host: str = "localhost") -> dict:
    """The launch part of the config for `triton_launch_mode: local`: this machine's tritonserver and perf_analyzer,
    the server's backend directory and library path, and three free ports (Model Analyzer's 8000-8002 may be taken).
    Model Analyzer gives `triton_server_environment` to perf_analyzer too (record/metrics_manager.py), so its
    LD_LIBRARY_PATH lists the libraries of both. With a GPU, this mode needs DCGM (dcgm_found); see remote_launch."""
    from .launchers import free_port

    libs = [d for env in (local.env, perf_analyzer.env) for d in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    http = free_port()
    grpc_ = free_port(avoid=[http])
    metrics = free_port(avoid=[http, grpc_])
    return {
        "triton_launch_mode": "local",
        "triton_server_path": str(local.binary),
        "triton_server_flags": {"backend-directory": str(local.backend_dir)},
        "triton_server_environment": {**local.env, "LD_LIBRARY_PATH": os.pathsep.join(dict.fromkeys(libs))},
        "triton_http_endpoint": f"{host}:{http}",
        "triton_grpc_endpoint": f"{host}:{grpc_}",
        "triton_metrics_url": f"http://{host}:{metrics}/metrics",
        "perf_analyzer_path": str(perf_analyzer.binary),
    }


def dcgm_found() -> bool:
    """Whether NVIDIA DCGM's library is installed: Model Analyzer reads GPU facts from it when it starts the server
    itself on a GPU (local and docker launch modes, which refuse `dcgm_disable`); the pip package does not bring it."""
    import ctypes.util

    return bool(ctypes.util.find_library("dcgm")) or any(
        Path(p).exists() for p in ("/usr/lib/x86_64-linux-gnu/libdcgm.so.4", "/usr/lib64/libdcgm.so.4"))


class _ExplicitControl:
    """A launcher of the series (helpers.launchers) whose server takes Triton's explicit model control with the
    models named (`--load-model=NAME` each, where the local launcher writes `--load-model=*` for its mirror): Model
    Analyzer in remote mode loads each variant through the repository API, which poll mode refuses."""

    def __init__(self, launcher):
        self._inner = launcher
        self.name = launcher.name

    def __getattr__(self, attr):
        return getattr(self._inner, attr)

    def command(self, server) -> list[str]:
        flags = ("--model-control-mode", "--repository-poll-secs", "--load-model")
        return [*(a for a in self._inner.command(server) if not str(a).startswith(flags)),
                "--model-control-mode=explicit", *(f"--load-model={m}" for m in server.model_names())]


def explicit_server(repository: str | Path, runtime, models: Sequence[str], **kwargs):
    """The series' TritonServer (helpers.server: its ports, its reaper, its stop) over `repository`, loading `models`
    with explicit model control, for `triton_launch_mode: remote`."""
    from .server import TritonServer

    server = TritonServer(repository, runtime, models=models, poll_secs=None, **kwargs)
    server.launcher = _ExplicitControl(server.launcher)
    return server


def remote_launch(server, perf_analyzer: PerfAnalyzer | None, dcgm_disable: bool | None = None) -> dict:
    """The launch part of the config for `triton_launch_mode: remote`: a server already running (the series' own,
    explicit_server), its three endpoints, and perf_analyzer (this machine's, or None: the SDK image's, on its PATH);
    `dcgm_disable` (allowed in this mode only; None: where DCGM is missing here): GPU facts then come from CUDA and
    Triton's metrics endpoint."""
    return {
        "triton_launch_mode": "remote",
        "triton_http_endpoint": server.url,
        "triton_grpc_endpoint": server.grpc_url,
        "triton_metrics_url": f"http://{server.metrics_url}/metrics",
        "perf_analyzer_path": str(perf_analyzer.binary) if perf_analyzer else "perf_analyzer",
        "dcgm_disable": not dcgm_found() if dcgm_disable is None else dcgm_disable,
    }


# Model Analyzer's launch modes: https://github.com/triton-inference-server/model_analyzer/blob/main/docs/launch_modes.md
LAUNCH_MODES_DOC = "https://github.com/triton-inference-server/model_analyzer/blob/main/docs/launch_modes.md#remote"


def docker_command(tag: str, model_repository: str | Path, results_dir: str | Path) -> list[str]:
    """`docker run` of the SDK image running `model-analyzer profile` on results_dir/config.yml in remote launch mode
    (LAUNCH_MODES_DOC), against the series' own server container: the host's network (the server's endpoints are on
    127.0.0.1) and IPC namespace (perf_analyzer's system shared memory), the series' GPU (ngc.series_gpu, the one the
    server has: the remote mode's "same GPUs" rule), Docker's init as PID 1 (a SIGINT reaches Model Analyzer, which
    then finishes its measurement and exits), run as the calling user (what it writes is the user's), the model
    repository read-only and the results folder at the same paths as on the host. No Docker socket: in remote mode
    Model Analyzer starts no container."""
    repo, results = Path(model_repository).resolve(), Path(results_dir).resolve()
    return ngc.docker_run(ngc.image("sdk", tag), ["model-analyzer", "profile", "-f", f"{results}/config.yml"],
                          volumes={repo: f"{repo}:ro", results: str(results)}, network="host", as_user=True,
                          init=True, extra=["--ipc=host"])


# Model Analyzer learned dcgm_disable in PR #952 (2024-12-20), first in the SDK image of 25.01 (model_analyzer branch
# r25.01); an older one refuses the key ("dcgm_disable is not a valid yaml argument": YamlConfigValidator, r24.05)
# and identifies the GPUs with the DCGM its SDK image installs (server Dockerfile.sdk at v2.46.0: DCGM_VERSION 3.2.6);
# its GPU metrics come from Triton's metrics endpoint either way (record/metrics_manager.py: RemoteMonitor).
FIRST_TAG_WITH_DCGM_DISABLE = "25.01"


def config_for_tag(config: Mapping, tag: str) -> dict:
    """`config` as the Model Analyzer in NGC `tag`'s SDK image reads it: before FIRST_TAG_WITH_DCGM_DISABLE without
    `dcgm_disable` (said when it was set)."""
    config, tag = dict(config), ngc.series_tag(tag)
    if tag < FIRST_TAG_WITH_DCGM_DISABLE and "dcgm_disable" in config:
        if config.pop("dcgm_disable"):
            print(f"note: the Model Analyzer of NGC {tag} has no dcgm_disable (it came with "
                  f"{FIRST_TAG_WITH_DCGM_DISABLE}); it identifies the GPUs with its SDK image's DCGM")
    return config


RUN_PREFIX = "run-"  # one folder per search under the parent: fresh_workdir


def on_gpu(config: Mapping) -> dict:
    """`config` with every profiled model's instances on the GPU (`cpu_only: false`, `KIND_GPU`), as the docker world
    writes it: its server always runs the models on the GPU."""
    models = {}
    for name, spec in config.get("profile_models", {}).items():
        spec = {**spec, "cpu_only": False}
        params = spec.get("model_config_parameters", {})
        if "instance_group" in params:
            groups = [[{**group, "kind": "KIND_GPU"} for group in value] for value in params["instance_group"]]
            spec["model_config_parameters"] = {**params, "instance_group": groups}
        models[name] = spec
    return {**config, "profile_models": models}


def remove_tree(path: str | Path) -> None:
    """Delete the folder `path` and everything in it; a file or folder that cannot be deleted raises PermissionError
    (or the OSError met) naming it, its owner and why, with the remedy (no silent leftovers: a Model Analyzer that
    finds its old checkpoint reuses the old measurements)."""
    path = Path(path)
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        where = Path(exc.filename or path)
        try:
            owner = where.stat().st_uid
        except OSError:
            owner = None
        whose = f"owned by uid {owner}, this user is uid {os.getuid()}" if owner is not None else "owner unknown"
        raise type(exc)(exc.errno, f"cannot delete {where} ({exc.strerror}; {whose}) while removing {path}: a "
                                   f"container that ran as root (without --user) may have written it; remove it "
                                   f"with `sudo rm -rf {path}` and run again", str(where)) from exc
    if path.exists():
        raise OSError(f"{path} still exists after it was deleted (something writes into it): expected it gone")


def fresh_workdir(parent: str | Path) -> Path:
    """A new, empty folder for one Model Analyzer search under `parent` (run-<time>-<random>: never an earlier run's,
    so no earlier checkpoint is found); the earlier runs' folders there are deleted first (remove_tree: loudly)."""
    import secrets

    parent = Path(parent).resolve()
    parent.mkdir(parents=True, exist_ok=True)
    for old in sorted(parent.iterdir()):
        if old.is_dir() and not old.is_symlink():
            remove_tree(old)
        else:
            old.unlink()
    work = parent / f"{RUN_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    work.mkdir()
    return work


def executable() -> Path:
    """The model-analyzer script of this Python environment (the pinned one), or the one on PATH."""
    here = Path(sys.executable).parent / "model-analyzer"
    found = here if here.exists() else shutil.which("model-analyzer")
    if not found:
        raise FileNotFoundError(f"model-analyzer not found beside {sys.executable} nor on PATH: `./tutorial setup` "
                                f"installs triton-model-analyzer=={VERSION}")
    return Path(found)


def command(config_file: str | Path) -> list[str]:
    """The command that runs one profile: `model-analyzer profile -f CONFIG` (every setting is in the file)."""
    return [str(executable()), "profile", "-f", str(config_file)]


def markers(config: Mapping) -> list[str]:
    """Strings that only the processes of this config's run carry on their command lines: its three ports."""
    ports = [str(config[k]).rstrip("/").removesuffix("/metrics").rsplit(":", 1)[-1]
             for k in ("triton_http_endpoint", "triton_grpc_endpoint", "triton_metrics_url") if k in config]
    return [p for p in ports if p.isdigit()]


def leftovers(ports: Sequence[str], names: Sequence[str] = ("tritonserver", "perf_analyzer")) -> list[psutil.Process]:
    """This user's processes whose program is one of `names` and whose command line names one of `ports`."""
    found, me = [], os.getuid()
    for proc in psutil.process_iter(["cmdline", "uids"]):
        try:
            cmd = proc.info["cmdline"] or []
            if not cmd or proc.info["uids"].real != me or Path(cmd[0]).name not in names:
                continue
            if any(p in arg for arg in cmd[1:] for p in ports):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, TypeError):
            continue
    return found


def cleanup(ports: Sequence[str], timeout: float = 10.0, report: str | Path | None = None,
            names: Sequence[str] = ("tritonserver", "perf_analyzer")) -> list[str]:
    """Stop what a run left behind (a tritonserver or perf_analyzer naming our ports: Model Analyzer starts both in
    sessions of their own, so a killed Model Analyzer leaves them); SIGTERM, then SIGKILL. Returns what was stopped,
    also appended to `report` (one line each) when given."""
    procs = leftovers(ports, names)
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=5)
    stopped = [f"{Path((p.info.get('cmdline') or ['?'])[0]).name} (pid {p.pid})" for p in procs]
    if report and stopped:
        with open(report, "a") as handle:
            handle.write("".join(f"{line}\n" for line in stopped))
    return stopped


def _cleanup_command(ports: Sequence[str], report: Path, names: Sequence[str]) -> list[str]:
    """The reaper's --on-exit once Model Analyzer ends, however it ends (a dead kernel cannot clean up): cleanup(ports)
    in a fresh Python, what it stopped written to `report`."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from helpers.analyzer import cleanup; "
            f"cleanup({list(ports)!r}, report={str(report)!r}, names={list(names)!r})")
    return [sys.executable, "-c", code]


@dataclass
class AnalyzerRun:
    """One `model-analyzer profile`: exit status, how long it took, its output, and the guard's findings."""

    returncode: int
    seconds: float
    output: str
    config_file: Path
    export_path: Path
    perf_peak_mb: float = 0.0
    stopped: str = ""
    cleaned: list[str] = field(default_factory=list)

    def tail(self, lines: int = 25) -> str:
        """The last lines of Model Analyzer's output."""
        return "\n".join(self.output.splitlines()[-lines:])


def _perf_rss_mb(root: psutil.Process) -> tuple[float, list[psutil.Process]]:
    """Resident MB of the perf_analyzer processes under `root` (Model Analyzer's children), and those processes."""
    try:
        procs = [p for p in root.children(recursive=True) if p.name() == "perf_analyzer"]
    except psutil.NoSuchProcess:
        return 0.0, []
    return sum(_rss(p) for p in procs) / 2**20, procs


def _rss(proc: psutil.Process) -> int:
    """Resident bytes of one process (0 once it is gone)."""
    try:
        return proc.memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def _guard(proc: subprocess.Popen, root: psutil.Process | None, ports: Sequence[str], limit_mb: float,
           timeout_s: float, interval: float) -> tuple[float, str]:
    """Wait for `proc` while sampling the resident memory of Model Analyzer's perf_analyzers (under `root`, or, in a
    container, this user's perf_analyzers naming `ports`): one past `limit_mb` is killed; past `timeout_s` the wait
    ends. Returns the peak MB and what was stopped and why ("" for nothing; "timeout: ..." when the time ran out)."""
    from . import perf

    peak, stopped, started = 0.0, "", time.monotonic()
    while proc.poll() is None:
        if root is not None:
            mb, procs = _perf_rss_mb(root)
        else:
            procs = leftovers(ports, ("perf_analyzer",))
            mb = sum(_rss(p) for p in procs) / 2**20
        peak = max(peak, mb)
        if mb > limit_mb and not stopped:
            stopped = (f"perf_analyzer passed the memory limit of {limit_mb / 1024:g} GB ({mb:.0f} MB) after "
                       f"{time.monotonic() - started:.0f} s and was stopped ({perf.MEMORY_ISSUE})")
            for victim in procs:
                try:
                    victim.kill()
                except psutil.NoSuchProcess:
                    continue
        if time.monotonic() - started > timeout_s:
            return peak, f"timeout: Model Analyzer ran past {timeout_s:.0f} s and was stopped"
        time.sleep(interval)
    return peak, stopped


def run(config: Mapping, workdir: str | Path, *, timeout_s: float = 600.0, memory_limit_gb: float | None = None,
        env: Mapping[str, str] | None = None, interval: float = 0.2) -> AnalyzerRun:
    """Write `config` as YAML (render_yaml: the text the page prints) to workdir/config.yml and run
    `model-analyzer profile -f` on it (with `env` added to this environment: perf_analyzer's libraries in remote
    mode), alone among this machine's load generators (perf.one_load_generator), with
    perf_analyzer's resident memory sampled every `interval` s and killed past `memory_limit_gb`, the whole run stopped
    after `timeout_s`, and any server or perf_analyzer it left behind stopped afterwards."""
    from . import perf
    from .launchers import guarded

    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / "config.yml"
    config_file.write_text(render_yaml(config))
    ports = markers(config)
    # in remote mode the server is the caller's (explicit_server): only the perf_analyzers are Model Analyzer's
    names = ("perf_analyzer",) if config.get("triton_launch_mode") == "remote" else ("tritonserver", "perf_analyzer")
    limit_mb = (memory_limit_gb or perf.default_memory_limit_gb()) * 1024
    out_file, cleaned_file = workdir / "model_analyzer.log", workdir / "cleaned.txt"
    cleaned_file.unlink(missing_ok=True)
    full_env = {**os.environ, **(env or {})}
    peak, stopped = 0.0, ""
    with perf.one_load_generator(), open(out_file, "w") as out:
        started = time.monotonic()
        proc = subprocess.Popen(guarded(command(config_file), _cleanup_command(ports, cleaned_file, names) if ports else []),
                                stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=full_env,
                                start_new_session=True)
        try:
            peak, stopped = _guard(proc, psutil.Process(proc.pid), ports, limit_mb, timeout_s, interval)
        finally:
            if proc.poll() is None:
                proc.terminate()  # the reaper stops its group and runs the cleanup
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        seconds = time.monotonic() - started
    cleanup(ports, report=cleaned_file, names=names)  # the reaper ran it already; whatever came after, too
    cleaned = cleaned_file.read_text().splitlines() if cleaned_file.exists() else []
    export = Path(config.get("export_path", workdir))
    export = export if export.is_absolute() else workdir / export
    return AnalyzerRun(proc.returncode, round(seconds, 1), out_file.read_text(errors="replace"), config_file, export,
                       round(peak, 1), stopped, cleaned)


def run_docker(config: Mapping, tag: str, model_repository: str | Path, results_dir: str | Path, *,
               timeout_s: float = 600.0, memory_limit_gb: float | None = None, interval: float = 0.2,
               grace: float = 60.0) -> AnalyzerRun:
    """Write `config` (remote launch mode: the series' server runs already) to results_dir/config.yml and run
    docker_command on it, alone among this machine's load generators, as a named container under the reaper
    (ngc.start_container: a dead kernel's container is removed), its perf_analyzers' memory capped as in `run`.
    However it ends (its own end, `timeout_s`, Ctrl-C, an error) the container gets SIGINT first (Model Analyzer
    finishes the measurement under way and exits), SIGKILL after `grace` s, then `docker rm -f` (ngc.stop_container)."""
    from . import perf

    if config.get("triton_launch_mode") != "remote":
        raise ValueError(f"the docker world runs Model Analyzer in remote launch mode against the series' server; "
                         f"got triton_launch_mode={config.get('triton_launch_mode')!r}")
    results_dir = Path(results_dir).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    config_file = results_dir / "config.yml"
    config = config_for_tag(config, tag)
    config_file.write_text(render_yaml(config))
    ngc.ensure_image(ngc.image("sdk", tag))
    ports = markers(config)
    limit_mb = (memory_limit_gb or perf.default_memory_limit_gb()) * 1024
    out_file, peak, stopped = results_dir / "model_analyzer.log", 0.0, ""
    with perf.one_load_generator(), open(out_file, "w") as out:
        started = time.monotonic()
        proc, name = ngc.start_container(docker_command(tag, model_repository, results_dir), stdout=out,
                                         stderr=subprocess.STDOUT)
        try:
            peak, stopped = _guard(proc, None, ports, limit_mb, timeout_s, interval)
        finally:
            ngc.stop_container(proc, name, grace)
        seconds = time.monotonic() - started
    cleaned = cleanup(ports, names=("perf_analyzer",))  # run as this user: its perf_analyzers are ours to see
    return AnalyzerRun(proc.returncode, round(seconds, 1), out_file.read_text(errors="replace"), config_file,
                       Path(config["export_path"]), round(peak, 1), stopped, cleaned)


# metrics-model-inference.csv's columns (Model Analyzer's default inference_output_fields), renamed for the page
_COLUMNS = {"Model": "model", "Batch": "batch", "Concurrency": "concurrency", "Model Config Path": "config_name",
            "Instance Group": "instance_group", "Max Batch Size": "max_batch_size",
            "Satisfies Constraints": "satisfies_constraints", "Throughput (infer/sec)": "throughput",
            "p99 Latency (ms)": "p99_ms", "Request Rate": "request_rate"}


def parse_inference_csv(path: str | Path) -> pd.DataFrame:
    """Model Analyzer's results/metrics-model-inference.csv as a table: one row per variant and concurrency, in
    Model Analyzer's order (best by the objective first, those meeting the constraints before the others)."""
    import pandas as pd

    raw = pd.read_csv(path, skipinitialspace=True)
    raw.columns = [c.strip() for c in raw.columns]
    missing = [c for c in ("Model", "Model Config Path", "Concurrency", "Throughput (infer/sec)", "p99 Latency (ms)")
               if c not in raw.columns]
    if missing:
        raise ValueError(f"{path} is not Model Analyzer's metrics-model-inference.csv: columns {missing} missing; "
                         f"found {list(raw.columns)}")
    table = raw.rename(columns=_COLUMNS)
    if "satisfies_constraints" in table:
        table["satisfies_constraints"] = table["satisfies_constraints"].astype(str).str.strip().str.lower() == "yes"
    return table.reset_index(drop=True)


def results(export_path: str | Path) -> pd.DataFrame:
    """The inference results of one profile (export_path/results/metrics-model-inference.csv)."""
    path = Path(export_path) / "results" / "metrics-model-inference.csv"
    if not path.exists():
        raise FileNotFoundError(f"expected Model Analyzer's results at {path}; the run wrote "
                                f"{sorted(str(p.relative_to(export_path)) for p in Path(export_path).rglob('*'))[:20]}")
    return parse_inference_csv(path)


def pick(table: pd.DataFrame) -> pd.Series:
    """Model Analyzer's choice: the first row that meets the constraints (the table is in its order, best by the
    objective first), else the first row when none does."""
    ok = table[table["satisfies_constraints"]] if "satisfies_constraints" in table else table
    return (ok if not ok.empty else table).iloc[0]


def variant_config(output_repository: str | Path, config_name: str, name: str | None = None) -> str:
    """The config.pbtxt Model Analyzer wrote for one variant (output_model_repository_path/VARIANT/config.pbtxt); its
    `name:` is the original model's, so `name` renames it for a repository where the folder is that name."""
    path = Path(output_repository) / config_name / "config.pbtxt"
    if not path.exists():
        raise FileNotFoundError(f"expected the variant's config at {path}; found "
                                f"{sorted(p.name for p in Path(output_repository).iterdir())}")
    text = path.read_text()
    if name is None:
        return text
    renamed, count = re.subn(r'^name: "[^"]*"', f'name: "{name}"', text, count=1, flags=re.M)
    if not count:
        raise ValueError(f"{path} has no top-level `name: \"...\"` line to rename; it starts:\n{text[:200]}")
    return renamed
