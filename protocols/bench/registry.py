"""The benchmark registry: every module of ``protocols.bench`` that exports ``BENCHMARK`` is one ``lca bench``
subcommand, so adding a benchmark is adding a module and the command line needs no edit.

Discovery imports each top-level module of the package (helper packages such as ``protocols.bench.index`` are
skipped), so a benchmark module keeps its heavy imports (numpy, torch, faiss) inside its functions.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

PACKAGE = "protocols.bench"
_NAME = re.compile(r"[a-z][a-z0-9-]*")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark as ``lca bench <name>`` runs it.

    ``help`` is the one-line argparse help of the subcommand (argparse expands it with ``%``, so a literal
    percent sign is written ``%%``); ``description`` is the longer text ``lca bench <name> --help`` shows.
    ``add_arguments`` adds the benchmark's options to its subparser; ``run`` takes the parsed arguments and
    returns the process exit code (0 on success, 2 for an unusable option or a missing input). A benchmark writes
    its run as a ``protocols.bench.result.BenchmarkResult`` through ``write_result``.
    """

    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"a benchmark name is lowercase letters, digits and '-', not {self.name!r}")

    def parser(self, prog: str | None = None) -> argparse.ArgumentParser:
        """A stand-alone parser with this benchmark's arguments (for tests and scripts)."""
        parser = argparse.ArgumentParser(prog=prog or f"lca bench {self.name}", description=self.description)
        self.add_arguments(parser)
        return parser


def discover(package: str = PACKAGE) -> dict[str, Benchmark]:
    """Every ``BENCHMARK`` exported by a top-level module of ``package``, by name, in name order.

    Two modules exporting the same name are refused (one would silently shadow the other), and so is a
    ``BENCHMARK`` that is not a ``Benchmark``."""
    root = importlib.import_module(package)
    found: dict[str, tuple[Benchmark, str]] = {}
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda i: i.name):
        if info.ispkg or info.name.startswith("_") or info.name == "registry":
            continue
        module_name = f"{package}.{info.name}"
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
    return discover(PACKAGE)


def available_benchmarks() -> list[str]:
    """The names ``lca bench`` accepts, sorted."""
    return list(_registered())


def benchmark(name: str) -> Benchmark:
    """The benchmark called ``name``; an unknown name is refused with the list of known ones."""
    registered = _registered()
    if name not in registered:
        raise LookupError(f"unknown benchmark {name!r}; known: {', '.join(registered)}")
    return registered[name]
