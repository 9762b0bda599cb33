"""The report's words: its provenance block, the markdown report and the JSON summary (the same content,
machine-readable). A third party reproduces the report from what these name: the pre-registration hash and
lock, the code revision, the model ids and GGUF hashes, the embedder, the datasets' hashes, the seeds and the
package versions."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from protocols.evals.sections import ReportSection
from protocols.report.findings import StudyAnalysis
from protocols.report.run import StudyRun

PROVENANCE_FIELDS = (
    "study_sha256",
    "lock_state",
    "code_revision",
    "models",
    "model_files",
    "embedder_id",
    "datasets",
    "seeds",
    "packages",
    "platform",
)
LOCAL_PREFIX = "lca-local/"
HOSTED_EXAMPLE = "openai/gpt-4o-mini"


def provenance(run: StudyRun) -> dict[str, Any]:
    """Everything the report stands on, from the manifest, with the logs' own records beside it (models,
    embedder, dataset hashes, code versions) so a manifest gap is visible and filled where a log knows."""
    m = run.manifest
    headers = [h for hs in run.logs.values() for h in hs]
    embedders = sorted({h.embedder for h in headers if h.embedder})
    code_versions = sorted({h.code_version for h in headers if h.code_version})
    datasets = sorted({(h.protocol, h.dataset or "", h.dataset_sha256 or "") for h in headers})
    from_logs: dict[str, list[str] | list[tuple[str, str, str]]] = {
        "models": sorted({h.model for h in headers}),
        "model_roles": sorted({f"{k}={v}" for h in headers for k, v in h.model_roles.items()}),
        "embedders": embedders,
        "code_versions": code_versions,
        "datasets": datasets,
    }
    return {
        "study_id": run.study_id,
        "study_title": run.study.title,
        "study_version": run.study.version,
        "study_path": str(run.study_path),
        "study_sha256": m.get("study_sha256"),
        "lock": m.get("lock"),
        "lock_state": run.lock_state,
        "lock_signature": m.get("lock_signature"),
        "exploratory": run.exploratory,
        "run_id": run.run_id,
        "run_dir": str(run.run_dir),
        "started_at": m.get("started_at"),
        "finished_at": m.get("finished_at"),
        "wall_seconds": m.get("wall_seconds"),
        "code_revision": m.get("code_revision") or (code_versions[0] if code_versions else None),
        "models": m.get("models") or {"agent": run.study.models.agent, "roles": dict(run.study.models.roles)},
        "model_files": m.get("model_files") or {},
        "embedder_id": m.get("embedder_id") or ", ".join(embedders) or None,
        "datasets": m.get("datasets") or [{"protocol": p, "file": f, "sha256": s} for p, f, s in datasets],
        "calibration_sets": m.get("calibration_sets") or [],
        "seeds": m.get("seeds") or list(run.study.seeds),
        "packages": m.get("packages") or (headers[0].packages if headers else {}),
        "platform": m.get("platform") or {},
        "from_logs": {k: [list(v) if isinstance(v, tuple) else v for v in vals] for k, vals in from_logs.items()},
        "not_in_manifest": [f for f in PROVENANCE_FIELDS if m.get(f) is None],
    }


def model_grade(run: StudyRun) -> dict[str, str]:
    """What the agent model can show, and the one-line change that runs the same study on a hosted model."""
    agent = str((run.manifest.get("models") or {}).get("agent") or run.study.models.agent)
    path = run.study_path
    change = (
        f"In {path}, change `agent: {agent}` to `agent: {HOSTED_EXAMPLE}` (set OPENAI_API_KEY; any inspect model "
        "string works, and the roles can move the same way). The edit unlocks the study: re-lock it with "
        f'`lca prereg lock {path} --relock --reason "hosted agent model"` (recorded as a deviation), or keep '
        f"the pilot as it is and save the edit as a new study (its `id` equal to the new file's name), lock it, "
        f"then `lca run` it."
    )
    if agent.startswith(LOCAL_PREFIX):
        grade = (
            f"The agent model is the embedded `{agent}`, a plumbing-grade model: it runs offline on a CPU so that "
            "every step of the study can be exercised end to end, and it is far too small to show what a capable "
            "agent does with its context. Its behaviour scores test the pipeline, not the hypotheses about "
            "behaviour; measures read from the injected context do not depend on it."
        )
    elif agent.startswith("mockllm/"):
        grade = f"The agent model is `{agent}`, inspect's scripted test model: this run tests the machinery only."
    else:
        grade = f"The agent model is `{agent}`."
    return {"agent": agent, "grade": grade, "hosted_change": change}


# ---- markdown ---------------------------------------------------------------------------------------------
def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return "–" if not math.isfinite(value) else f"{value:.{digits}g}"
    return str(value)


def _ci(low: Any, high: Any) -> str:
    return "–" if low is None or not math.isfinite(low) else f"[{_f(low)}, {_f(high)}]"


def _short(text: str, limit: int = 400) -> str:
    """A model's detail for a table cell: long parenthesised warning lists elided (summary.json keeps them)."""
    text = re.sub(r" \([^()]{80,}\)", " (…)", text)
    return text if len(text) <= limit else text[:limit].rstrip() + " … (whole text in summary.json)"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    clean = lambda cell: str(cell).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(clean(c) for c in row) + " |" for row in rows]
    return out + [""]


def exploratory_reasons(run: StudyRun) -> list[str]:
    reasons = []
    if run.manifest.get("exploratory"):
        reasons.append("the run was started with --exploratory")
    if run.lock_state != "locked":
        reasons.append(f"the study was {run.lock_state} when it ran (not locked)")
    if any(h.exploratory for hs in run.logs.values() for h in hs):
        reasons.append("its logs are tagged exploratory")
    return reasons


def _signature_words(signature: dict[str, Any] | None) -> str:
    """The lock's signature as the run recorded it (runs before signatures recorded none, and say nothing)."""
    if not signature:
        return ""
    if signature.get("state") == "unsigned":
        return ", **unsigned**"
    return f", signed by key `{signature.get('key_id')}`"


def _provenance_lines(prov: dict[str, Any]) -> list[str]:
    lock = prov["lock"] or {}
    models = prov["models"] or {}
    roles = ", ".join(f"{k}={v}" for k, v in (models.get("roles") or {}).items()) or "–"
    lines = [
        f"- Pre-registration: `{prov['study_path']}` sha256 `{prov['study_sha256'] or 'not recorded'}`; lock state "
        f"**{prov['lock_state']}**"
        + (f", locked at {lock.get('locked_at')} (sha256 `{lock.get('sha256')}`)" if lock else "")
        + _signature_words(prov.get("lock_signature")),
        f"- Code revision: `{prov['code_revision'] or 'not recorded'}`",
        f"- Run: `{prov['run_id']}`, {prov['started_at'] or '?'} to {prov['finished_at'] or '?'} "
        f"({_f(prov['wall_seconds'])} s)",
        f"- Models: agent `{models.get('agent')}`; roles {roles}",
    ]
    for model, digest in (prov["model_files"] or {}).items():
        lines.append(f"  - `{model}`: GGUF sha256 `{digest}`")
    lines.append(f"- Embedder: `{prov['embedder_id'] or 'not recorded'}`")
    for d in prov["datasets"] or ():
        fixture = " (project fixture)" if d.get("fixture") else ""
        lines.append(f"- Dataset ({d.get('protocol')}): `{d.get('file')}` sha256 `{d.get('sha256')}`{fixture}")
    for c in prov.get("calibration_sets") or ():
        lines.append(
            f"- Calibration set ({c.get('measure')}): `{c.get('path')}` sha256 `{c.get('sha256')}`, {c.get('items')} "
            "items with reference codes"
        )
    lines.append(f"- Seeds: {', '.join(str(s) for s in prov['seeds'])}")
    packages = ", ".join(f"{k} {v}" for k, v in sorted((prov["packages"] or {}).items()))
    lines.append(f"- Packages: {packages or 'not recorded'}")
    platform = ", ".join(f"{k} {v}" for k, v in (prov["platform"] or {}).items())
    lines.append(f"- Platform: {platform or 'not recorded'}")
    if prov["not_in_manifest"]:
        lines.append(f"- Not in the run manifest: {', '.join(prov['not_in_manifest'])} (taken from the logs or study)")
    return lines + [""]


def _prediction_rows(analysis: StudyAnalysis) -> list[list[Any]]:
    rows = []
    for o in analysis.predictions:
        r = o.result
        comparison = f"{o.conditions[0]} > {o.conditions[1]}" if o.kind == "superiority" else " ≈ ".join(o.conditions)
        bound = f"min {o.threshold:g}" if o.kind == "superiority" else f"±{o.threshold:g}"
        rows.append(
            [
                o.id,
                o.hypothesis,
                o.role,
                o.measure,
                f"{comparison} ({bound})",
                r.n if r else "–",
                _f(r.estimate) if r else "–",
                _ci(r.ci_low, r.ci_high) if r else "–",
                f"{_f(r.effect_size)} ({r.effect_name})" if r and r.effect_size is not None else "–",
                r.test if r else "–",
                _f(r.p_value) if r else "–",
                _f(o.p_adjusted),
                f"**{o.verdict}**",
            ]
        )
    return rows


def _section_lines(sections: Sequence[ReportSection]) -> list[str]:
    """The protocols' own sections (``protocols.evals.sections``): a title, a note and a table each."""
    out: list[str] = []
    for section in sections:
        rows = [[_f(row.get(key)) for key, _ in section.columns] for row in section.rows]
        out += [f"## {section.title}", "", section.note, "", *_table([h for _, h in section.columns], rows)]
    return out


def render_markdown(
    run: StudyRun,
    analysis: StudyAnalysis,
    files: dict[str, Any],
    generated_at: str,
    sections: Sequence[ReportSection] = (),
) -> str:
    study = run.study
    prov = provenance(run)
    grade = model_grade(run)
    out = [
        f"# {study.title}",
        "",
        f"Study `{study.id}` v{study.version}, run `{run.run_id}`; report {generated_at}.",
        "",
    ]
    reasons = exploratory_reasons(run)
    if reasons:
        out += [f"> **EXPLORATORY** — {'; '.join(reasons)}. Nothing here is a test of the pre-registered plan.", ""]
    out += [
        "## Agent model",
        "",
        grade["grade"],
        "",
        f"To run the same study on a hosted model: {grade['hosted_change']}",
        "",
    ]
    out += ["## Provenance", "", *_provenance_lines(prov)]
    out += ["## Predictions against outcomes", ""]
    out += [
        f"Alpha {study.analysis.alpha:g}; correction {study.analysis.correction} within each role family (primary, "
        "secondary). Superiority: supported when the difference reaches the minimum effect in the predicted "
        "direction and the corrected p is below alpha; not supported when its interval lies below the minimum "
        "effect. Equivalence: TOST with the margin; not supported when the interval lies outside it; uninformative when both conditions lie at the floor (or ceiling) the prediction names.",
        "",
    ]
    header = [
        "id",
        "H",
        "role",
        "measure",
        "prediction",
        "n",
        "estimate",
        "95% CI",
        "effect",
        "test",
        "p",
        "p adj",
        "verdict",
    ]
    out += _table(header, _prediction_rows(analysis))
    out += [f"- {o.id}: {o.verdict}: {o.reason}" for o in analysis.predictions] + [""]
    out += _testable_lines(analysis)
    out += [
        "## Measures by condition",
        "",
        "Mean over items (errored samples and items a measure does not apply to "
        "excluded), 95% bootstrap interval, standard error.",
        "",
    ]
    rows = [
        [s.measure, s.protocol, s.condition, s.n, _f(s.mean), _ci(s.ci_low, s.ci_high), _f(s.stderr)]
        for s in analysis.conditions
    ]
    out += _table(["measure", "protocol", "condition", "n", "mean", "95% CI", "stderr"], rows)
    out += [f"## Condition models ({study.analysis.model}, groups: {', '.join(study.analysis.groups)})", ""]
    rows = []
    for c in analysis.models:
        r = c.result
        rows.append(
            [
                c.measure,
                f"{c.condition} - {c.reference}" if c.condition else "–",
                r.n if r else "–",
                _f(r.estimate) if r else "–",
                _ci(r.ci_low, r.ci_high) if r else "–",
                _f(r.p_value) if r else "–",
                _short(r.detail) if r else c.note,
            ]
        )
    out += _table(["measure", "contrast", "n", "estimate", "95% CI", "p", "detail"], rows)
    out += _agreement_lines(analysis)
    out += [
        "## Latency",
        "",
        "Recall latency is one recall's own time: a sample holds the process's shared embedder while its context is"
        " built, so no wait for another sample's embedding is counted; the cores are still shared with the local"
        " model answering another sample. Sample time is inspect's total time for the sample: the replay, the"
        " answer and any wait for the model.",
        "",
    ]
    rows = [
        [
            r["protocol"],
            r["condition"],
            r["samples"],
            _f(r["recall_p50_ms"]),
            _f(r["recall_p95_ms"]),
            _f(r["sample_p50_s"]),
            _f(r["sample_p95_s"]),
            _f(r["injected_tokens_mean"]),
        ]
        for r in analysis.latency
    ]
    out += _table(
        [
            "protocol",
            "condition",
            "samples",
            "recall p50 ms",
            "recall p95 ms",
            "sample p50 s",
            "sample p95 s",
            "injected tokens",
        ],
        rows,
    )
    out += _section_lines(sections)
    out += ["## Shortfalls and errors", ""]
    rows = [
        [
            r["protocol"],
            r["condition"],
            r["samples"],
            r["errors"],
            r["with_shortfall"],
            ", ".join(f"{k} {v}" for k, v in r["kinds"].items()) or "–",
        ]
        for r in analysis.shortfalls
    ]
    out += _table(["protocol", "condition", "samples", "errors", "with shortfall", "kinds"], rows)
    out += _protocol_lines(run) + _deviation_lines(run)
    if run.notes:
        out += ["## Notes", "", *[f"- {n}" for n in run.notes], ""]
    out += ["## Analysis rules and exclusions (from the pre-registration)", ""]
    out += [f"- {rule}" for rule in (*study.analysis.rules, *study.exclusions)] + [""]
    out += ["## Files", "", *[f"- {name}: `{path}`" for name, path in files.items()], ""]
    return "\n".join(out)


def _testable_lines(analysis: StudyAnalysis) -> list[str]:
    """Which predictions this run could test, and why each other one was not tested, in words."""
    tested = [o for o in analysis.predictions if o.verdict != "not tested"]
    untested = [o for o in analysis.predictions if o.verdict == "not tested"]
    out = ["### What this run could test", ""]
    names = ", ".join(f"{o.id} ({o.verdict})" for o in tested) or "none"
    out.append(f"This run could test {len(tested)} of {len(analysis.predictions)} predictions: {names}.")
    if untested:
        out.append(f"It could not test {len(untested)}:")
        out += [f"- {o.id} ({o.measure}): {o.reason}" for o in untested]
    return out + [""]


def _gate_lines(s) -> list[str]:
    """A judged measure's gate as the runner recorded it: the panel (each rater's identity), the calibration
    set, the thresholds and counts, each rater against the reference codes, and every check."""
    gate = s.gate or {}
    if not gate:
        return []
    out = [f"#### {s.measure}: the rater gate", ""]
    calibration = gate.get("calibration") or {}
    if calibration.get("source") == "calibration set":
        codes = ", ".join(f"{k}: {v}" for k, v in (calibration.get("codes") or {}).items())
        out.append(
            f"- Calibration set: `{calibration.get('path')}` sha256 `{calibration.get('sha256')}`, "
            f"{calibration.get('items')} items with reference codes ({codes})"
        )
    elif calibration:
        out.append(f"- Calibration: {calibration.get('items')} of the study's own answers; {calibration.get('note')}")
    if "threshold" in gate:
        out.append(
            f"- Level {gate.get('level')}, scale {gate.get('scale')}; alpha among the raters must reach "
            f"{_f(gate.get('threshold'))}; each rater's alpha with the reference codes must reach "
            f"{_f(gate.get('reference_threshold'))}; at least {gate.get('min_raters')} raters must give readable "
            f"ratings; counts: {', '.join(f'{k} {v}' for k, v in (gate.get('counts') or {}).items())}"
        )
    rows = [
        [
            r.get("rater"),
            r.get("model") or r.get("kind"),
            r.get("prompt_source"),
            f"`{str(r.get('prompt_sha256'))[:12]}`",
            _f(r.get("temperature")),
            r.get("seed"),
            r.get("max_tokens"),
            f"`{r.get('identity')}`",
        ]
        for r in gate.get("panel") or ()
    ]
    out += [
        "",
        *_table(["rater", "model", "prompt", "prompt sha256", "temperature", "seed", "max_tokens", "identity"], rows),
    ]
    own = [(r.get("rater"), r.get("prompt")) for r in gate.get("panel") or () if r.get("prompt_source") == "own"]
    out += [f"- {rater}'s own prompt: {prompt}" for rater, prompt in own]
    if gate.get("same_identity"):
        groups = "; ".join(" = ".join(g) for g in gate["same_identity"])
        out.append(f"- **Not independent**: {groups} (one identity: the same model, prompt and settings)")
    rows = [
        [
            r.get("rater"),
            _f(r.get("alpha")),
            _ci(*(r.get("alpha_ci") or (None, None))),
            _f(r.get("exact")),
            _f(r.get("within_one")),
            f"{r.get('n_items')} ({r.get('n_missing')} missing)",
            _f(r.get("threshold")),
            "**passes**" if r.get("passes") else "**fails**",
        ]
        for r in gate.get("reference") or ()
    ]
    if rows:
        header = ["rater vs reference codes", "alpha", "95% CI", "exact", "within one", "items", "threshold", "verdict"]
        out += ["", *_table(header, rows)]
    for check in gate.get("checks") or ():
        out.append(
            f"- Check {check.get('name')}: {'passes' if check.get('passes') else '**fails**'}: {check.get('detail')}"
        )
    return out + [""]


def _agreement_lines(analysis: StudyAnalysis) -> list[str]:
    if not analysis.judged:
        return []
    out = ["## Rater agreement", ""]
    rows = []
    for s in analysis.judged.values():
        rows.append(
            [
                s.measure,
                s.level,
                f"**{s.state}**",
                _f(s.alpha),
                _ci(*s.alpha_ci),
                _f(s.threshold),
                _f(s.raw_agreement),
                _f(s.expected_agreement),
                s.n_items,
                s.n_raters,
            ]
        )
    out += _table(
        [
            "measure",
            "level",
            "state",
            "alpha",
            "95% CI",
            "threshold",
            "raw agreement",
            "chance agreement",
            "items",
            "raters",
        ],
        rows,
    )
    for s in analysis.judged.values():
        if s.state == "missing":
            lean = "not rated"
        elif (s.gate.get("calibration") or {}).get("source") == "calibration set":
            lean = "calibrated on the calibration set, whose items belong to no condition"
        elif s.leaning:
            lean = f"disagreements lean on {', '.join(s.leaning)} (sign test p < 0.05)"
        else:
            lean = "disagreements do not lean toward any condition (sign test)"
        reason = s.reason.strip().rstrip(".")
        out.append(f"- {s.measure}: {s.state}; {lean}. {reason + '. ' if reason else ''}Source: {s.source or '–'}.")
        if s.gate.get("panel_note"):
            out.append(f"- {s.measure}: note: {s.gate['panel_note']}")
    out.append("")
    for s in analysis.judged.values():
        out += _gate_lines(s)
    return out


def _protocol_lines(run: StudyRun) -> list[str]:
    entries = run.manifest.get("protocols") or []
    if not entries:
        return []
    rows = [
        [
            e.get("name"),
            ", ".join(e.get("conditions") or ()),
            e.get("limit"),
            e.get("status"),
            _f(e.get("wall_seconds")),
            e.get("skipped_reason") or "–",
        ]
        for e in entries
    ]
    return ["## Protocols run", "", *_table(["protocol", "conditions", "limit", "status", "wall s", "skipped"], rows)]


def _deviation_lines(run: StudyRun) -> list[str]:
    out = ["## Deviations from the plan", ""]
    if not run.deviations:
        return out + ["None recorded.", ""]
    rows = [[d.get("at"), d.get("kind"), d.get("what"), d.get("why"), d.get("by")] for d in run.deviations]
    return out + _table(["at", "kind", "what", "why", "by"], rows)


def summary(
    run: StudyRun,
    analysis: StudyAnalysis,
    files: dict[str, Any],
    generated_at: str,
    sections: Sequence[ReportSection] = (),
) -> dict[str, Any]:
    """The report as JSON: provenance, the model grade, the analysis, the protocols' own sections and the run's
    deviations and notes."""
    return {
        "study_id": run.study_id,
        "run_id": run.run_id,
        "generated_at": generated_at,
        "exploratory": run.exploratory,
        "exploratory_reasons": exploratory_reasons(run),
        "provenance": provenance(run),
        "agent_model": model_grade(run),
        **analysis.to_dict(),
        "verdicts": {o.id: o.verdict for o in analysis.predictions},
        "protocol_sections": [s.to_dict() for s in sections],
        "protocols": run.manifest.get("protocols") or [],
        "deviations": run.deviations,
        "notes": list(run.notes),
        "files": {k: str(v) for k, v in files.items()},
    }


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
