"""A small guardian process between the notebook kernel and a server: nothing it started outlives it.

`python helpers/reaper.py [--parent PID] [--on-exit CMD] -- COMMAND...` (a plain script: it starts in
milliseconds, without importing the helpers package) runs COMMAND in this process group and stays its parent.
It stops the whole group (the server and every process the server started, such as Triton's Python-backend stubs,
which ignore SIGTERM and are left behind when Triton exits in the middle of loading a model) when:
  * it receives SIGTERM (a normal stop): SIGTERM to COMMAND, then SIGKILL to whatever is left after --grace seconds;
  * the process that started it dies (a killed kernel), checked every 0.05 s;
  * COMMAND exits on its own: the rest of the group is killed at once.
Then it runs --on-exit (e.g. `docker rm -f NAME`, for a container the Docker daemon would keep) and exits with
COMMAND's status. SIGINT is ignored: a Ctrl-C in the notebook interrupts the kernel, which then stops the server.
A killed run (COMMAND ended by a signal, or killed by this process) cannot remove its shared-memory regions:
perf_analyzer's system-shared-memory inputs and outputs, the Python backend's triton_python_backend_shm_region_*;
with --ipc=host a container's are this host's /dev/shm. So after a killed run, the regions of /dev/shm that appeared
during it, belong to this user and no process here maps or holds open are removed.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time


def _group_alive(pgid: int) -> bool:
    """Whether any process other than this one is still in the process group."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _kill_group(pgid: int) -> None:
    """SIGKILL every other member of the group, for up to 5 s."""
    deadline = time.monotonic() + 5
    while _group_alive(pgid) and time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    if os.getpgid(int(entry)) == pgid:
                        os.kill(int(entry), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.05)


SHM_DIR = "/dev/shm"


def _own_shm() -> set[str]:
    """Names of this user's entries in /dev/shm."""
    try:
        entries = os.listdir(SHM_DIR)
    except OSError:
        return set()
    own = set()
    for name in entries:
        try:
            if os.stat(os.path.join(SHM_DIR, name), follow_symlinks=False).st_uid == os.getuid():
                own.add(name)
        except OSError:
            continue
    return own


def _shm_in_use() -> set[str]:
    """Names in /dev/shm that a process this user can inspect maps or holds open."""
    used = set()
    prefix = SHM_DIR + "/"
    for entry in (e for e in os.listdir("/proc") if e.isdigit()):
        try:
            with open(f"/proc/{entry}/maps") as maps:
                for line in maps:
                    path = line.rstrip("\n").split(maxsplit=5)[-1]
                    if path.startswith(prefix):
                        used.add(path[len(prefix):].removesuffix(" (deleted)"))
            for fd in os.listdir(f"/proc/{entry}/fd"):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                if target.startswith(prefix):
                    used.add(target[len(prefix):].removesuffix(" (deleted)"))
        except OSError:
            continue
    return used


def remove_orphaned_shm(before: set[str]) -> list[str]:
    """Remove this user's /dev/shm regions that are not in `before` and that no process maps or holds open."""
    removed = []
    for name in sorted(_own_shm() - before - _shm_in_use()):
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            removed.append(name)
        except OSError:
            continue
    return removed


def main(argv: list[str] | None = None) -> int:
    """Run the command under guard; return its exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--on-exit", default="", help="a command to run after the group is gone")
    parser.add_argument("--grace", type=float, default=15.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("--parent", type=int, default=0, help="pid whose death stops the group (default: our parent)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("a command to run is required after --")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # given by the starter: it may already be gone by the time this process reads os.getppid()
    parent, pgid = args.parent or os.getppid(), os.getpgid(0)
    stopping, forced = {"at": None}, False  # forced: the kernel died, or COMMAND outlived the grace
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(at=stopping["at"] or time.monotonic()))
    shm_before = _own_shm()
    child = subprocess.Popen(command, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    sent = False
    while child.poll() is None:
        if os.getppid() != parent and stopping["at"] is None:  # the kernel is gone
            stopping["at"] = time.monotonic() - args.grace + 3  # a short grace: nobody waits for us
            forced = True
        if stopping["at"] is not None:
            if not sent:
                child.terminate()
                sent = True
            if time.monotonic() - stopping["at"] > args.grace:
                forced = True
                break
        time.sleep(0.05)  # the server's exit is passed on within 50 ms
    _kill_group(pgid)
    code = child.wait()
    if args.on_exit:
        subprocess.run(shlex.split(args.on_exit), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # killed: by a signal (a docker CLI: its container's process, exit 128 + signal), or by this process's SIGKILL
    if code < 0 or code > 128 or forced:
        removed = remove_orphaned_shm(shm_before)
        if removed:
            print(f"reaper: removed the killed run's shared-memory regions {removed} from {SHM_DIR}", file=sys.stderr)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
