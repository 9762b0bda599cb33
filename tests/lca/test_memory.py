from __future__ import annotations

from datetime import datetime

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lca.errors import RecordFormatError
from lca.memory import (
    Authority,
    MemoryRecord,
    MemoryStore,
    MemoryType,
    Privacy,
    Supersession,
    TranscriptSpan,
    parse_memory_text,
)


def record(**kw) -> MemoryRecord:
    base = dict(
        id="m-1",
        type=MemoryType.DECISION,
        tags=("deploy",),
        projects=("lca",),
        created=datetime(2026, 1, 2, 3, 4),
        authority=Authority.APPROVED,
        privacy=Privacy.PRIVATE,
        critical=True,
        sources=(TranscriptSpan(session="s1", entries=("s1:4",)),),
    )
    base.update(kw)
    return MemoryRecord(**base)


def test_write_and_load_roundtrip_every_field(tmp_path):
    store = MemoryStore(tmp_path)
    rec = record(
        supersedes=(Supersession(id="m-0", reason="new release process"),),
        valid_from=datetime(2026, 1, 1),
        valid_to=datetime(2026, 12, 31),
    )
    written = store.write(rec, "Deploys go through the staging gate.\n")
    loaded = store.load()
    assert loaded.failures == () and loaded.drifted == ()
    (only,) = loaded.files
    assert only.record == written.record
    assert only.body == "Deploys go through the staging gate.\n"
    assert only.record.content_hash == only.computed_hash


def test_counters_stay_out_of_the_content_hash(tmp_path):
    store = MemoryStore(tmp_path)
    first = store.write(record(), "body")
    bumped = store.record_use("m-1", hits=3, prevented_mistakes=1, applied_at=datetime(2026, 2, 1))
    assert bumped.record.hits == 3 and bumped.record.prevented_mistakes == 1
    assert bumped.record.content_hash == first.record.content_hash
    edited = store.write(bumped.record, "a different body")
    assert edited.record.content_hash != first.record.content_hash


def test_hand_edit_is_reported_as_drift(tmp_path):
    store = MemoryStore(tmp_path)
    written = store.write(record(), "original")
    written.path.write_text(written.path.read_text().replace("original", "edited by hand"))
    loaded = store.load()
    assert loaded.drifted == (str(written.path),)
    assert loaded.files[0].body == "edited by hand"


@pytest.mark.parametrize(
    "mutate, field, needle",
    [
        (lambda f: f.pop("authority"), "authority", "required"),
        (lambda f: f.update(privacy="top-secret"), "privacy", "Input should be"),
        (lambda f: f.update(type="rumour"), "type", "Input should be"),
        (lambda f: f.update(hits=-1), "hits", "greater than or equal"),
        (lambda f: f.update(colour="blue"), "colour", "Extra inputs"),
        (lambda f: f.update(sources=[{"session": "s1"}]), "sources.0", "entry ids or a first/last span"),
        (lambda f: f.update(valid_from="2026-05-01", valid_to="2026-01-01"), None, "valid_to is before valid_from"),
        (lambda f: f.update(id="../escape"), "id", "must start with"),
    ],
)
def test_loader_names_the_file_and_field_that_failed(tmp_path, mutate, field, needle):
    store = MemoryStore(tmp_path)
    written = store.write(record(id="good"), "fine")
    front = record(id="bad").model_dump(mode="json", exclude_none=True)
    mutate(front)
    bad_path = store.dir / "bad.md"
    bad_path.write_text("---\n" + yaml.safe_dump(front) + "---\nbody\n")
    loaded = store.load()
    assert [f.record.id for f in loaded.files] == ["good"]
    (failure,) = loaded.failures
    assert failure.path == str(bad_path)
    assert failure.field == field
    assert needle in failure.message
    assert written.path.exists()


def test_missing_front_matter_and_bad_yaml_are_clear(tmp_path):
    with pytest.raises(RecordFormatError, match="no YAML front matter"):
        parse_memory_text("just text", path="x.md")
    with pytest.raises(RecordFormatError, match="not valid YAML") as info:
        parse_memory_text("---\nid: [unclosed\n---\nbody", path="y.md")
    assert info.value.path == "y.md"


def test_duplicate_ids_are_reported(tmp_path):
    store = MemoryStore(tmp_path)
    written = store.write(record(id="dup"), "one")
    (store.dir / "copy.md").write_text(written.path.read_text())
    loaded = store.load()
    assert len(loaded.files) == 1
    assert loaded.failures[0].field == "id" and "duplicate id 'dup'" in loaded.failures[0].message


yaml_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    front=st.dictionaries(
        st.sampled_from(
            ["id", "type", "tags", "created", "authority", "privacy", "hits", "sources", "valid_to", "junk"]
        ),
        yaml_values,
        max_size=8,
    ),
    raw=st.text(max_size=60),
)
def test_fuzzed_front_matter_loads_or_is_reported(tmp_path_factory, front, raw):
    root = tmp_path_factory.mktemp("mem")
    store = MemoryStore(root)
    store.dir.mkdir(parents=True)
    (store.dir / "a.md").write_text("---\n" + yaml.safe_dump(front) + "---\nbody\n")
    (store.dir / "b.md").write_text(raw)
    loaded = store.load()
    assert len(loaded.files) + len(loaded.failures) == 2
    for failure in loaded.failures:
        assert failure.path.endswith((".md",)) and failure.message
