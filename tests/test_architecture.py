"""The import layers: protocols -> conditions -> lca, and lca free of inspect_ai."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
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
