"""The protocol contract, for every registered protocol: valid metadata, a README with the required
sections, defaults that agree with the task, pinned datasets, and an end-to-end run on the protocol's
small fixture with a mock model whose log records the provenance. Plus: a folder that breaks the
contract is caught, file by file."""

from __future__ import annotations

import inspect as pyinspect
import re
import shutil
from pathlib import Path

import pytest

import protocols.harness.solvers as solvers
from lca.errors import LCAError, RecordFormatError
from lca.importers import file_sha256
from protocols.evals import ProtocolRegistry, available_protocols, protocol_metadata, protocol_task
from protocols.evals.data_paths import data_roots, find_data_file
from protocols.evals.registry import README_SECTIONS, REPO
from tests.fakes import FakeHashingEmbedder
from tests.protocols.test_harness import fake_agent

PROTOCOLS = available_protocols()
PROVENANCE = (
    "protocol",
    "version",
    "condition",
    "condition_params",
    "dataset",
    "dataset_sha256",
    "seed",
    "code_version",
    "embedder",
    "created_at",
)


def readme_sections(text: str) -> dict[str, str]:
    parts = re.split(r"^##\s+(.+)$", text, flags=re.M)
    return {title.strip().lower(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_the_shipped_protocols_are_discovered():
    assert {"continuity", "locomo", "longmemeval"} <= set(PROTOCOLS)
    with pytest.raises(LCAError, match="unknown protocol 'hollow-copy-9'; known: ") as info:
        protocol_task("hollow-copy-9")
    assert all(name in str(info.value) for name in PROTOCOLS)  # every registered protocol is listed


@pytest.mark.parametrize("name", PROTOCOLS)
def test_metadata_and_folder_hold_the_contract(name):
    meta = protocol_metadata(name)
    assert meta.name == name and meta.version and meta.main_score in {m.name for m in meta.measures}
    assert ProtocolRegistry().problems(name) == []
    sections = readme_sections((REPO / "protocols" / "evals" / name / "README.md").read_text())
    assert all(s.lower() in sections for s in README_SECTIONS)
    how = sections["how to run it"]
    assert f"lca run {name}" in how and f"inspect eval protocols/evals/{name}/{meta.task_file}" in how
    for measure in meta.measures:  # every declared measure is defined in the README
        assert f"`{measure.name}`" in sections["measures"], measure.name


@pytest.mark.parametrize("name", PROTOCOLS)
def test_default_config_is_the_task_signature(name):
    meta = protocol_metadata(name)
    signature = pyinspect.signature(protocol_task(name))
    defaults = {p: v.default for p, v in signature.parameters.items()}
    assert set(meta.config) == set(defaults)
    assert {k: v for k, v in meta.config.items() if k != meta.data_parameter} == {
        k: v for k, v in defaults.items() if k != meta.data_parameter
    }


@pytest.mark.parametrize("name", PROTOCOLS)
def test_dataset_files_match_their_pins_where_present(name):
    for dataset in protocol_metadata(name).datasets:
        path = find_data_file(dataset.name)
        if path is None:
            assert dataset.location == "data_root", f"{dataset.name}: a repository file must exist"
            continue
        if dataset.sha256:
            assert file_sha256(path) == dataset.sha256, f"{path} is not the pinned {dataset.name}"


def test_dataset_names_are_unique_across_protocols():
    names = [d.name for n in PROTOCOLS for d in protocol_metadata(n).datasets]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", PROTOCOLS)
def test_task_runs_end_to_end_on_its_fixture_and_records_provenance(name, tmp_path, monkeypatch):
    from inspect_ai import eval as inspect_eval

    meta = protocol_metadata(name)
    fixture = REPO / meta.fixture
    monkeypatch.setattr(solvers, "_EMBEDDER", solvers.LockedEmbedder(FakeHashingEmbedder(max_input_tokens=200)))
    task = protocol_task(name)(**{meta.data_parameter: str(fixture)}, condition="transcript-recall", params="floor=0.0")
    (log,) = inspect_eval(task, model=fake_agent(), limit=2, log_dir=str(tmp_path), display="none")
    assert log.status == "success" and len(log.samples) == 2
    recorded = log.eval.metadata
    assert all(recorded.get(field) is not None for field in PROVENANCE), [
        f for f in PROVENANCE if recorded.get(f) is None
    ]
    assert recorded["protocol"] == name and recorded["version"] == meta.version == log.eval.task_version
    assert recorded["condition"] == "transcript-recall" and recorded["condition_params"]["floor"] == 0.0
    assert recorded["dataset_sha256"] == file_sha256(fixture) and recorded["seed"] == 0
    assert recorded["embedder"] == FakeHashingEmbedder().embedder_id
    reported = {(r.scorer, r.name) for r in log.results.scores}
    declared = {(m.scorer, m.name) for m in meta.measures if m.reported}
    assert reported == declared  # the log reports exactly the declared measures (a rated one is rated after the run)
    # a rated measure is rated by a study's panel, from the items a scorer of the task prepares
    assert {m.scorer for m in meta.measures if not m.reported} <= {scorer for scorer, _ in reported}
    assert all(s.output.usage is not None for s in log.samples)


# ---- a folder that breaks the contract --------------------------------------------------------------
@pytest.fixture
def copied_root(tmp_path) -> Path:
    """A copy of the locomo folder under another root: a complete protocol, to break one piece at a time."""
    source = REPO / "protocols" / "evals" / "locomo"
    target = tmp_path / "evals" / "locomo"
    target.mkdir(parents=True)
    for file in ("eval.yaml", "README.md", "locomo.py", "dataset.py"):
        shutil.copy(source / file, target / file)
    return tmp_path / "evals"


def test_an_alternative_root_is_discovered_and_a_complete_copy_holds(copied_root):
    registry = ProtocolRegistry(copied_root)
    (copied_root / "notes").mkdir()  # a folder without eval.yaml is not a protocol
    assert registry.available() == ["locomo"] and registry.problems("locomo") == []
    assert callable(registry.task("locomo"))


@pytest.mark.parametrize(
    "missing,problem",
    [
        ("README.md", "missing README.md"),
        ("dataset.py", "missing dataset.py"),
        ("locomo.py", "missing locomo.py"),
    ],
)
def test_a_folder_missing_a_required_file_breaks_the_contract(copied_root, missing, problem):
    (copied_root / "locomo" / missing).unlink()
    problems = ProtocolRegistry(copied_root).problems("locomo")
    assert any(problem in p for p in problems), problems


def test_a_folder_without_eval_yaml_is_not_a_protocol(copied_root):
    (copied_root / "locomo" / "eval.yaml").unlink()
    registry = ProtocolRegistry(copied_root)
    assert registry.available() == []
    with pytest.raises(LCAError, match="unknown protocol 'locomo'; known: $"):
        registry.metadata("locomo")


def test_a_readme_without_a_required_section_or_a_module_without_the_task_breaks_it(copied_root):
    folder = copied_root / "locomo"
    readme = folder / "README.md"
    readme.write_text(readme.read_text().replace("## Caveats", "## Notes"))
    module = folder / "locomo.py"
    module.write_text(module.read_text().replace("@task\n", ""))
    problems = ProtocolRegistry(copied_root).problems("locomo")
    assert any("missing section '## Caveats'" in p for p in problems)
    assert any("no @task function 'locomo'" in p for p in problems)


@pytest.mark.parametrize(
    "edit,field",
    [
        (lambda text: text + "surprise: 1\n", "surprise"),
        (lambda text: text.replace("version: 1.0.0", "version: one"), "version"),
        (lambda text: text.replace("kind: computed", "kind: guessed", 1), "measures.0.kind"),
        (lambda text: text.replace("main_score: locomo_qa", "main_score: accuracy"), None),
        (lambda text: text.replace("name: locomo\n", "name: other\n", 1), "name"),
    ],
)
def test_a_bad_eval_yaml_is_refused_naming_the_file_and_field(copied_root, edit, field):
    metadata = copied_root / "locomo" / "eval.yaml"
    metadata.write_text(edit(metadata.read_text()))
    registry = ProtocolRegistry(copied_root)
    with pytest.raises(RecordFormatError) as info:
        registry.metadata("locomo")
    assert str(metadata) in str(info.value)
    if field:
        assert f"field '{field}'" in str(info.value)
    assert str(metadata) in registry.problems("locomo")[0]


# ---- data files found by the metadata's names ---------------------------------------------------------
def test_data_files_are_found_by_the_names_the_metadata_declares(tmp_path):
    (tmp_path / "locomo").mkdir()
    shutil.copy(REPO / "data" / "fixtures" / "locomo_fixture.json", tmp_path / "locomo" / "locomo10.json")
    assert find_data_file("locomo", tmp_path) == tmp_path / "locomo" / "locomo10.json"
    assert find_data_file("locomo", tmp_path / "locomo" / "locomo10.json") == tmp_path / "locomo" / "locomo10.json"
    with pytest.raises(FileNotFoundError, match="longmemeval/longmemeval_s_dev.json.xz"):
        find_data_file("longmemeval_s_dev", tmp_path)
    with pytest.raises(LCAError, match="unknown dataset 'imagenet'; known: .*continuity-v1, .*locomo"):
        find_data_file("imagenet")
    assert data_roots(tmp_path)[0] == tmp_path
