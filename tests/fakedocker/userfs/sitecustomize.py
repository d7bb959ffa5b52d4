"""Test infrastructure (tests/fakedocker): what a user who is not root meets in files a root container wrote.

A container run without `--user` runs as root, and what it writes into a mounted host folder is owned by root: the
user cannot delete it, nor anything inside a folder it created, nor write to it. The test docker cannot chown (the
tests may run as root, who can delete anything), so it lists those paths in $FAKE_DOCKER_STATE/root-owned, and this
module, on PYTHONPATH of the processes that act as the user (the tests, the docker world's kernels), turns a delete,
rename or write of such a path into the PermissionError (EACCES) the kernel would raise, through a Python audit hook
(sys.addaudithook; events os.remove, os.rmdir, os.rename, open). Processes that are not Python are not affected.
"""
from __future__ import annotations

import errno
import os
import sys

_STATE = os.environ.get("FAKE_DOCKER_STATE")
_cache: dict[str, object] = {"mtime": None, "paths": frozenset()}


def _root_owned() -> frozenset[str]:
    """The paths the test docker recorded as written by a root container (re-read when the list changes)."""
    path = os.path.join(_STATE, "root-owned")
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return frozenset()
    if mtime != _cache["mtime"]:
        with open(path) as handle:
            _cache["paths"] = frozenset(line.rstrip("\n") for line in handle if line.strip())
        _cache["mtime"] = mtime
    return _cache["paths"]


def _full(path, dir_fd) -> str | None:
    """An absolute path for an audit event's (path, dir_fd)."""
    if isinstance(path, int):
        return None
    path = os.fsdecode(path)
    if dir_fd is not None and not os.path.isabs(path):
        try:
            base = os.readlink(f"/proc/self/fd/{dir_fd}")
        except OSError:
            return None
        path = os.path.join(base, path)
    return os.path.abspath(path)


def _refuse(path: str) -> None:
    raise PermissionError(errno.EACCES, "Permission denied (test docker: written by a container that ran as root)", path)


def _hook(event: str, args: tuple) -> None:
    if event in ("os.remove", "os.rmdir"):
        owned = _root_owned()
        path = _full(args[0], args[1]) if owned else None
        if path and (os.path.dirname(path) in owned):  # an entry of a root-owned folder
            _refuse(path)
    elif event == "os.rename":
        owned = _root_owned()
        path = _full(args[0], args[2]) if owned else None
        if path and (os.path.dirname(path) in owned or path in owned):
            _refuse(path)
    elif event == "open" and len(args) >= 3 and isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR):
        owned = _root_owned()
        path = _full(args[0], None) if owned else None
        if path and (path in owned or os.path.dirname(path) in owned):
            _refuse(path)


if _STATE and os.environ.get("FAKE_DOCKER_DAEMON") != "1":  # the daemon (the fake itself) is root
    sys.addaudithook(_hook)
