"""The two ways the series starts Triton, behind one interface: the NGC container (docker) and a local binary."""
from __future__ import annotations

import os
import socket
import shlex
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Protocol

from . import ngc
from .runtime import RuntimeChoice
from .pyenv import environment_problem
from .standin import Served, prepare_served_repository


def free_port(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """A TCP port nobody listens on right now, other than those in `avoid`."""
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
    """Model-control flags: explicit loading of `models` when given (only what a notebook uses), else poll mode."""
    if models is not None:
        return ["--model-control-mode=explicit", *[f"--load-model={m}" for m in models]]
    return ["--model-control-mode=poll", f"--repository-poll-secs={poll_secs}"] if poll_secs else []


class Launcher(Protocol):
    """What TritonServer needs from a runtime: ports, the command, the served list, and what to do around a run."""

    name: str

    def pick_port(self, requested: int | None, default: int, host: str, avoid: Collection[int] = ()) -> int: ...

    def command(self, server) -> list[str]: ...

    def prepare(self, server) -> tuple[list[Served], dict[str, str]]: ...

    def before_start(self, server) -> None: ...

    def cleanup_command(self, server) -> list[str]: ...


class DockerLauncher:
    """`docker run` of the NGC tritonserver image, the repository mounted at /models, on the host's network with
    every endpoint bound to 127.0.0.1 (no docker-proxy between a client on this host and the server)."""

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
            volumes={server.repository: "/models"}, network="host", gpus=server.gpus, name=server.container_name,
            extra=["--ipc=host"])  # shares /dev/shm with clients on this host (system shared memory)

    def prepare(self, server) -> tuple[list[Served], dict[str, str]]:
        return [Served(name, "native", "NGC container") for name in server.model_names()], {}

    def before_start(self, server) -> None:
        leftovers = [n for n in containers() if n.startswith(CONTAINER_PREFIX)]
        if server.container_name in leftovers:
            raise RuntimeError(f"a container named {server.container_name} already exists (left by an interrupted "
                               f"run?): remove it with `docker rm -f {server.container_name}`")
        for name in leftovers:  # another port: not in our way, but it may hold a GPU and memory
            print(f"note: container {name} from an earlier run still exists; `docker rm -f {name}` removes it")
        ngc.ensure_image(ngc.image("tritonserver", server.tag))  # before the readiness clock starts

    def cleanup_command(self, server) -> list[str]:
        return ["docker", "rm", "-f", server.container_name]


CONTAINER_PREFIX = "triton-tutorials-"


def containers() -> list[str]:
    """Names of this engine's containers, running or stopped (`docker ps -a`), [] when Docker does not answer."""
    import subprocess

    out = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else []


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
                *control_flags(None, server.poll_secs)]  # the mirror holds only the models asked for

    def prepare(self, server) -> tuple[list[Served], dict[str, str]]:
        served = prepare_served_repository(server.repository, server.workdir / "models", self.local.backends,
                                           server.models)
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
    reaper = [sys.executable, str(Path(__file__).with_name("reaper.py")), "--parent", str(os.getpid())]
    if cleanup:
        reaper += ["--on-exit", shlex.join(cleanup)]
    return [*reaper, "--", *command]


