"""What a study run records about itself (``run.json``): enough provenance to reproduce it from its logs.

A third party rerunning a study needs more than the logs' scores: the exact document (its sha256 and lock),
the code revision, the model files (a GGUF's sha256, not only its name), the embedder, the datasets and
whether they were the real files or the project's fixtures, the package versions and the machine. This
module gathers those; ``protocols.study.runner`` writes them. The layout of a run directory is the interface
the report reads (docs/preregistration.md, "Running a study").
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from lca.fileio import atomic_write_bytes
from lca.generators import default_gguf_path
from protocols.providers.models import DEFAULT_NAME, PROVIDER, is_local, resolve_model_path

RUN_FILE = "run.json"
LATEST_FILE = "LATEST"
EXPLORATORY_SUFFIX = "-exploratory"
GGUF_CACHE_FILE = ".gguf-sha256.json"  # in the studies folder: path + mtime + size -> sha256
PACKAGES = (
    "inspect-ai",
    "sentence-transformers",
    "faiss-cpu",
    "bm25s",
    "llama-cpp-python",
    "statsmodels",
    "krippendorff",
    "scipy",
    "numpy",
    "torch",
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def run_id_for(moment: datetime, exploratory: bool) -> str:
    """``YYYYmmddTHHMMSS`` in UTC, with ``-exploratory`` when the run is not confirmatory."""
    return moment.strftime("%Y%m%dT%H%M%S") + (EXPLORATORY_SUFFIX if exploratory else "")


def new_run_dir(study_root: Path, moment: datetime, exploratory: bool) -> tuple[str, Path]:
    """A fresh run directory under ``study_root``; a second run in the same second gets ``-2``, ``-3``..."""
    base = run_id_for(moment, exploratory)
    run_id, n = base, 1
    while (study_root / run_id).exists():
        n += 1
        run_id = f"{base}-{n}"
    path = study_root / run_id
    path.mkdir(parents=True)
    return run_id, path


def json_safe(value: Any) -> Any:
    """Plain JSON: non-finite floats become null (``json`` would write ``NaN``, which is not JSON), tuples lists,
    numpy scalars Python numbers."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalar
        try:
            value = value.item()
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    text = json.dumps(json_safe(data), indent=2, ensure_ascii=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def write_latest(study_root: Path, run_id: str) -> None:
    atomic_write_bytes(study_root / LATEST_FILE, (run_id + "\n").encode("utf-8"))


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """Installed versions by distribution name; None for one that is not installed."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def platform_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "system": platform.system(),
    }


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached_sha256(path: Path, cache_file: Path) -> str:
    """The file's sha256, hashed once per (path, mtime, size) and kept in ``cache_file`` (a GGUF is large and
    rarely changes; a changed file has a new mtime or size and is hashed again)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = f"{path}|{stat.st_mtime_ns}|{stat.st_size}"
    try:
        cache = json.loads(cache_file.read_text(encoding="utf-8"))
        if not isinstance(cache, dict):
            cache = {}
    except (OSError, json.JSONDecodeError):
        cache = {}
    if isinstance(cache.get(key), str):
        return cache[key]
    digest = sha256_of(path)
    cache = {k: v for k, v in cache.items() if not k.startswith(f"{path}|")}
    cache[key] = digest
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(cache_file, (json.dumps(cache, indent=2) + "\n").encode("utf-8"))
    return digest


def model_files(models: Iterable[str], cache_file: Path) -> dict[str, str]:
    """The GGUF sha256 of every local (``lca-local/...``) model string; a hosted model is identified by its
    string alone (it is in ``models``)."""
    out: dict[str, str] = {}
    for model in dict.fromkeys(models):
        if not is_local(model):
            continue
        name = model[len(PROVIDER) + 1 :] if model.startswith(f"{PROVIDER}/") else model
        path = default_gguf_path() if name in ("", DEFAULT_NAME) else resolve_model_path(name)
        out[model] = cached_sha256(Path(path), cache_file)
    return out


def served_models(entries: Iterable[Mapping[str, Any]], raters: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per model string of the run, the model names its API answered with: from every task's logged model
    events (``protocols.harness.planning.served_models``) and from the raters' generators (their ``structured``
    counts keep the names of their schema calls). A hosted model is named by its string in ``models``; this
    says which model answered there (a server's alias, an Ollama tag, a vLLM served-model-name)."""
    served: dict[str, set[str]] = {}
    for entry in entries:
        for task in entry.get("tasks") or ():
            for model, names in (task.get("served_models") or {}).items():
                served.setdefault(model, set()).update(names)
    for key, generator in raters.items():
        model = key.split(":", 1)[1] if ":" in key else key
        names = getattr(getattr(generator, "structured", None), "served", None) or ()
        if names:
            served.setdefault(model, set()).update(names)
    return {model: sorted(names) for model, names in sorted(served.items())}


def use_embedder(name: str) -> str:
    """Make ``name`` (a study's ``embedder``) the embedder every condition's store is built with in this process
    (``protocols.harness.solvers.use_embedder``); returns what it stands for (a name, or a folder's path)."""
    from protocols.harness.solvers import use_embedder as harness_use_embedder  # loads inspect

    return harness_use_embedder(name)


def embedder_id(name: str | None = None) -> str | None:
    """The id (model and weights) of the embedder the conditions use (``protocols.harness.tasks.embedder_id``),
    ``name`` when given (``use_embedder``); None when it cannot be named (the run still records that it could not)."""
    from protocols.harness.tasks import embedder_id as harness_embedder_id  # loads inspect

    try:
        if name is not None:
            use_embedder(name)
        return harness_embedder_id()
    except Exception:  # an embedder that cannot load fails the tasks themselves, with its own message
        return None
