"""Retention rules (lca.retention): declared once, applied through forget, named in each tombstone, reported by
health while overdue; a malformed rule file is refused naming the file and the rule."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from lca.errors import RecordFormatError
from lca.forget import is_tombstone
from lca.recall import RecallConfig
from lca.retention import apply_retention, read_retention, retention_check
from lca.substrate import Substrate
from lca.types import EntryKind, HealthStatus
from tests.conftest import make_entry
from tests.fakes import FakeHashingEmbedder

NOW = datetime(2026, 6, 1, tzinfo=UTC)
RULES = """\
rules:
  - name: tool-output
    older_than_days: 30
    kinds: [tool_result]
  - name: support
    older_than_days: 365
    channel: support
"""


def open_store(root: Path) -> Substrate:
    return Substrate(root, embedder=FakeHashingEmbedder(), recall_config=RecallConfig(floor=0.0))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    with open_store(root) as s:
        s.append(
            [
                make_entry(
                    "s1",
                    1,
                    "old tool output: disk 91% full",
                    kind=EntryKind.TOOL_RESULT,
                    timestamp="2026-01-02T10:00:00+00:00",
                ),
                make_entry(
                    "s1",
                    2,
                    "recent tool output: disk 40% full",
                    kind=EntryKind.TOOL_RESULT,
                    timestamp="2026-05-20T10:00:00+00:00",
                ),
                make_entry("s1", 3, "an old user turn stays", timestamp="2026-01-02T10:01:00+00:00"),
                make_entry(
                    "s2", 1, "a support chat from 2024", channel="support", timestamp="2024-12-01T09:00:00+00:00"
                ),
                make_entry(
                    "s2", 2, "a support chat from 2026", channel="support", timestamp="2026-02-01T09:00:00+00:00"
                ),
            ]
        )
        s.ingest()
    (root / "retention.yaml").write_text(RULES)
    return root


def test_rules_forget_what_they_select_name_themselves_and_health_sees_them_due(store):
    with open_store(store) as s:
        check = retention_check(store, s.transcript, NOW)
        assert check.status == HealthStatus.WARN and check.data["overdue"] == {"tool-output": 1, "support": 1}
        dry = apply_retention(s, now=NOW, dry_run=True)
        assert [len(r.tombstones) if r else 0 for _, r in dry] == [1, 1]
        assert not any(is_tombstone(e) for e in s.transcript.iter_entries())  # a dry run changes nothing
        apply_retention(s, now=NOW)
        gone = {(e.session_id, e.id): e for e in s.transcript.iter_entries() if is_tombstone(e)}
        assert set(gone) == {("s1", "s1:1"), ("s2", "s2:1")}
        assert "retention rule 'tool-output'" in gone[("s1", "s1:1")].meta["forgotten"]["why"]
        assert retention_check(store, s.transcript, NOW).status == HealthStatus.OK
        assert [r for _, r in apply_retention(s, now=NOW)] == [None, None]  # applying again forgets nothing
        assert "disk 91%" not in " ".join(i.text for i in s.recall("disk full tool output").items)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("rules:\n  - name: x\n    older_than_days: -1\n", "rules[0]: field 'older_than_days'"),
        ("rules:\n  - name: x\n    older_than_days: 3\n    kinds: [tweet]\n", "rules[0]: field 'kinds'"),
        ("rules:\n  - name: x\n    older_than_days: 3\n    keep: forever\n", "rules[0]: unknown field(s) keep"),
        ("rules:\n  - name: x\n    older_than_days: 3\n    session_key: a b\n", "rules[0]: field 'session_key'"),
        ("rules: [\n", "not valid YAML"),
        ("policy: []\n", "one key, 'rules'"),
    ],
)
def test_a_malformed_rule_file_is_refused_naming_the_file_and_rule(tmp_path, text, names):
    (tmp_path / "retention.yaml").write_text(text)
    with pytest.raises(RecordFormatError, match="retention.yaml") as raised:
        read_retention(tmp_path)
    assert names in str(raised.value)


def test_the_cli_lists_due_rules_and_applies_them(store, capsys):
    from protocols.cli import main

    now = "2026-06-01T00:00:00+00:00"
    assert main(["retention", "list", "--store", str(store), "--now", now]) == 0
    assert "tool-output: older than 30 days (kinds tool_result); 1 entr(y/ies) due" in capsys.readouterr().out
    assert main(["retention", "apply", "--store", str(store), "--now", now, "--quiet"]) == 0
    assert "tool-output: forgot 1" in capsys.readouterr().out
    (store / "retention.yaml").write_text("rules:\n  - name: x\n")
    assert main(["retention", "apply", "--store", str(store)]) == 2
    assert "retention.yaml, rules[0]: field 'older_than_days'" in capsys.readouterr().err


def test_a_rule_by_session_key_forgets_that_conversation_across_sessions_and_nothing_else(tmp_path):
    root = tmp_path / "s"
    old = "2026-01-02T10:00:00+00:00"
    with open_store(root) as s:
        s.append(
            [
                make_entry("slack-1", 1, "the private thread", channel="slack", session_key="conv-7", timestamp=old),
                make_entry(
                    "cli-4", 1, "the same thread on the cli", channel="cli", session_key="conv-7", timestamp=old
                ),
                make_entry("cli-4", 2, "another conversation", channel="cli", session_key="conv-8", timestamp=old),
            ]
        )
    (root / "retention.yaml").write_text("rules:\n  - name: conv-7\n    older_than_days: 30\n    session_key: conv-7\n")
    with open_store(root) as s:
        (rule,) = read_retention(root)
        assert rule.session_key == "conv-7"
        apply_retention(s, now=NOW)
        gone = {(e.session_id, e.id) for e in s.transcript.iter_entries() if is_tombstone(e)}
        assert gone == {("slack-1", "slack-1:1"), ("cli-4", "cli-4:1")}
