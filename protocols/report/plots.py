"""The report's plots (matplotlib, Agg backend): condition means with 95% intervals per measure, the recall
budget frontier (injected tokens against each measure), latency percentiles and rater agreement. An exploratory
run's plots say so in their titles."""

from __future__ import annotations

import math
import re
from pathlib import Path

from protocols.report.findings import StudyAnalysis


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(text: str, exploratory: bool) -> str:
    return f"EXPLORATORY: {text}" if exploratory else text


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _finite(value: float) -> bool:
    return value is not None and math.isfinite(value)


def means_plots(analysis: StudyAnalysis, folder: Path, exploratory: bool) -> list[Path]:
    plt = _pyplot()
    written = []
    measures = list(dict.fromkeys(s.measure for s in analysis.conditions))
    for measure in measures:
        rows = [s for s in analysis.conditions if s.measure == measure and s.n > 0]
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(1.4 + 1.1 * len(rows), 3.2))
        xs = range(len(rows))
        means = [r.mean for r in rows]
        low = [r.mean - r.ci_low if _finite(r.ci_low) else 0.0 for r in rows]
        high = [r.ci_high - r.mean if _finite(r.ci_high) else 0.0 for r in rows]
        ax.bar(xs, means, yerr=[low, high], capsize=4, color="#4c72b0")
        ax.set_xticks(list(xs), [f"{r.condition}\nn={r.n}" for r in rows], fontsize=8)
        ax.set_ylabel("mean (95% bootstrap CI)")
        ax.set_title(_title(f"{measure} ({rows[0].protocol})", exploratory), fontsize=9)
        fig.tight_layout()
        path = folder / f"means_{_safe(measure)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def frontier_plot(analysis: StudyAnalysis, folder: Path, exploratory: bool) -> Path | None:
    """Per protocol: each condition's mean injected tokens (the recall budget it spent) against its mean on each
    measure scored in [0, 1], so a condition that buys its score with context shows as such."""
    tokens = {(r["protocol"], r["condition"]): r["injected_tokens_mean"] for r in analysis.latency}
    protocols = list(dict.fromkeys(s.protocol for s in analysis.conditions))
    if not protocols or not tokens:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(protocols), figsize=(4.2 * len(protocols), 3.4), squeeze=False)
    for ax, protocol in zip(axes[0], protocols):
        for measure in dict.fromkeys(s.measure for s in analysis.conditions if s.protocol == protocol):
            rows = [s for s in analysis.conditions if s.measure == measure and s.n > 0]
            if not all(0.0 <= r.mean <= 1.0 for r in rows):  # proportions and F1 only; counts have their own scale
                continue
            points = [(tokens.get((protocol, r.condition), math.nan), r.mean, r.condition) for r in rows]
            points = [p for p in points if _finite(p[0]) and _finite(p[1])]
            if not points:
                continue
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", linestyle="", label=measure)
            for x, y, condition in points:
                ax.annotate(condition, (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
        ax.set_xlabel("mean injected tokens")
        ax.set_ylabel("measure mean")
        ax.set_title(_title(f"recall budget frontier: {protocol}", exploratory), fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    fig.tight_layout()
    path = folder / "frontier.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_plot(analysis: StudyAnalysis, folder: Path, exploratory: bool) -> Path | None:
    rows = [r for r in analysis.latency if _finite(r["recall_p50_ms"]) or _finite(r["sample_p50_s"])]
    if not rows:
        return None
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(6.0, 1.2 * len(rows) + 2), 3.4))
    labels = [f"{r['protocol']}\n{r['condition']}" for r in rows]
    xs = list(range(len(rows)))
    for ax, key, unit in ((left, "recall", "ms"), (right, "sample", "s")):
        p50 = [r[f"{key}_p50_{unit}"] for r in rows]
        p95 = [r[f"{key}_p95_{unit}"] for r in rows]
        ax.bar([x - 0.2 for x in xs], p50, width=0.4, label="p50", color="#55a868")
        ax.bar([x + 0.2 for x in xs], p95, width=0.4, label="p95", color="#c44e52")
        ax.set_xticks(xs, labels, fontsize=6)
        ax.set_ylabel(f"{key} time ({unit})")
        ax.legend(fontsize=7)
    left.set_title(_title("recall latency per condition", exploratory), fontsize=9)
    right.set_title(_title("time per sample", exploratory), fontsize=9)
    fig.tight_layout()
    path = folder / "latency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def agreement_plot(analysis: StudyAnalysis, folder: Path, exploratory: bool) -> Path | None:
    rows = [s for s in analysis.judged.values() if s.state != "missing"]
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(rows), 3.2))
    for x, status in enumerate(rows):
        alpha = status.alpha if status.alpha is not None else math.nan
        low, high = status.alpha_ci
        color = "#55a868" if status.state == "passed" else "#c44e52"
        if _finite(alpha):
            err = [[alpha - low if low is not None else 0.0], [high - alpha if high is not None else 0.0]]
            ax.errorbar([x], [alpha], yerr=err, fmt="o", color=color, capsize=4)
        ax.hlines(status.threshold, x - 0.3, x + 0.3, colors="black", linestyles="dashed")
        ax.annotate(status.state, (x, status.threshold), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xticks(range(len(rows)), [s.measure for s in rows], fontsize=8)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylabel("Krippendorff's alpha (95% CI); dashed: threshold")
    ax.set_title(_title("rater agreement", exploratory), fontsize=9)
    fig.tight_layout()
    path = folder / "agreement.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(analysis: StudyAnalysis, folder: Path, exploratory: bool) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.png"):  # an earlier report's plots must not pass for this run's
        stale.unlink()
    written = means_plots(analysis, folder, exploratory)
    for make in (frontier_plot, latency_plot, agreement_plot):
        path = make(analysis, folder, exploratory)
        if path is not None:
            written.append(path)
    return written
