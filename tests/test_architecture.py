"""The import layers: protocols -> conditions -> lca, and lca free of inspect_ai; no import cycle
anywhere (lazy imports included); no module too long to read; every module of lca and of protocols placed in a
layer of its package's contract."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("lca", "conditions", "protocols")
MAX_MODULE_LINES = 600
# Cycles being removed by someone else right now, each a set of module names; the lead empties this.
KNOWN_IMPORT_CYCLES: set[frozenset[str]] = set()
# Modules over MAX_MODULE_LINES that someone else is splitting right now; the lead empties this.
KNOWN_OVERSIZED_MODULES: set[str] = set()
FORBIDDEN = {
    "lca": {"conditions", "protocols", "inspect_ai"},
    "conditions": {"protocols"},
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layers_do_not_import_upwards(package):
    offenders = []
    for path in sorted((REPO / package).rglob("*.py")):
        bad = imported_roots(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(REPO)} imports {sorted(bad)}")
    assert not offenders, offenders


def test_the_scanner_would_catch_an_upward_import(tmp_path):
    sample = tmp_path / "bad.py"
    sample.write_text("def f():\n    from protocols.cli import main\n    import inspect_ai.model\n")
    assert imported_roots(sample) == {"protocols", "inspect_ai"}


def test_conditions_is_ours_not_the_pypi_package():
    import conditions

    assert Path(conditions.__file__).resolve().is_relative_to(REPO)


def test_import_linter_layers_contract():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed")
    result = subprocess.run([exe], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# ---- import cycles -------------------------------------------------------------------------------
def module_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Which of the packages' modules each module imports, from the source: every import statement
    counts, at module level or inside a function (lazy) or under TYPE_CHECKING. ``from p import n``
    points at the module ``p.n`` when there is one, else at ``p``; a package is its ``__init__``."""
    paths: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                for alias in node.names:
                    targets.add(known(f"{module}.{alias.name}") if f"{module}.{alias.name}" in paths else known(module))
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in order:
            continue
        work = [(start, iter(sorted(graph[start])))]
        order[start] = low[start] = len(order)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next((m for m in edges if m not in order or m in on_stack), None)
            if nxt is not None:
                if nxt in order:
                    low[node] = min(low[node], order[nxt])
                else:
                    order[nxt] = low[nxt] = len(order)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(frozenset(component))
    return cycles


def test_no_import_cycle_in_the_tree():
    cycles = set(import_cycles(module_graph(REPO, PACKAGES)))
    assert not cycles - KNOWN_IMPORT_CYCLES, sorted(sorted(c) for c in cycles - KNOWN_IMPORT_CYCLES)
    assert not KNOWN_IMPORT_CYCLES - cycles, f"gone, remove from KNOWN_IMPORT_CYCLES: {KNOWN_IMPORT_CYCLES - cycles}"


def test_the_cycle_check_would_catch_one_through_a_lazy_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def later():\n    from .. import c\n")  # lazy and relative
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n")
    (package / "d.py").write_text("import pkg.a\n")  # imports into it, not part of it
    graph = module_graph(tmp_path, ("pkg",))
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"}
    assert import_cycles(graph) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})]
    (package / "c.py").write_text("")
    assert import_cycles(module_graph(tmp_path, ("pkg",))) == []


# ---- module length ------------------------------------------------------------------------------
def long_modules(root: Path, packages: tuple[str, ...], limit: int) -> dict[str, int]:
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                out[str(path.relative_to(root))] = lines
    return out


def test_no_module_is_longer_than_the_limit():
    long = long_modules(REPO, PACKAGES, MAX_MODULE_LINES)
    unexpected = {path: n for path, n in long.items() if path not in KNOWN_OVERSIZED_MODULES}
    assert not unexpected, f"split these by responsibility (limit {MAX_MODULE_LINES} lines): {unexpected}"
    assert not KNOWN_OVERSIZED_MODULES - set(long), "short now, remove from KNOWN_OVERSIZED_MODULES"


def test_the_length_check_counts_lines(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 3)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 4)
    assert long_modules(tmp_path, ("pkg",), 3) == {"pkg/long.py": 4}


# ---- the layers inside lca and inside protocols -------------------------------------------------
@pytest.mark.parametrize("container", ["lca", "protocols"])
def test_every_module_is_placed_in_a_layer(container):
    """The layers contract only constrains the modules it names: a new module must be given a place."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("containers") == [container]]
    placed = {name.strip() for layer in contract["layers"] for name in layer.replace(":", "|").split("|")}
    modules = {p.stem for p in (REPO / container).glob("*.py") if p.stem != "__init__"} | {
        p.parent.name for p in (REPO / container).glob("*/__init__.py")
    }
    assert modules - placed == set(), f"add to the {container} layers contract in pyproject.toml: {modules - placed}"
    assert placed - modules == set(), f"no such {container} module: {placed - modules}"
