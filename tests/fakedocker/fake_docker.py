"""A `docker` for tests only: answers what the series asks of Docker and runs the NGC images' commands on this machine.

  docker info --format ...        an engine version; Runtimes lists nvidia unless FAKE_DOCKER_NO_TOOLKIT=1
  docker image inspect IMAGE      exit 0 only for images pulled before (state in $FAKE_DOCKER_STATE)
  docker pull IMAGE               progress lines, then the image counts as present
  docker run [opts] IMAGE CMD...  refuses an image that was not pulled (a real engine would pull it silently);
                                  tritonserver image: the local Triton server, volumes, ports and names applied;
                                  -sdk image: the local perf_analyzer, volumes and working directory applied;
                                  tensorrt / pytorch images: fail as an image that cannot run here (no GPU, no TensorRT)
  docker rm -f NAME               stops what `docker run --name NAME` started
  docker ps                       the names of running containers
It never produces a TensorRT result. The server image serves what this machine's Triton can (Python and PyTorch
backends, Python-backend stand-ins for the rest) and places GPU instance groups on the CPU.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_DOCKER_STATE", Path(tempfile.gettempdir()) / "fake-docker"))
_WITH_VALUE = {"--name", "--gpus", "--net", "--network", "-p", "-v", "-w", "-e", "--shm-size", "--ulimit"}


def _images() -> set[str]:
    path = STATE / "images"
    return set(path.read_text().split()) if path.exists() else set()


def _say(code: int, message: str) -> int:
    print(message, file=sys.stderr)
    return code


def info(args: list[str]) -> int:
    fmt = args[args.index("--format") + 1] if "--format" in args else ""
    if "Runtimes" in fmt:
        runtimes = {"runc": {"path": "runc"}}
        if os.environ.get("FAKE_DOCKER_NO_TOOLKIT") != "1":
            runtimes["nvidia"] = {"path": "nvidia-container-runtime"}
        print(json.dumps(runtimes))
    else:
        print("27.5.1-fake")
    return 0


def pull(image: str) -> int:
    repo, _, tag = image.rpartition(":")
    print(f"{tag}: Pulling from {repo.split('/', 1)[-1]}")
    for layer in ("a1b2c3d4e5f6", "0f1e2d3c4b5a"):
        print(f"{layer}: Pulling fs layer")
        print(f"{layer}: Pull complete")
    print("Digest: sha256:" + "0" * 64)
    print(f"Status: Downloaded newer image for {image}")
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "images").write_text("\n".join(sorted(_images() | {image})) + "\n")
    return 0


def _parse_run(args: list[str]) -> tuple[dict, str, list[str]]:
    opts = {"volumes": {}, "ports": {}, "name": None, "workdir": None, "gpus": None}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        flag = args[i]
        value = args[i + 1] if flag in _WITH_VALUE else None
        if flag == "-v":
            src, dst = value.split(":")[:2]
            opts["volumes"][dst] = src
        elif flag == "-p":
            parts = value.split(":")
            opts["ports"][int(parts[-1])] = int(parts[-2])
        elif flag == "--name":
            opts["name"] = value
        elif flag == "-w":
            opts["workdir"] = value
        elif flag == "--gpus":
            opts["gpus"] = value
        i += 2 if flag in _WITH_VALUE else 1
    return opts, args[i], args[i + 1:]


def _host_path(arg: str, volumes: dict[str, str]) -> str:
    """An argument with a container path (possibly after `=`) rewritten to the host path of its volume."""
    key, sep, value = arg.partition("=") if arg.startswith("-") and "=" in arg else ("", "", arg)
    for dst, src in sorted(volumes.items(), key=lambda kv: -len(kv[0])):
        if value == dst or value.startswith(dst.rstrip("/") + "/"):
            return f"{key}{sep}{src}{value[len(dst.rstrip('/')):]}"
    return arg


def _register(name: str | None) -> None:
    if name:
        (STATE / "containers").mkdir(parents=True, exist_ok=True)
        (STATE / "containers" / name).write_text(str(os.getpid()))


def _server_repository(source: Path) -> Path:
    """This machine's view of the mounted repository: stand-ins where a backend is missing, GPU groups on the CPU."""
    from helpers.repository import read_config, to_text
    from helpers.runtime import find_local_triton
    from helpers.standin import prepare_served_repository

    target = Path(tempfile.mkdtemp(prefix="repo-", dir=STATE))
    prepare_served_repository(source, target, find_local_triton().backends)
    for model in (p for p in target.iterdir() if (p / "config.pbtxt").exists()):
        config = read_config(model)
        if any(g.kind == g.KIND_GPU for g in config.instance_group):
            for group in config.instance_group:
                group.kind = group.KIND_CPU
            real = model.resolve()
            if model.is_symlink():
                model.unlink()
                model.mkdir()
                for item in real.iterdir():
                    if item.name != "config.pbtxt":
                        (model / item.name).symlink_to(item, target_is_directory=item.is_dir())
            (model / "config.pbtxt").write_text(to_text(config))
    return target


def run_server(opts: dict, command: list[str]) -> int:
    from helpers.runtime import find_local_triton

    if command[:1] != ["tritonserver"]:
        return _say(127, f"fake docker: the tritonserver image runs `tritonserver ...`; got {command[:1]}")
    local = find_local_triton()
    args = []
    for arg in command[1:]:
        if arg.startswith("--model-repository="):
            arg = f"--model-repository={_server_repository(Path(_host_path(arg, opts['volumes']).split('=', 1)[1]))}"
        args.append(arg)
    ports = opts["ports"]
    args += [f"--backend-directory={local.backend_dir}", "--http-address=127.0.0.1", "--grpc-address=127.0.0.1",
             f"--http-port={ports.get(8000, 8000)}", f"--grpc-port={ports.get(8001, 8001)}",
             f"--metrics-port={ports.get(8002, 8002)}"]
    _register(opts["name"])
    os.execve(str(local.binary), [str(local.binary), *args], {**os.environ, **local.env})


def run_sdk(opts: dict, command: list[str]) -> int:
    from helpers.perf import find_perf_analyzer

    if command[:1] != ["perf_analyzer"]:
        return _say(127, f"fake docker: the SDK image here runs perf_analyzer only; got {command[:1]}")
    pa = find_perf_analyzer()
    args = [_host_path(a, opts["volumes"]) for a in command[1:]]
    if opts["workdir"]:
        os.chdir(_host_path(opts["workdir"], opts["volumes"]))
    _register(opts["name"])
    os.execve(str(pa.binary), [str(pa.binary), *args], {**os.environ, **pa.env})


def run(args: list[str]) -> int:
    opts, image, command = _parse_run(args)
    if image not in _images():
        return _say(125, f"fake docker: image {image} was not pulled first; a real engine would now pull it "
                         "silently inside `docker run` (tests require an explicit pull)")
    if "/tritonserver:" in image and image.endswith("-py3-sdk"):
        return run_sdk(opts, command)
    if "/tritonserver:" in image:
        return run_server(opts, command)
    return _say(125, f"docker: Error response from daemon: {image} cannot run on this machine (fake docker for tests: "
                     "no NVIDIA GPU, no TensorRT). Run this step on a GPU workstation with Docker and the NVIDIA "
                     "Container Toolkit.")


def rm(args: list[str]) -> int:
    code = 0
    for name in (a for a in args if not a.startswith("-")):
        record = STATE / "containers" / name
        if not record.exists():
            code = _say(1, f"Error response from daemon: No such container: {name}")
            continue
        pid = int(record.read_text())
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.1)
        record.unlink()
        print(name)
    return code


def ps() -> int:
    folder = STATE / "containers"
    for record in sorted(folder.iterdir()) if folder.exists() else []:
        if Path(f"/proc/{record.read_text()}").exists():
            print(record.name)
    return 0


def main(argv: list[str]) -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    if os.environ.get("FAKE_DOCKER_LOG"):
        with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
            log.write(json.dumps(argv) + "\n")
    verb, rest = (argv[0], argv[1:]) if argv else ("", [])
    if verb == "info":
        return info(rest)
    if verb == "image" and rest[:1] == ["inspect"]:
        return 0 if rest[1] in _images() else _say(1, f"Error: No such image: {rest[1]}")
    if verb == "pull":
        return pull(rest[0])
    if verb == "run":
        return run(rest)
    if verb == "rm":
        return rm(rest)
    if verb == "ps":
        return ps()
    return _say(1, f"fake docker: `docker {' '.join(argv)}` is not one of the commands the series uses")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
