"""``lca intents`` and ``lca providers``, and ``lca migrate --providers``: an operator sees work in flight,
settles a blocked intent, authorizes a capability a move gained; wrong ids and names are one-line errors."""

from __future__ import annotations

import json

from lca.intents import IntentLog
from lca.providers import ProviderContract, ProviderSet, read_providers, write_providers
from lca.transcript import TranscriptStore
from protocols.cli import main
from tests.conftest import make_entry


def _store_with_a_blocked_intent(root):
    TranscriptStore(root).append([make_entry("s1", 1, "file the expense claim")])
    log = IntentLog(root)
    intent = log.begin("claim-1", "expenses", {"amount": 12})
    log.resume({})  # this host has no "expenses" provider: blocked
    return intent.id


def test_an_operator_lists_and_settles_a_blocked_intent(tmp_path, capsys):
    root = tmp_path / "s"
    intent = _store_with_a_blocked_intent(root)
    assert main(["intents", "list", "--store", str(root)]) == 0
    assert "blocked" in capsys.readouterr().out
    before = (root / "events" / "intents.jsonl").read_bytes()
    assert main(["intents", "settle", "intent-nope", "--abandoned", "x", "--store", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no intent 'intent-nope'" in err
    assert (root / "events" / "intents.jsonl").read_bytes() == before  # nothing changed
    assert main(["intents", "settle", intent, "--abandoned", "never filed", "--store", str(root)]) == 0
    assert IntentLog(root).intents()[intent].state == "abandoned"


def test_migrate_with_providers_shows_capability_changes_and_authorize_ungates(tmp_path, capsys):
    source = tmp_path / "s"
    TranscriptStore(source).append([make_entry("s1", 1, "hello")])
    write_providers(source, ProviderSet((ProviderContract("llm", "model", capabilities=frozenset({"chat"})),)))
    contracts = {"providers": [{"name": "big-llm", "kind": "model", "capabilities": ["chat", "tools"]}]}
    (tmp_path / "target-host.json").write_text(json.dumps(contracts))
    target = tmp_path / "t"
    code = main(
        ["migrate", str(target), "--store", str(source), "--providers", str(tmp_path / "target-host.json"), "--quiet"]
    )
    assert code == 0
    assert "capability tools: gained (gated until authorized)" in capsys.readouterr().out
    assert main(["providers", "authorize", "payments", "--store", str(target)]) == 2
    assert main(["providers", "authorize", "tools", "--store", str(target)]) == 0
    assert read_providers(target).authorized == {"tools"}
