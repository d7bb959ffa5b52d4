"""Check a model repository in seconds, before any server starts: what Triton would refuse, named by model and field."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .repository import DEFAULT_FILENAME, ConfigError, ConfigMismatch, label_files, read_config, validate


class RepositoryError(ValueError):
    """A model repository Triton would refuse, or wait on forever; the message names the model and the field."""


def model_folders(repository: str | Path) -> list[Path]:
    """The model folders of a repository (sub-folders with a config.pbtxt)."""
    root = Path(repository)
    if not root.is_dir():
        raise RepositoryError(f"model repository must be a folder; {root} is not")
    return sorted(p for p in root.iterdir() if (p / "config.pbtxt").is_file())


def check_model(folder: Path) -> None:
    """Raise RepositoryError for the first problem of one model folder: config, name, versions, artifact."""
    try:
        config = read_config(folder)
    except ConfigError as exc:
        raise RepositoryError(str(exc)) from None
    if config.name and config.name != folder.name:
        raise RepositoryError(f"model folder '{folder.name}': config.pbtxt says name: \"{config.name}\"; Triton needs "
                              f"the name to equal the folder name (name: \"{folder.name}\") and would wait for it "
                              "forever")
    missing = [name for name in label_files(config) if not (folder / name).is_file()]
    if missing:
        raise RepositoryError(f"model '{folder.name}': an output's label_filename names {missing}, which Triton looks "
                              f"for beside config.pbtxt; {folder.name}/ has no such file")
    versions = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not versions:
        raise RepositoryError(f"model '{folder.name}': no version folder (expected {folder.name}/1/ holding the model)")
    if config.backend == "python" and not config.platform:
        missing = [v.name for v in versions if not (v / "model.py").is_file()]
        if missing:
            raise RepositoryError(f"model '{folder.name}': backend python needs model.py in version folder(s) {missing}")
        return
    filename = config.default_model_filename or DEFAULT_FILENAME.get(config.platform, "")
    if not filename:
        return  # a backend this series does not check (its own files, its own rules)
    artifact = versions[-1] / filename
    if not artifact.exists():
        found = sorted(p.name for p in versions[-1].iterdir())
        raise RepositoryError(f"model '{folder.name}': platform {config.platform} expects {artifact.relative_to(folder.parent)};"
                              f" version folder {versions[-1].name}/ holds {found or 'nothing'}")
    try:
        validate(config, artifact)
    except ConfigMismatch as exc:
        raise RepositoryError(str(exc)) from None
    except Exception as exc:  # the artifact itself cannot be read here
        if "tensorrt" in str(exc).lower():
            return  # TorchScript compiled by torch-tensorrt: only the server's PyTorch backend can load it
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RepositoryError(f"model '{folder.name}': {artifact.relative_to(folder.parent)} cannot be read as "
                              f"{config.platform}: {first}") from None


def check_repository(repository: str | Path, models: Sequence[str] | None = None) -> list[str]:
    """Check the models a server will load (all, or `models`); returns their names, raises at the first problem."""
    folders = model_folders(repository)
    names = [f.name for f in folders]
    if models is not None:
        unknown = [m for m in models if m not in names]
        if unknown:
            raise RepositoryError(f"models {unknown} are not in {repository}; it has {names}")
        folders = [f for f in folders if f.name in models]
    for folder in folders:
        check_model(folder)
    return [f.name for f in folders]
