"""Build Triton's own PyTorch (and ONNX Runtime) backends from source for the local server, cached by versions.

`python -m helpers.native_backends` (run by `./tutorial setup`) builds each backend into the local server's backend
directory, beside its Python backend. Sources: GitHub at the release branch that matches the server, or the folder
$TRITON_SOURCE_DIR names (`<repo>-<branch>.tar.gz` archives or unpacked `<repo>/` folders) on machines without
GitHub. A CPU build where there is no CUDA compiler or no CUDA torch; a CUDA build where both are present.
When something is missing, it says what and the server keeps serving that format with the Python stand-in.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .runtime import BUILD_STAMP, LocalTriton, find_local_triton

GITHUB = "https://github.com/triton-inference-server"
STAMP = BUILD_STAMP
# The server's release branch: Triton 2.51 shipped as NGC 24.10; one minor version a month since.
_FIRST = (51, 2024, 10)


class BuildUnavailable(RuntimeError):
    """A backend cannot be built here; the message says what is missing and what to do."""


def release_branch(server_version: str) -> str:
    """The source branch (rYY.MM) of the triton-inference-server repositories that matches a server version."""
    m = re.fullmatch(r"2\.(\d+)\.\d+", server_version)
    if not m:
        raise ValueError(f"server version must look like '2.51.0'; got {server_version!r}")
    months = int(m.group(1)) - _FIRST[0] + _FIRST[1] * 12 + _FIRST[2] - 1
    return f"r{months // 12 % 100:02d}.{months % 12 + 1:02d}"


def server_version(local: LocalTriton) -> str:
    """The version the server itself reports (started once on an empty repository)."""
    from .runtime import RuntimeChoice
    from .server import TritonServer

    with tempfile.TemporaryDirectory(prefix="triton-version-") as empty:
        with TritonServer(empty, RuntimeChoice("local", "version probe", local), poll_secs=None,
                          startup_timeout=60, quiet=True) as server:
            return server.version


def server_library(local: LocalTriton) -> Path:
    """The libtritonserver the server loads (wheels rename it with a hash suffix): ldd's answer for the binary, else
    the library folders beside it (a wrapper script, as in some bundles, is no dynamic executable)."""
    env = {**os.environ, **local.env}
    out = subprocess.run(["ldd", str(local.binary.resolve())], capture_output=True, text=True, env=env).stdout
    for line in out.splitlines():
        m = re.match(r"\s*(libtritonserver\S*)\s+=>\s+(\S+)", line)
        if m and m.group(2) != "not":
            return Path(m.group(2))
    root = local.binary.resolve().parent.parent
    folders = [root / "lib", root / "triton" / "lib", local.backend_dir.parent / "lib",
               *[Path(p) for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]]
    for folder in folders:
        found = sorted(folder.glob("libtritonserver*.so*")) if folder.is_dir() else []
        if found:
            return found[0]
    raise BuildUnavailable(f"could not find the libtritonserver that {local.binary} loads; looked with ldd and in "
                           f"{[str(f) for f in folders]}")


def _loaded_library_dir(prefix: str) -> Path | None:
    """The folder of a shared library this process has loaded (from /proc/self/maps), e.g. torch's libcudart."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        return None
    for line in maps.read_text().splitlines():
        path = line.split()[-1]
        if Path(path).name.startswith(prefix):
            return Path(path).parent
    return None


@dataclass
class Toolchain:
    """What a build here uses: compilers, CUDA, torch."""

    cmake: str
    generator: list[str]
    cxx: str
    nvcc: str | None
    torch_version: str
    torch_cuda: str | None
    torch_dir: Path

    gpu: bool = False

    @property
    def cuda(self) -> bool:
        """Whether the build targets CUDA: needs nvcc, a CUDA build of torch and a GPU that torch sees."""
        return bool(self.nvcc and self.torch_cuda and self.gpu)


def find_toolchain() -> Toolchain:
    """cmake (3.19+), a C++20 compiler, nvcc if any, and the torch this Python imports."""
    cmake = shutil.which("cmake")
    if not cmake:
        raise BuildUnavailable("no cmake on PATH (Debian/Ubuntu: apt-get install cmake; or pip install cmake)")
    version = re.search(r"(\d+)\.(\d+)", subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout)
    if not version or (int(version.group(1)), int(version.group(2))) < (3, 19):
        raise BuildUnavailable(f"cmake 3.19 or newer is needed; {cmake} is {version.group(0) if version else '?'}")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise BuildUnavailable("no C++ compiler (g++) on PATH (Debian/Ubuntu: apt-get install g++)")
    ninja = shutil.which("ninja")
    nvcc = shutil.which("nvcc") or next((str(p) for p in [Path("/usr/local/cuda/bin/nvcc")] if p.exists()), None)
    import torch

    return Toolchain(cmake, ["-G", "Ninja"] if ninja else [], cxx, nvcc, torch.__version__.split("+")[0],
                     torch.version.cuda, Path(torch.__file__).parent, torch.cuda.is_available())


@dataclass
class Sources:
    """Unpacked source trees of the triton-inference-server repositories at one branch."""

    branch: str
    root: Path
    origin: str = ""
    dirs: dict[str, Path] = field(default_factory=dict)


def fetch_sources(repos: list[str], branch: str, cache: Path) -> Sources:
    """Source trees from $TRITON_SOURCE_DIR (archives or folders), else a shallow clone from GitHub."""
    root = cache / "src" / branch
    root.mkdir(parents=True, exist_ok=True)
    given = os.environ.get("TRITON_SOURCE_DIR")
    sources = Sources(branch, root)
    for repo in repos:
        target = root / repo
        if (target / "CMakeLists.txt").exists():
            sources.dirs[repo] = target
            continue
        if given:
            archive, folder = Path(given) / f"{repo}-{branch}.tar.gz", Path(given) / repo
            if folder.is_dir():
                shutil.copytree(folder, target)
            elif archive.is_file():
                with tarfile.open(archive) as tar:
                    tar.extractall(root, filter="data")
                if not target.is_dir() and (root / f"{repo}-{branch}").is_dir():  # GitHub's own archive layout
                    (root / f"{repo}-{branch}").rename(target)
                if not target.is_dir():
                    raise BuildUnavailable(f"{archive} did not unpack to a folder named {repo} (or {repo}-{branch})")
            else:
                raise BuildUnavailable(f"TRITON_SOURCE_DIR={given} has neither {archive.name} nor {repo}/")
            sources.origin = f"TRITON_SOURCE_DIR ({given})"
        else:
            if not shutil.which("git"):
                raise BuildUnavailable("no git to fetch Triton sources, and TRITON_SOURCE_DIR is not set")
            done = subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", branch,
                                   f"{GITHUB}/{repo}.git", str(target)], capture_output=True, text=True,
                                  timeout=300)
            if done.returncode != 0:
                shutil.rmtree(target, ignore_errors=True)
                raise BuildUnavailable(f"could not clone {GITHUB}/{repo} at {branch} ({done.stderr.strip()}); "
                                       "without GitHub, set TRITON_SOURCE_DIR to a folder with the source archives")
            sources.origin = f"{GITHUB} at {branch}"
        sources.dirs[repo] = target
    return sources


def rapidjson_include(cache: Path) -> Path:
    """RapidJSON's headers: the copy in the python-rapidjson source package (PyPI), or $RAPIDJSON_INCLUDE_DIR."""
    if os.environ.get("RAPIDJSON_INCLUDE_DIR"):
        return Path(os.environ["RAPIDJSON_INCLUDE_DIR"])
    target = cache / "rapidjson" / "include"
    if (target / "rapidjson" / "document.h").exists():
        return target
    given = os.environ.get("TRITON_SOURCE_DIR")
    archives = sorted(Path(given).glob("python_rapidjson-*.tar.gz")) if given else []
    with tempfile.TemporaryDirectory() as tmp:
        if not archives:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                                   "-d", tmp, "python-rapidjson"], capture_output=True, text=True, timeout=300)
            archives = sorted(Path(tmp).glob("python_rapidjson-*.tar.gz"))
            if not archives:
                raise BuildUnavailable("RapidJSON headers not found: pip could not download python-rapidjson's "
                                       f"source ({done.stderr.strip()[-300:]}); set RAPIDJSON_INCLUDE_DIR")
        with tarfile.open(archives[0]) as tar:
            members = [m for m in tar.getmembers() if "/rapidjson/include/rapidjson/" in m.name]
            tar.extractall(tmp, members=members, filter="data")
        found = next(Path(tmp).glob("*/rapidjson/include"))
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(found, target)
    return target


def _rapidjson_config(folder: Path, include: Path) -> Path:
    """A RapidJSONConfig.cmake for find_package(RapidJSON CONFIG) over a plain header folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "RapidJSONConfig.cmake").write_text(
        f'set(RAPIDJSON_INCLUDE_DIRS "{include}")\nset(RapidJSON_INCLUDE_DIRS "{include}")\n')
    return folder


# Included after the top-level project() line, so that the sources stay as released:
# - common's unit tests link GTest::gtest (downloaded at configure time upstream); only the backend library is
#   built here, so an empty stand-in target lets the project configure without googletest;
# - the backend repository's CUDA kernel library lists architectures down to sm_53, which CUDA 13 no longer
#   compiles: after configuration (cmake_language DEFER) it is set to the GPUs of this machine.
_PROJECT_INCLUDE = """\
if(NOT TARGET GTest::gtest)
  add_library(GTest::gtest INTERFACE IMPORTED GLOBAL)
  add_library(GTest::gtest_main INTERFACE IMPORTED GLOBAL)
endif()
"""
_CUDA_ARCH_FIX = """\
cmake_language(DEFER DIRECTORY ${{CMAKE_SOURCE_DIR}} CALL
  set_target_properties kernel_library_new PROPERTIES CUDA_ARCHITECTURES "{archs}")
"""


@dataclass
class BackendBuild:
    """One backend to build: its repository, library name, CMake options, what it links at run time, what a build
    depends on (its cache key) and whether it is a CUDA build."""

    name: str
    repo: str
    project: str
    options: dict[str, str]
    runtime_lib_dirs: list[Path]
    key: dict[str, str] = field(default_factory=dict)
    cuda: bool = False
    cxx_flags: str = ""
    # CMake options that need work (a download) only when the backend is really built, not for the cache check
    build_options: Callable[[], dict[str, str]] = dict


def pytorch_build(tools: Toolchain, cache: Path) -> BackendBuild:
    """Triton's PyTorch (libtorch) backend against the torch this Python imports."""
    include = tools.torch_dir / "include"
    options = {
        "TRITON_PYTORCH_INCLUDE_PATHS": f"{include};{include / 'torch' / 'csrc' / 'api' / 'include'}",
        "TRITON_PYTORCH_LIB_PATHS": str(tools.torch_dir / "lib"),
        "TRITON_PYTORCH_ENABLE_TORCHVISION": "OFF",  # the PyPI torchvision has no C++ library
        "TRITON_PYTORCH_ENABLE_TORCHTRT": "OFF",
    }
    lib_dirs = [tools.torch_dir / "lib"]
    if tools.cuda:  # the CUDA runtime torch itself loaded, so that the backend and torch share one
        import torch

        torch.zeros(1, device="cuda")
        lib_dirs += [d for d in [_loaded_library_dir("libcudart")] if d]
    return BackendBuild("pytorch", "pytorch_backend", "tritonpytorchbackend", options, lib_dirs,
                        {"torch": tools.torch_version}, cuda=tools.cuda)


ORT_GITHUB = "https://raw.githubusercontent.com/microsoft/onnxruntime"


def onnxruntime_library() -> tuple[str, Path]:
    """The version of the onnxruntime wheel this Python imports and the libonnxruntime.so.<version> it carries."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise BuildUnavailable(f"the onnxruntime package is not installed here ({exc}); it is pinned in "
                               "requirements.txt") from None
    capi = Path(onnxruntime.__file__).parent / "capi"
    found = sorted(capi.glob("libonnxruntime.so*"))
    if not found:
        raise BuildUnavailable(f"no libonnxruntime.so* in {capi}: this onnxruntime {onnxruntime.__version__} wheel "
                               "carries no shared library for the C API")
    return onnxruntime.__version__.split("+")[0], found[-1]


def _header_api_version(folder: Path) -> int:
    """ORT_API_VERSION of the onnxruntime_c_api.h in `folder`."""
    m = re.search(r"#define ORT_API_VERSION (\d+)", (folder / "onnxruntime_c_api.h").read_text(errors="replace"))
    if not m:
        raise BuildUnavailable(f"{folder / 'onnxruntime_c_api.h'} defines no ORT_API_VERSION")
    return int(m.group(1))


def onnxruntime_headers(cache: Path, version: str) -> Path:
    """ONNX Runtime's C API headers for the wheel's `version`: an `onnxruntime-headers-*.tar.gz` in
    $TRITON_SOURCE_DIR whose API version the library has (the C API only grows), else the headers of the tag
    v<version> of ONNX Runtime's repository on GitHub."""
    minor = int(version.split(".")[1])
    given = os.environ.get("TRITON_SOURCE_DIR")
    for archive in sorted(Path(given).glob("onnxruntime-headers-*.tar.gz")) if given else []:
        target = cache / "onnxruntime-headers" / archive.name.removesuffix(".tar.gz")
        if not (target / "include" / "onnxruntime_c_api.h").exists():
            with tempfile.TemporaryDirectory() as tmp:
                with tarfile.open(archive) as tar:
                    tar.extractall(tmp, filter="data")
                found = next(Path(tmp).rglob("onnxruntime_c_api.h"), None)
                if found is None:
                    raise BuildUnavailable(f"{archive} holds no onnxruntime_c_api.h")
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(found.parent, target / "include")
        api = _header_api_version(target / "include")
        if api <= minor:
            return target / "include"
        print(f"onnxruntime backend: {archive.name} is C API version {api}, newer than the library's {minor}; "
              "not used")
    target = cache / "onnxruntime-headers" / f"v{version}" / "include"
    if (target / "onnxruntime_c_api.h").exists():
        return target
    import urllib.request

    fetched: dict[str, bytes] = {}
    wanted = ["onnxruntime_c_api.h"]
    while wanted:  # the header and the headers it includes with quotes, from the same folder
        name = wanted.pop()
        url = f"{ORT_GITHUB}/v{version}/include/onnxruntime/core/session/{name}"
        try:
            with urllib.request.urlopen(url, timeout=60) as reply:
                fetched[name] = reply.read()
        except OSError as exc:
            raise BuildUnavailable(f"ONNX Runtime's C API header is needed: could not download {url} ({exc}); "
                                   "without GitHub, put an onnxruntime-headers-<version>.tar.gz in "
                                   "TRITON_SOURCE_DIR") from None
        for included in re.findall(r'#include "([^"/]+)"', fetched[name].decode(errors="replace")):
            if included not in fetched and included not in wanted:
                wanted.append(included)
    target.mkdir(parents=True, exist_ok=True)
    for name, data in fetched.items():
        (target / name).write_bytes(data)
    return target


def onnxruntime_build(tools: Toolchain, cache: Path) -> BackendBuild:
    """Triton's ONNX Runtime backend (CPU execution provider) against the onnxruntime wheel's own library."""
    version, library = onnxruntime_library()
    # The build looks for a plain `libonnxruntime.so` and the backend then needs the library's soname
    # (libonnxruntime.so.1); the wheel has only the fully versioned file. Links in a folder of ours name it both ways.
    link_dir = cache / "onnxruntime-lib" / version

    def build_options() -> dict[str, str]:
        link_dir.mkdir(parents=True, exist_ok=True)
        for name in {"libonnxruntime.so", f"libonnxruntime.so.{version.split('.')[0]}", library.name}:
            link = link_dir / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(library)
        return {"TRITON_ONNXRUNTIME_INCLUDE_PATHS": str(onnxruntime_headers(cache, version)),
                "TRITON_ONNXRUNTIME_LIB_PATHS": str(link_dir)}

    options = {"TRITON_ENABLE_ONNXRUNTIME_TENSORRT": "OFF", "TRITON_ENABLE_ONNXRUNTIME_OPENVINO": "OFF",
               "TRITON_MIN_CXX_STANDARD": "17"}
    # gcc 13 stops the r24.10 sources at -Werror=maybe-uninitialized (onnxruntime.cc); older gcc does not warn.
    return BackendBuild("onnxruntime", "onnxruntime_backend", "tritononnxruntimebackend", options, [link_dir],
                        {"onnxruntime": version}, cuda=False, cxx_flags="-Wno-error=maybe-uninitialized",
                        build_options=build_options)


BUILDERS = {"pytorch": pytorch_build, "onnxruntime": onnxruntime_build}


def cuda_archs() -> str:
    """CUDA architectures to compile for: the visible GPUs' compute capabilities (torch), else 80;90."""
    import torch

    if torch.cuda.is_available():
        caps = sorted({"%d%d" % torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
        return ";".join(caps)
    return "80;90"


def build_key(backend: str, version: str, tools: Toolchain, spec: BackendBuild) -> dict[str, str]:
    """What a built backend depends on; a change in any of these rebuilds it."""
    return {"backend": backend, "server": version, **spec.key,
            "cuda": tools.torch_cuda if spec.cuda else "cpu", "python": sysconfig.get_python_version()}


def _run_with_progress(cmd: list[str], log, label: str) -> None:
    """Run a build command, its output to `log`; show ninja/make's [n/N] or [ n%] steps as a progress bar."""
    from tqdm.auto import tqdm

    bar = tqdm(total=100, desc=label, unit="%", leave=True, bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        log.write(line)
        m = re.match(r"\[(\d+)/(\d+)\]", line) or re.match(r"\[\s*(\d+)%\]", line)
        if m:
            done = int(m.group(1)) * 100 // (int(m.group(2)) if m.lastindex == 2 else 100)
            bar.update(max(0, done - bar.n))
    bar.close()
    if proc.wait() != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)


def build_backend(backend: str, local: LocalTriton, *, cache: Path, force: bool = False,
                  version: str | None = None, tools: Toolchain | None = None) -> Path:
    """Build one backend into the server's backend directory; returns its folder. Skipped when already built."""
    if backend not in BUILDERS:
        raise ValueError(f"backend must be one of {sorted(BUILDERS)}; got {backend!r}")
    tools = tools or find_toolchain()
    version = version or server_version(local)
    spec = BUILDERS[backend](tools, cache)
    key = build_key(backend, version, tools, spec)
    dest = local.backend_dir / backend
    stamp = dest / STAMP
    if not force and stamp.exists() and json.loads(stamp.read_text()).get("key") == key:
        print(f"{backend} backend: already built for {key}")
        return dest
    branch = release_branch(version)
    sources = fetch_sources(["common", "core", "backend", spec.repo], branch, cache)
    include = rapidjson_include(cache)
    build_dir = cache / "build" / f"{backend}-{key['cuda']}"
    shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir(parents=True)
    rpath = ":".join(str(p) for p in spec.runtime_lib_dirs)
    options = {
        "CMAKE_BUILD_TYPE": "Release",
        "CMAKE_CXX_COMPILER": tools.cxx,
        "TRITON_MIN_CXX_STANDARD": "20",  # torch's headers need C++20
        "TRITON_ENABLE_GPU": "ON" if spec.cuda else "OFF",
        "TRITON_ENABLE_STATS": "ON",
        "FETCHCONTENT_FULLY_DISCONNECTED": "ON",
        "FETCHCONTENT_SOURCE_DIR_REPO-COMMON": str(sources.dirs["common"]),
        "FETCHCONTENT_SOURCE_DIR_REPO-CORE": str(sources.dirs["core"]),
        "FETCHCONTENT_SOURCE_DIR_REPO-BACKEND": str(sources.dirs["backend"]),
        "RapidJSON_DIR": str(_rapidjson_config(build_dir / "rapidjson-cmake", include)),
        "Python3_INCLUDE_DIR": sysconfig.get_paths()["include"],
        # find the framework's libraries where this environment has them, and the server library beside us
        "CMAKE_SHARED_LINKER_FLAGS": f"-Wl,-rpath,{rpath}",
        **spec.options,
        **spec.build_options(),
    }
    # RapidJSON's headers trip newer compilers' warnings under common's -Werror: include them as system headers.
    options["CMAKE_CXX_FLAGS"] = f"-isystem {include} {spec.cxx_flags}".strip()
    include_file = build_dir / "project-include.cmake"
    include_file.write_text(_PROJECT_INCLUDE + (_CUDA_ARCH_FIX.format(archs=cuda_archs()) if spec.cuda else ""))
    options[f"CMAKE_PROJECT_{spec.project}_INCLUDE"] = str(include_file)
    if spec.cuda:
        options["CMAKE_CUDA_COMPILER"] = tools.nvcc
        options["CMAKE_CUDA_ARCHITECTURES"] = cuda_archs()
    log_path = build_dir / "build.log"
    against = ", ".join(f"{k} {v}" for k, v in spec.key.items())
    print(f"{backend} backend: building {'with CUDA ' + tools.torch_cuda if spec.cuda else 'for CPU'} from "
          f"{spec.repo} {branch} ({sources.origin or 'cached sources'}); {against}; log {log_path}")
    with open(log_path, "w") as log:
        try:
            _run_with_progress([tools.cmake, "-S", str(sources.dirs[spec.repo]), "-B", str(build_dir / "out"),
                                *tools.generator, *[f"-D{k}={v}" for k, v in options.items()]], log, "  configure")
            jobs = str(os.cpu_count() or 2)
            _run_with_progress([tools.cmake, "--build", str(build_dir / "out"), "--target",
                                f"triton-{backend}-backend", "-j", jobs], log, "  compile")
        except subprocess.CalledProcessError:
            log.flush()
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-25:])
            raise BuildUnavailable(f"the {backend} backend did not build; last lines of {log_path}:\n{tail}") from None
    built = next((build_dir / "out").glob(f"libtriton_{backend}.so"))
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copy2(built, dest / built.name)
    # The backend links `libtritonserver.so`; the server's copy may carry another name (wheels add a hash).
    (dest / "libtritonserver.so").symlink_to(server_library(local))
    stamp.write_text(json.dumps({"key": key, "sources": sources.origin, "branch": branch,
                                 "toolchain": {k: str(v) for k, v in asdict(tools).items()}}, indent=1))
    print(f"{backend} backend: installed {dest}")
    return dest


def version_and_toolchain(local: LocalTriton) -> tuple[str, Toolchain]:
    """server_version and find_toolchain at once: the server starts for its version while torch is imported (each
    about 1.5 s here, and every `./tutorial` command checks them)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # a toolchain error still waits here for the probe's server to stop
        probe = pool.submit(server_version, local)
        tools = find_toolchain()
        return probe.result(), tools


def main(argv: list[str] | None = None) -> int:
    """Build the requested backends; a backend that cannot be built here is reported, not fatal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backends", nargs="*", default=list(BUILDERS), help=f"default: {' '.join(BUILDERS)}")
    parser.add_argument("--cache", type=Path, default=Path(sys.prefix) / "opt" / "triton-backend-build")
    parser.add_argument("--force", action="store_true", help="rebuild even when the cached build matches")
    parser.add_argument("--strict", action="store_true", help="exit non-zero when a backend cannot be built")
    args = parser.parse_args(argv)
    local = find_local_triton()
    if local is None:
        print("native backends: no local Triton server found; nothing to build")
        return 1 if args.strict else 0
    failed = []
    try:
        (version, tools), missing = version_and_toolchain(local), None
    except BuildUnavailable as exc:  # no toolchain: no backend can be built
        version, tools, missing = None, None, exc
    for backend in args.backends:
        try:
            if missing is not None:
                raise missing
            build_backend(backend, local, cache=args.cache, force=args.force, version=version, tools=tools)
        except BuildUnavailable as exc:
            failed.append(backend)
            print(f"{backend} backend: NOT built: {exc}\n  -> models of this format are served by the Python "
                  "stand-in (labelled as such in every served list)", file=sys.stderr)
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
