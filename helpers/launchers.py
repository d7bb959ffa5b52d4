"""The two ways the series starts Triton, behind one interface: the NGC container (docker) and a local binary."""
from __future__ import annotations

import importlib.metadata
import json
import random
import re
import socket
import warnings
import zipfile
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Protocol

from . import ngc
from .convert import tensorrt_version_of
from .repository import ConfigError, read_config
from .runtime import RuntimeChoice
from .pyenv import environment_problem
from .standin import Served, prepare_served_repository


def outgoing_ports() -> range:
    """The ports the kernel hands to outgoing connections (Linux's ip_local_port_range; its default elsewhere)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """A TCP port nobody listens on right now, other than those in `avoid`, below the range of outgoing connections'
    ports where there is room: a port from that range can be taken by any client's connection before the server
    binds it (2026-12-02, CI: a port picked this way was taken before Triton bound it)."""
    outgoing = outgoing_ports()
    if outgoing.start > 11000:
        for port in random.sample(range(10000, outgoing.start), 200):
            if port not in avoid:
                with socket.socket() as s:
                    try:
                        s.bind((host, port))
                    except OSError:  # in use: try another
                        continue
                    return port
    held: list[socket.socket] = []
    try:  # the ports in `avoid` are free too, so the kernel may hand one out again: hold it and ask once more
        while True:
            s = socket.socket()
            held.append(s)
            s.bind((host, 0))
            port = s.getsockname()[1]
            if port not in avoid:
                return port
    finally:
        for s in held:
            s.close()


def control_flags(models: Sequence[str] | None, poll_secs: int | None) -> list[str]:
    """Model-control flags: explicit loading of `models` (only what a notebook uses), or of every model (`*`) when
    none are named; poll mode only when `poll_secs` asks for it and no models are named. In explicit mode a stop
    can unload the models first (TritonServer.stop), which poll mode refuses."""
    if models is not None:
        return ["--model-control-mode=explicit", *[f"--load-model={m}" for m in models]]
    if poll_secs:
        return ["--model-control-mode=poll", f"--repository-poll-secs={poll_secs}"]
    return ["--model-control-mode=explicit", "--load-model=*"]


class Launcher(Protocol):
    """What TritonServer needs from a runtime: ports, the command, the served list, and what to do around a run."""

    name: str

    def pick_port(self, requested: int | None, default: int, host: str, avoid: Collection[int] = ()) -> int: ...

    def command(self, server) -> list[str]: ...

    def prepare(self, server) -> tuple[list[Served], dict[str, str]]: ...

    def before_start(self, server) -> None: ...

    def cleanup_command(self, server) -> list[str]: ...


class DockerLauncher:
    """`docker run` of the NGC tritonserver image, the repository mounted read-only at /models, on the host's network
    with every endpoint bound to 127.0.0.1 (no docker-proxy between a client on this host and the server)."""

    name = "docker"

    def pick_port(self, requested: int | None, default: int, host: str, avoid: Collection[int] = ()) -> int:
        from .server import port_busy

        if requested:
            return requested
        return default if default not in avoid and not port_busy(default, host) else free_port(host, avoid)

    def command(self, server) -> list[str]:
        flags = control_flags(server.models, server.poll_secs)
        return ngc.docker_run(
            ngc.image("tritonserver", server.tag),
            # --exit-on-error=false: a model that fails to load is reported, and the others are still served
            ["tritonserver", "--model-repository=/models",
             f"--http-address={server.host}", f"--http-port={server.http_port}",
             f"--grpc-address={server.host}", f"--grpc-port={server.grpc_port}",
             f"--metrics-address={server.host}", f"--metrics-port={server.metrics_port}",
             "--exit-on-error=false", "--exit-timeout-secs=10", *flags],
            volumes={server.repository: "/models:ro"}, network="host", gpus=server.gpus, name=server.container_name,
            init=True,  # Docker's init as PID 1: it passes signals on and reaps the backend stubs
            extra=["--ipc=host"])  # shares /dev/shm with clients on this host (system shared memory)

    def prepare(self, server) -> tuple[list[Served], dict[str, str]]:
        return [Served(name, "native", "NGC container") for name in server.model_names()], {}

    def before_start(self, server) -> None:
        stale = stale_engines(server.repository, server.model_names(), server.tag)
        if stale:  # before the pull: a 15 GB download is no way to learn that an engine cannot load
            raise RuntimeError("; ".join(stale))
        torchscript_check(server.repository, server.model_names(), server.tag)
        found = series_containers()
        name = server.container_name
        if found.get(name) == "running":
            raise RuntimeError(f"container {name} is running: a server of another notebook, kernel or user on this "
                               f"machine has port {server.http_port}; stop that server, or remove it with "
                               f"`docker rm -f {name}` if it is yours")
        if name in found:
            raise RuntimeError(f"a container named {name} already exists ({found[name]}: left by an interrupted run?): "
                               f"remove it with `docker rm -f {name}`")
        for other, state in found.items():  # another port: not in our way, but it may hold a GPU and memory
            if state == "running":
                print(f"note: container {other} is running (another notebook, kernel or user on this machine): it "
                      "shares the GPU with this server")
            else:
                print(f"note: container {other} from an earlier run still exists ({state}); `docker rm -f {other}` "
                      "removes it")
        ngc.ensure_image(ngc.image("tritonserver", server.tag))  # before the readiness clock starts

    def cleanup_command(self, server) -> list[str]:
        return ["docker", "rm", "-f", server.container_name]


CONTAINER_PREFIX = ngc.CONTAINER_PREFIX


def series_containers() -> dict[str, str]:
    """The series' containers on this engine that may be this user's, name -> state (containers): this user's
    one-shot containers (ngc.user_prefix) and the servers (CONTAINER_PREFIX and a port: with the host's network a
    port, so a running server's name, is the machine's, whoever started it); another user's one-shot containers are
    not this user's business."""
    server = re.compile(re.escape(CONTAINER_PREFIX) + r"\d+")
    return {name: state for name, state in containers().items()
            if name.startswith(ngc.user_prefix()) or server.fullmatch(name)}


def _release(version: str) -> tuple[int, ...]:
    """major.minor.patch.build of a TensorRT version ("10.0.1.6" -> (10, 0, 1, 6)), as far as it is given."""
    return tuple(int(p) for p in str(version).split(".")[:4] if p.isdigit())


def same_tensorrt(built: str, expected: str) -> bool:
    """Whether an engine built by TensorRT `built` loads in TensorRT `expected`: "major, minor, patch, and build
    versions" must all match (TensorRT's support policies); a build number only one side records is not compared."""
    one, other = _release(built), _release(expected)
    shared = max(3, min(len(one), len(other)))
    return one[:shared] == other[:shared]


def stale_engines(repository: str | Path, models: Sequence[str], tag: str) -> list[str]:
    """Why TensorRT engines among `models` cannot load in NGC `tag`'s server, one line per engine: the TensorRT that
    built each one (its engine.json, which convert.INSPECT_ENGINE_SCRIPT wrote and repository.add_model copied beside
    model.plan) against the TensorRT of `tag` (ngc.tensorrt_version; for a tag it does not record, read from the tag's
    TensorRT image when that is on this machine, never pulled for this); an engine loads only in the version that
    built it. What cannot be checked (no engine.json, a version known nowhere) is printed, not refused."""
    expected, known = ngc.tensorrt_version(tag), ""
    problems = []
    for name in models:
        folder = Path(repository) / name
        try:
            config = read_config(folder)
        except ConfigError:
            continue  # the preflight check names it; nothing to say about an engine here
        if config.platform != "tensorrt_plan" and config.backend != "tensorrt":
            continue
        versions = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
        described = versions[-1] / "engine.json" if versions else folder / "engine.json"
        try:
            built = json.loads(described.read_text()).get("tensorrt") if described.exists() else None
        except (json.JSONDecodeError, AttributeError) as exc:
            problems.append(f"model '{name}': {described} should be the engine's description as JSON "
                            f"(convert.INSPECT_ENGINE_SCRIPT writes it); it cannot be read: {exc}")
            continue
        if built and expected is None and not known:  # once, and only when an engine needs it
            expected, known = tensorrt_version_of(tag, read_image=True, pull=False)
        if not built:
            print(f"note: model '{name}': no engine.json with its TensorRT version beside the engine "
                  f"({described}), so whether NGC {tag} can load it is not checked")
        elif expected is None:
            print(f"note: model '{name}': built by TensorRT {built}; the TensorRT of NGC {tag} is unknown here "
                  f"({known}), so whether it can load the engine is not checked")
        elif not same_tensorrt(built, expected):
            builders = [t for t, v in ngc.TENSORRT_IN_RELEASE.items() if same_tensorrt(built, v)]
            problems.append(
                f"model '{name}': its engine was built by TensorRT {built} ({described}), but the NGC {tag} server "
                f"links TensorRT {expected}, and an engine loads only in the TensorRT version that built it: rebuild "
                f"it with ngc_tag='{tag}' (notebook 03 or 12)"
                + (f", or serve it with ngc_tag='{builders[-1]}', the release that built it" if builders else ""))
    return problems


# The newest TorchScript file format libtorch reads: kMaxSupportedFileFormatVersion, 0xA in PyTorch 2.x
# (caffe2/serialize/versions.h, the same in this environment's torch 2.14.1); a newer file fails at once ("Attempted
# to read a PyTorch file with version 11, but the maximum supported version for reading is 10": inline_container.cc,
# as torch 2.14.1 says it). A file within it may still use an operator or schema an older libtorch lacks (versions.h,
# "Note [Dynamic Versions and torch.jit.save vs. torch.save]"): it is read by the same or a newer PyTorch, not surely
# by an older one.
TORCHSCRIPT_MAX_FORMAT = 10


class TorchScriptNewerThanRelease(UserWarning):
    """TorchScript saved by a PyTorch newer than the one the NGC server links: it may not load there."""


def _major_minor(version: str) -> tuple[int, int]:
    """(major, minor) of a version such as "2.14.1+cu130"."""
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0]
    return parts[0], parts[1]


def torchscript_format(path: str | Path) -> int | None:
    """The file format version a TorchScript archive records (`<archive>/version` in its zip), or None when the file
    is no zip archive or has none."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/version")]
            return int(archive.read(names[0]).decode().strip()) if names else None
    except (zipfile.BadZipFile, OSError, ValueError):
        return None


def _torchscript_files(repository: str | Path, models: Sequence[str]) -> list[tuple[str, Path]]:
    """(model, file) for each PyTorch-backend model among `models`: its newest version's TorchScript file."""
    found = []
    for name in models:
        folder = Path(repository) / name
        try:
            config = read_config(folder)
        except ConfigError:
            continue  # the preflight check names it
        if config.platform != "pytorch_libtorch" and config.backend != "pytorch":
            continue
        versions = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
        if versions:
            found.append((name, versions[-1] / (config.default_model_filename or "model.pt")))
    return found


def _torch_here() -> str | None:
    """The torch version of this environment (which saves the series' TorchScript), without importing torch."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def torchscript_check(repository: str | Path, models: Sequence[str], tag: str) -> None:
    """Refuse TorchScript among `models` that NGC `tag`'s libtorch cannot read (a file format newer than
    TORCHSCRIPT_MAX_FORMAT), and warn (TorchScriptNewerThanRelease) when this environment's torch, which saved it,
    is newer than the PyTorch the tag's backend links (ngc.pytorch_of): it may use what that libtorch lacks."""
    files = [(name, path) for name, path in _torchscript_files(repository, models) if path.is_file()]
    here = _torch_here()
    release, exact, source = ngc.pytorch_of(tag)
    problems, newer = [], []
    for name, path in files:
        version = torchscript_format(path)
        if version is None:
            print(f"note: model '{name}': {path} is no TorchScript zip archive with a version record, so whether "
                  f"NGC {tag}'s libtorch reads it is not checked")
        elif version > TORCHSCRIPT_MAX_FORMAT:
            problems.append(f"model '{name}': {path} has TorchScript file format {version}, but libtorch reads "
                            f"{TORCHSCRIPT_MAX_FORMAT} at most (NGC {tag}'s PyTorch {release or '?'}); save it with "
                            f"the PyTorch NGC {tag} links, or serve it with a newer tag")
        elif here and release and _major_minor(here) > _major_minor(release):
            newer.append(name)
    if problems:
        raise RuntimeError("; ".join(problems))
    if newer:
        which = f"PyTorch {release}" if exact else f"PyTorch {release} or newer (not recorded exactly)"
        warnings.warn(f"model(s) {', '.join(newer)}: TorchScript saved by torch {here} (this environment's; the file "
                      f"records only its format version), but NGC {tag}'s PyTorch backend links {which}: {source}. "
                      f"TorchScript loads in the same or a newer PyTorch, not surely in an older one: if the server "
                      f"reports the model UNAVAILABLE, save it with torch {release} or older (pip install "
                      f"'torch=={release}.*' in another environment), or choose a newer tag whose PyTorch is at least "
                      f"{'.'.join(map(str, _major_minor(here)))}",
                      TorchScriptNewerThanRelease, stacklevel=2)


def containers() -> dict[str, str]:
    """This engine's containers, running or not (`docker ps -a`), name -> state (`{{.State}}`: created, running,
    exited, ...: https://docs.docker.com/reference/cli/docker/container/ls/), {} when Docker does not answer."""
    import subprocess

    out = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}\t{{.State}}"], capture_output=True, text=True)
    if out.returncode != 0:
        return {}
    rows = [line.split("\t") for line in out.stdout.splitlines() if line.strip()]
    return {row[0]: (row[1] if len(row) > 1 else "") for row in rows}


class LocalLauncher:
    """A tritonserver binary on this machine over a mirror of the repository (stand-ins where a backend is missing)."""

    name = "local"

    def __init__(self, runtime: RuntimeChoice):
        self.local = runtime.local

    def pick_port(self, requested: int | None, default: int, host: str, avoid: Collection[int] = ()) -> int:
        return requested or free_port(host, avoid)

    def command(self, server) -> list[str]:
        local = self.local
        return [str(local.binary), f"--model-repository={server.workdir / 'models'}",
                f"--backend-directory={local.backend_dir}", f"--http-address={server.host}",
                f"--http-port={server.http_port}", f"--grpc-address={server.host}", f"--grpc-port={server.grpc_port}",
                f"--metrics-address={server.host}", f"--metrics-port={server.metrics_port}",
                "--exit-on-error=false", "--exit-timeout-secs=10",
                *control_flags(None, server.poll_secs)]  # `*`: the mirror holds only the models asked for

    def prepare(self, server) -> tuple[list[Served], dict[str, str]]:
        served = prepare_served_repository(server.repository, server.workdir / "models", self.local.backends,
                                           server.models, cpu_only=self.local.cpu_only_backends)
        if any(s.how == "python stand-in" or s.detail.startswith("python backend") for s in served):
            problem = environment_problem(self.local.backend_dir)
            if problem:
                raise RuntimeError(problem)
        return served, dict(self.local.env)

    def before_start(self, server) -> None:
        return None

    def cleanup_command(self, server) -> list[str]:
        return []


def launcher_for(runtime: RuntimeChoice) -> Launcher:
    """The launcher of a resolved runtime."""
    return DockerLauncher() if runtime.name == "docker" else LocalLauncher(runtime)


def guarded(command: list[str], cleanup: list[str]) -> list[str]:
    """`command` run under helpers/reaper.py, which stops its whole process group when this process dies."""
    return ngc.guarded(command, cleanup)
