"""The benchmark registry: every module that exports ``BENCHMARK`` is one ``lca bench`` subcommand, so adding a
benchmark is adding a module and the command line needs no edit. The modules are the top-level ones of
``protocols.bench`` and, for a protocol's own substrate-level bench, ``bench.py`` in its folder
(``protocols/evals/<name>/bench.py``), so a reader of one protocol folder sees the whole protocol.

Discovery imports each of those modules (helper packages such as ``protocols.bench.index`` are skipped), so a
benchmark module keeps its heavy imports (numpy, torch, faiss, inspect_ai) inside its functions, and a protocol
folder holding a bench keeps its ``__init__`` free of the task (which imports inspect_ai).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from functools import lru_cache

from protocols.evals.benchmark import Benchmark
from protocols.evals.registry import REGISTRY, ProtocolRegistry

PACKAGE = "protocols.bench"
PROTOCOL_BENCH = "bench"  # the module of a protocol folder that holds the protocol's own bench


def protocol_bench_modules(registry: ProtocolRegistry = REGISTRY) -> list[str]:
    """The ``bench`` module of every protocol folder that holds one, by protocol name."""
    return [
        f"{registry.package}.{name}.{PROTOCOL_BENCH}"
        for name, folder in registry.folders().items()
        if (folder / f"{PROTOCOL_BENCH}.py").is_file()
    ]


def discover(package: str = PACKAGE, *, also: Iterable[str] = ()) -> dict[str, Benchmark]:
    """Every ``BENCHMARK`` exported by a top-level module of ``package`` or by one of the modules ``also`` names, by
    name, in name order.

    Two modules exporting the same name are refused (one would silently shadow the other), and so is a
    ``BENCHMARK`` that is not a ``Benchmark``."""
    root = importlib.import_module(package)
    modules = [
        f"{package}.{info.name}"
        for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name)
        if not (info.ispkg or info.name.startswith("_") or info.name == "registry")
    ]
    found: dict[str, tuple[Benchmark, str]] = {}
    for module_name in [*modules, *also]:
        exported = getattr(importlib.import_module(module_name), "BENCHMARK", None)
        if exported is None:
            continue
        if not isinstance(exported, Benchmark):
            raise TypeError(f"{module_name}.BENCHMARK is a {type(exported).__name__}, not a Benchmark")
        if exported.name in found:
            raise ValueError(
                f"benchmark {exported.name!r} is exported by both {found[exported.name][1]} and {module_name}"
            )
        found[exported.name] = (exported, module_name)
    return {name: found[name][0] for name in sorted(found)}


@lru_cache(maxsize=1)
def _registered() -> dict[str, Benchmark]:
    return discover(PACKAGE, also=protocol_bench_modules())


def available_benchmarks() -> list[str]:
    """The names ``lca bench`` accepts, sorted."""
    return list(_registered())


def benchmark(name: str) -> Benchmark:
    """The benchmark called ``name``; an unknown name is refused with the list of known ones."""
    registered = _registered()
    if name not in registered:
        raise LookupError(f"unknown benchmark {name!r}; known: {', '.join(registered)}")
    return registered[name]
