"""A `docker` for tests only: answers what the series asks of Docker and runs the NGC images' commands on this machine.

  docker info --format ...        an engine version; Runtimes lists nvidia unless FAKE_DOCKER_NO_TOOLKIT=1;
                                  SecurityOptions name=selinux with FAKE_DOCKER_SELINUX=1, name=rootless with
                                  FAKE_DOCKER_ROOTLESS=1, name=userns with FAKE_DOCKER_USERNS=1 ({{json .}}: all
                                  of it as one JSON object)
  docker image inspect IMAGE      exit 0 only for images pulled before (state in $FAKE_DOCKER_STATE)
  docker pull IMAGE               progress lines, then the image counts as present
  docker run [opts] IMAGE CMD...  options checked against a recent Docker's `docker run` options (tests/data): an
                                  unknown one fails as Docker's CLI does; a name in use fails with Docker's conflict;
                                  a command that names a host path outside the mounts fails (the container cannot
                                  see it); refuses an image that was not pulled (a real engine would pull silently;
                                  with --pull=never it fails as Docker does);
                                  --gpus without the Container Toolkit (FAKE_DOCKER_NO_TOOLKIT=1) fails as Docker does;
                                  a volume mode other than ro/rw/z/Z fails;
                                  --network and --ipc honoured on every path: perf_analyzer outside the host's network
                                  cannot reach 127.0.0.1/localhost, with shared memory outside the host's IPC (or
                                  against a server container outside it) it cannot register its regions; a server
                                  that binds 127.0.0.1 in a bridge-network container cannot be reached through -p;
                                  tritonserver image: the local Triton server (host network, or -p ports);
                                  -sdk image: the local perf_analyzer, volumes and working directory applied;
                                  tensorrt / pytorch images: fail as an image that cannot run here (no GPU, no TensorRT)
                                  The container is a child process in its own session: it outlives a killed `docker
                                  run` CLI, as a real container does; SIGTERM/SIGINT to the CLI are passed on
                                  (--sig-proxy, each one noted in $FAKE_DOCKER_STATE/signals); with --rm its record
                                  goes when it exits.
                                  Per tag (flags.py, read from each release's sources): tritonserver and perf_analyzer
                                  refuse an option their release does not have ("unrecognized option").
                                  PID 1: without --init the image's process is PID 1, and the kernel gives PID 1 no
                                  default action for SIGTERM/SIGINT: a signal it has no handler for (SigCgt in
                                  /proc/PID/status) is dropped, as in pid_namespaces(7); noted as "ignored".
                                  --user: without it the container runs as root, and what it creates in a writable
                                  mount is root's: listed in $FAKE_DOCKER_STATE/root-owned, which userfs/
                                  sitecustomize.py turns into the user's PermissionError on delete or write.
                                  -sdk image `model-analyzer profile -f CONFIG`: model_analyzer_standin.py, a stand-in
                                  of the test docker (not Model Analyzer): it checks the YAML and the launch, then
                                  measures each variant with this machine's perf_analyzer on the remote server.
  docker stop NAME / kill NAME    SIGTERM (SIGKILL after 10 s) / SIGKILL to the container
  docker rm [-f] NAME             removes a stopped container; a running one only with -f (Docker's error otherwise)
  docker ps [-a] [--format ...]   running containers (-a: stopped ones too), as {{.Names}} (default) and {{.State}}
                                  ("running", or "exited" once its process ended)
It never produces a TensorRT result. The server image serves what this machine's Triton can (Python and PyTorch
backends, Python-backend stand-ins for the rest) and places GPU instance groups on the CPU. A reader's own Python-backend
model runs in what the NGC image's Python has: numpy and no more (the server's build.py installs numpy<2 and virtualenv
for the Python backend), so a model.py that imports torch or torchvision fails to load as it would in the image.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_DOCKER_STATE", Path(tempfile.gettempdir()) / "fake-docker"))
OPTIONS_FILE = Path(__file__).resolve().parent.parent / "data" / "docker_run_options.txt"
# Paths an NGC image has of its own (a command may name them without a mount).
IMAGE_PATHS = ("/opt/", "/usr/", "/workspace", "/dev/", "/proc/")


def _tag(image: str) -> str:
    """The NGC release tag of an image name (nvcr.io/nvidia/tritonserver:26.02-py3-sdk -> 26.02)."""
    return image.rpartition(":")[2].split("-", 1)[0]


def _unrecognized(program: str, image: str, args: list[str]) -> int | None:
    """Exit as `program` of the image's tag does when given an option its release lacks (flags.py), else None."""
    import flags

    unknown = flags.unknown_options(program, _tag(image), args)
    if not unknown:
        return None
    stand_in, _ = flags.table_for(_tag(image), flags.TRITONSERVER if program == "tritonserver" else flags.PERF_ANALYZER)
    return _say(1, f"{program}: unrecognized option '{unknown[0]}' (fake docker: not in the {program} of NGC "
                   f"{stand_in}, tests/fakedocker/flags.py)")


def _options() -> dict[str, bool]:
    """Every `docker run` option name -> whether it takes a value, from the recorded options of a recent Docker."""
    table = {}
    for line in OPTIONS_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            *names, kind = line.split()
            table.update({name: kind != "bool" for name in names})
    return table


def _images() -> set[str]:
    path = STATE / "images"
    return set(path.read_text().split()) if path.exists() else set()


def _say(code: int, message: str) -> int:
    print(message, file=sys.stderr)
    return code


def _toolkit() -> bool:
    return os.environ.get("FAKE_DOCKER_NO_TOOLKIT") != "1"


def info(args: list[str]) -> int:
    fmt = args[args.index("--format") + 1] if "--format" in args else ""
    runtimes = {"runc": {"path": "runc"}, **({"nvidia": {"path": "nvidia-container-runtime"}} if _toolkit() else {})}
    security = ["name=seccomp,profile=builtin", "name=cgroupns"]
    security += ["name=selinux"] if os.environ.get("FAKE_DOCKER_SELINUX") == "1" else []
    security += ["name=rootless"] if os.environ.get("FAKE_DOCKER_ROOTLESS") == "1" else []
    security += ["name=userns"] if os.environ.get("FAKE_DOCKER_USERNS") == "1" else []
    if fmt.replace(" ", "") == "{{json.}}":
        print(json.dumps({"ServerVersion": "27.5.1-fake", "Runtimes": runtimes, "SecurityOptions": security}))
    elif "Runtimes" in fmt:
        print(json.dumps(runtimes))
    elif "SecurityOptions" in fmt:
        print(json.dumps(security))
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
    """Options, image and command of `docker run`; an option Docker does not know exits 125 as Docker's CLI does."""
    known = _options()
    opts = {"volumes": {}, "ports": {}, "name": None, "workdir": None, "gpus": None, "network": None, "env": {},
            "rm": False, "user": None, "ipc": None, "init": False, "pull": "missing", "modes": {}}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        flag, _, inline = args[i].partition("=")
        if flag not in known:
            print(f"unknown flag: {flag}\nSee 'docker run --help'.", file=sys.stderr)
            raise SystemExit(125)
        takes_value = known[flag]
        value = (inline or args[i + 1]) if takes_value else None
        i += 1 + (1 if takes_value and not inline else 0)
        if flag in ("-v", "--volume"):
            src, dst, *mode = value.split(":")
            bad = [m for m in ",".join(mode).split(",") if m and m not in ("ro", "rw", "z", "Z")]
            if len(mode) > 1 or bad:
                print(f"docker: Error response from daemon: invalid mode: {':'.join(mode)}.", file=sys.stderr)
                raise SystemExit(125)
            opts["volumes"][dst] = src
            opts["modes"][dst] = ",".join(mode)
        elif flag in ("-p", "--publish"):
            parts = value.split(":")
            opts["ports"][int(parts[-1])] = int(parts[-2])
        elif flag in ("-e", "--env"):
            key, _, val = value.partition("=")
            opts["env"][key] = val
        elif flag in ("-w", "--workdir", "--name", "--gpus", "--network", "-u", "--user", "--ipc", "--pull"):
            opts[{"-w": "workdir", "--workdir": "workdir", "-u": "user", "--user": "user"}.get(flag, flag[2:])] = value
        elif flag in ("--rm", "--init"):
            opts[flag[2:]] = True
    if i >= len(args):
        print('"docker run" requires at least 1 argument.', file=sys.stderr)
        raise SystemExit(125)
    return opts, args[i], args[i + 1:]


def _outside_mounts(command: list[str], opts: dict) -> list[str]:
    """Absolute host paths the command names that no mount makes visible in the container."""
    found = []
    for arg in [*command, opts["workdir"] or ""]:
        value = arg.partition("=")[2] if arg.startswith("-") and "=" in arg else arg
        if not value.startswith("/") or value.startswith(IMAGE_PATHS):
            continue  # the image's own paths
        if value.startswith("/tmp") and Path(value).parent == Path("/tmp") and not Path(value).exists():
            continue  # the container's own /tmp; a host folder under /tmp is the host's, not the container's
        if not any(value == dst or value.startswith(dst.rstrip("/") + "/") for dst in opts["volumes"]):
            found.append(value)
    return found


def _host_path(arg: str, volumes: dict[str, str]) -> str:
    """An argument with a container path (possibly after `=`) rewritten to the host path of its volume."""
    key, sep, value = arg.partition("=") if arg.startswith("-") and "=" in arg else ("", "", arg)
    for dst, src in sorted(volumes.items(), key=lambda kv: -len(kv[0])):
        if value == dst or value.startswith(dst.rstrip("/") + "/"):
            return f"{key}{sep}{src}{value[len(dst.rstrip('/')):]}"
    return arg


def _record(name: str) -> Path:
    return STATE / "containers" / name


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _running(name: str) -> bool:
    record = _record(name)
    return record.exists() and _alive(int(record.read_text() or 0))


def _default_signals() -> None:
    """In the child, before exec: SIGINT and SIGTERM back to their default disposition."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)


def _caught(pid: int, number: int) -> bool:
    """Whether process `pid` has a handler for signal `number` (its SigCgt mask in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (number - 1) & 1)
    except OSError:
        return False
    return False


def _writable_mounts(opts: dict) -> list[Path]:
    """The host folders mounted writable (no :ro)."""
    return [Path(src) for dst, src in opts["volumes"].items() if Path(src).is_dir() and not _read_only(opts, dst)]


def _read_only(opts: dict, dst: str) -> bool:
    return "ro" in opts.get("modes", {}).get(dst, "").split(",")


def _tree(folders: list[Path]) -> set[str]:
    """Every path under `folders`."""
    found = set()
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            found.update(os.path.join(root, n) for n in dirs + files)
    return found


def _start(opts: dict, argv: list[str], env: dict[str, str], cwd: str | None = None) -> int:
    """Run the container's process as a child in its own session, as `docker run` without -d does: wait for it,
    pass SIGTERM/SIGINT on (dropped by a PID 1 without --init that has no handler for it), keep its record (the name
    stays taken) unless --rm; without --user, what it created in writable mounts is listed as root's."""
    import subprocess

    as_root = not opts["user"]
    mounts = _writable_mounts(opts) if as_root else []
    before = _tree(mounts)
    if not as_root:  # the user's own process: the user's view of root's files applies (userfs/sitecustomize.py)
        env = {k: v for k, v in env.items() if k != "FAKE_DOCKER_DAEMON"}
    # a container's PID 1 starts with every signal at its default, whatever the docker CLI's caller ignored (an
    # xdist worker ignores SIGINT, and an ignored signal is inherited, so Python would not install its handler)
    child = subprocess.Popen(argv, env=env, cwd=cwd, start_new_session=True, preexec_fn=_default_signals)
    if opts["name"]:
        (STATE / "containers").mkdir(parents=True, exist_ok=True)
        _record(opts["name"]).write_text(str(child.pid))

    def proxy(number: int, _frame) -> None:
        ignored = not opts["init"] and not _caught(child.pid, number)
        with open(STATE / "signals", "a") as noted:
            noted.write(f"{opts['name'] or '-'} {signal.Signals(number).name}"
                        + (" ignored (PID 1 without --init, no handler)" if ignored else "") + "\n")
        if not ignored:
            child.send_signal(number)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, proxy)
    try:
        code = child.wait()
    finally:
        if mounts:
            created = sorted(_tree(mounts) - before)
            if created:
                with open(STATE / "root-owned", "a") as owned:
                    owned.write("".join(f"{path}\n" for path in created))
    with contextlib.suppress(ProcessLookupError):  # nothing left in it
        os.killpg(child.pid, signal.SIGKILL)  # the main process is gone: Docker ends the rest of the container too
    if opts["name"] and opts["rm"]:
        _record(opts["name"]).unlink(missing_ok=True)
    return code if code >= 0 else 128 - code


def _image_python() -> Path:
    """A Python environment with what the NGC server image's Python has for Python-backend models: numpy, no torch,
    no torchvision (made once per state folder: a venv whose only package folder links this environment's numpy)."""
    import subprocess

    import numpy

    env = STATE / "image-python"
    if (env / "bin" / "activate").exists():
        return env
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    packages = env / "image-packages"
    packages.mkdir()
    installed = Path(numpy.__file__).resolve().parent.parent
    for item in installed.glob("numpy*"):  # the package, its bundled libraries, its metadata
        (packages / item.name).symlink_to(item, target_is_directory=item.is_dir())
    site = next((env / "lib").glob("python3*/site-packages"))
    (site / "_image_packages.pth").write_text(f"{packages}\n")
    return env


def _server_repository(source: Path) -> Path:
    """This machine's view of the mounted repository: stand-ins where a backend is missing, GPU groups on the CPU,
    a reader's Python-backend models in the image's Python (_image_python)."""
    from helpers.repository import read_config, to_text
    from helpers.runtime import find_local_triton
    from helpers.standin import prepare_served_repository

    target = Path(tempfile.mkdtemp(prefix="repo-", dir=STATE))
    prepare_served_repository(source, target, find_local_triton().backends)
    for model in (p for p in target.iterdir() if (p / "config.pbtxt").exists()):
        config = read_config(model)
        reader_python = config.backend == "python" and "ARTIFACT" not in config.parameters and not model.is_symlink()
        if reader_python:  # mirrored with this environment (helpers.standin); the image has only numpy
            config.parameters["EXECUTION_ENV_PATH"].string_value = str(_image_python())
            (model / "config.pbtxt").write_text(to_text(config))
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
    refused = _unrecognized("tritonserver", opts["image"], command[1:])
    if refused is not None:
        return refused
    local = find_local_triton()
    args = []
    for arg in command[1:]:
        if arg.startswith("--model-repository="):
            arg = f"--model-repository={_server_repository(Path(_host_path(arg, opts['volumes']).split('=', 1)[1]))}"
        args.append(arg)
    args.append(f"--backend-directory={local.backend_dir}")
    if opts["network"] != "host" and any(a.split("=", 1)[-1] in ("127.0.0.1", "localhost") for a in command
                                         if a.startswith(("--http-address=", "--grpc-address="))):
        return _say(1, "fake docker: tritonserver binds 127.0.0.1 inside a bridge-network container, where -p "
                       "forwarding cannot reach it (the container's loopback is its own); use --network host")
    if opts["network"] != "host":  # bridge network: the container's 8000-8002 published with -p
        ports = opts["ports"]
        args += ["--http-address=127.0.0.1", "--grpc-address=127.0.0.1", f"--http-port={ports.get(8000, 8000)}",
                 f"--grpc-port={ports.get(8001, 8001)}", f"--metrics-port={ports.get(8002, 8002)}"]
    return _start(opts, [str(local.binary), *args], {**os.environ, **local.env, **opts["env"]})


def run_sdk(opts: dict, command: list[str]) -> int:
    from helpers.perf import find_perf_analyzer

    if command[:1] == ["model-analyzer"]:
        return run_model_analyzer(opts, command)
    if command[:1] != ["perf_analyzer"]:
        return _say(127, f"fake docker: the SDK image here runs perf_analyzer and model-analyzer only; got {command[:1]}")
    refused = _unrecognized("perf_analyzer", opts["image"], command[1:])
    if refused is not None:
        return refused
    url = command[command.index("-u") + 1] if "-u" in command[:-1] else "localhost:8001"
    if opts["network"] != "host" and url.rsplit(":", 1)[0] in ("localhost", "127.0.0.1"):
        return _say(1, f"error: failed to connect to {url}: Connection refused (fake docker: without --network host, "
                       "127.0.0.1 in the container is the container's own, not this host's)")
    shm = command[command.index("--shared-memory") + 1] if "--shared-memory" in command[:-1] else "none"
    private = [name for name, ipc in _running_servers().items() if ipc != "host"]
    if shm != "none" and (opts["ipc"] != "host" or private):
        where = ("this container has its own /dev/shm (no --ipc=host)" if opts["ipc"] != "host" else
                 f"server container {private[0]} has its own /dev/shm (no --ipc=host)")
        return _say(1, f"error: failed to register {shm} shared memory region: Unable to open shared memory region "
                       f"(fake docker: {where}, so the server cannot open the client's regions)")
    pa = find_perf_analyzer()
    args = [_host_path(a, opts["volumes"]) for a in command[1:]]
    cwd = _host_path(opts["workdir"], opts["volumes"]) if opts["workdir"] else None
    return _start(opts, [str(pa.binary), *args], {**os.environ, **pa.env, **opts["env"]}, cwd)


def run_model_analyzer(opts: dict, command: list[str]) -> int:
    """The SDK image's `model-analyzer`: the test docker's stand-in (model_analyzer_standin.py), run in the
    container as every image's process is, with what it needs to judge the launch: the container's network, the
    mounts (container path -> host path and mode), the tag, and this machine's perf_analyzer for the SDK image's."""
    from helpers.perf import find_perf_analyzer

    pa = find_perf_analyzer()
    context = {"network": opts["network"], "ipc": opts["ipc"], "gpus": opts["gpus"], "user": opts["user"],
               "tag": _tag(opts["image"]), "volumes": opts["volumes"], "modes": opts["modes"],
               "perf_analyzer": str(pa.binary), "docker_sock": "/var/run/docker.sock" in opts["volumes"]}
    env = {**os.environ, **pa.env, **opts["env"], "FAKE_DOCKER_CONTAINER": json.dumps(context)}
    standin = Path(__file__).resolve().parent / "model_analyzer_standin.py"
    return _start(opts, [sys.executable, str(standin), *command[1:]], env)


def _running_servers() -> dict[str, str]:
    """Running containers of the tritonserver image -> their --ipc ("private" without one), from their records."""
    folder = STATE / "run-options"
    found = {}
    for path in sorted(folder.iterdir()) if folder.exists() else []:
        image, _, ipc = path.read_text().partition(" ")
        ipc = ipc.split(" ")[0]
        if "/tritonserver:" in image and not image.endswith("-sdk") and _running(path.name):
            found[path.name] = ipc
    return found


def run(args: list[str]) -> int:
    opts, image, command = _parse_run(args)
    opts["image"] = image
    if opts["gpus"] and not _toolkit():
        return _say(125, 'docker: Error response from daemon: could not select device driver "" with capabilities: '
                         "[[gpu]].")
    if image not in _images() and opts["pull"] == "never":
        return _say(125, f"docker: Error response from daemon: No such image: {image}.")
    if image not in _images():
        return _say(125, f"fake docker: image {image} was not pulled first; a real engine would now pull it "
                         "silently inside `docker run` (tests require an explicit pull)")
    if opts["name"] and _record(opts["name"]).exists():  # running, or stopped and not removed: the name is taken
        return _say(125, f'docker: Error response from daemon: Conflict. The container name "/{opts["name"]}" is '
                         "already in use by container \"fake\". You have to remove (or rename) that container to be "
                         "able to reuse that name.")
    unseen = _outside_mounts(command, opts)
    if unseen:
        return _say(1, f"fake docker: the container cannot see {unseen}: no -v mount holds them "
                       f"(mounts: {sorted(opts['volumes']) or 'none'})")
    if opts["name"]:  # what the SDK path needs to know of a running server: its image and its IPC namespace
        (STATE / "run-options").mkdir(parents=True, exist_ok=True)
        (STATE / "run-options" / opts["name"]).write_text(f"{image} {opts['ipc'] or 'private'} "
                                                         f"{'init' if opts['init'] else 'no-init'}")
    if "/tritonserver:" in image and image.endswith("-py3-sdk"):
        return run_sdk(opts, command)
    if "/tritonserver:" in image:
        return run_server(opts, command)
    return _say(125, f"docker: Error response from daemon: {image} cannot run on this machine (fake docker for tests: "
                     "no NVIDIA GPU, no TensorRT). Run this step on a GPU workstation with Docker and the NVIDIA "
                     "Container Toolkit.")


def _signal_container(name: str, first: int, grace: float) -> bool:
    record = _record(name)
    if not record.exists():
        return False
    pid = int(record.read_text() or 0)
    options = STATE / "run-options" / name
    no_init = options.exists() and options.read_text().endswith(" no-init")
    for sig in (first, signal.SIGKILL):
        try:
            if sig != signal.SIGKILL and no_init:  # PID 1 gets it alone, and drops it without a handler
                if _caught(pid, sig):
                    os.kill(pid, sig)
            else:
                os.killpg(pid, sig)  # the container's session: its process and everything it started
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if not _alive(pid):
            break
    return True


def stop(args: list[str], sig: int = signal.SIGTERM) -> int:
    code = 0
    for name in (a for a in args if not a.startswith("-")):
        if not _signal_container(name, sig, 10 if sig == signal.SIGTERM else 0.5):
            code = _say(1, f"Error response from daemon: No such container: {name}")
            continue
        print(name)
    return code


def rm(args: list[str]) -> int:
    code, force = 0, "-f" in args or "--force" in args
    for name in (a for a in args if not a.startswith("-")):
        record = _record(name)
        if not record.exists():
            code = _say(1, f"Error response from daemon: No such container: {name}")
            continue
        if _running(name) and not force:
            code = _say(1, f"Error response from daemon: cannot remove container \"/{name}\": container is running: "
                           "stop the container before removing or force remove")
            continue
        _signal_container(name, signal.SIGKILL, 5)
        record.unlink(missing_ok=True)
        print(name)
    return code


def _render(template: str, name: str) -> str | None:
    """One `docker ps --format` line for container `name`: {{.Names}} and {{.State}} (running, or exited once its
    process ended, as Docker's raw state string), else None for a placeholder this fake does not know."""
    import re

    fields = {"Names": name, "State": "running" if _running(name) else "exited"}
    unknown = [f for f in re.findall(r"{{\s*\.(\w+)\s*}}", template) if f not in fields]
    if unknown:
        return None
    return re.sub(r"{{\s*\.(\w+)\s*}}", lambda m: fields[m.group(1)], template)


def ps(args: list[str]) -> int:
    folder = STATE / "containers"
    every = "-a" in args or "--all" in args
    template = args[args.index("--format") + 1] if "--format" in args[:-1] else "{{.Names}}"
    for record in sorted(folder.iterdir()) if folder.exists() else []:
        if every or _running(record.name):
            line = _render(template, record.name)
            if line is None:
                return _say(1, f"template: {template!r}: fake docker knows only {{{{.Names}}}} and {{{{.State}}}}")
            print(line)
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
    if verb == "stop":
        return stop(rest)
    if verb == "kill":
        return stop(rest, signal.SIGKILL)
    if verb == "ps":
        return ps(rest)
    return _say(1, f"fake docker: `docker {' '.join(argv)}` is not one of the commands the series uses")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
