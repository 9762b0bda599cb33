"""The table and plot of ``lca bench imprinting`` (protocols/evals/domain_imprinting/bench.py), from its measured record."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _f(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _rho(block: Mapping[str, Any]) -> str:
    if block["rho"] is None:
        return f"n/a (n={block['n']})"
    return f"{block['rho']:+.2f} (p={block['p']:.3g}, n={block['n']})"


def table(measured: Mapping[str, Any]) -> str:
    """Markdown: per arm, the curves by checkpoint, then the tracking correlations and the E ablation."""
    lines = [f"{Path(measured['file']).name} (sha256 {measured['sha256'][:12]})", ""]
    figures = measured["figures"]
    for arm, block in figures.items():
        if arm == "e_ablation":
            continue
        lines += [
            f"### arm `{arm}`",
            "",
            "| checkpoint | lessons met | in-domain: lesson in context | of lessons met | by recall | teaching turns in | "
            "mistake kept out | recalled tokens | out-of-domain: recalled tokens | quiet | domain E mass | "
            "recall p50 / p95 ms |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for k, c in block["curves"].items():
            lines.append(
                f"| {k} | {_f(c['lessons_seen'])} | {_f(c['in_domain_lesson_in_context'])} | "
                f"{_f(c['in_domain_seen_lesson_in_context'])} | {_f(c['in_domain_lesson_in_recall'])} | "
                f"{_f(c['in_domain_lesson_turns_share'])} | "
                f"{_f(c['in_domain_mistake_kept_out'])} | {_f(c['in_domain_recalled_tokens'], 1)} | "
                f"{_f(c['off_domain_recalled_tokens'], 1)} | {_f(c['off_domain_quiet'])} | "
                f"{_f(c['domain_e_mass'])} | {_f(c['recall_latency_p50_ms'], 1)} / {_f(c['recall_latency_p95_ms'], 1)} |"
            )
        t = block["tracking"]
        lines += [
            "",
            "Does improvement track E? Spearman's rho:",
            "",
            f"- agent x checkpoint, domain E mass vs in-domain share: {_rho(t['agent_checkpoint_e_mass_vs_share'])}",
            f"- agent x checkpoint, teaching turns vs in-domain share: "
            f"{_rho(t['agent_checkpoint_teaching_turns_vs_share'])}",
            f"- change between checkpoints, E mass vs share: {_rho(t['improvement_delta_e_mass_vs_delta_share'])}",
            f"- lesson x checkpoint (lessons met), E mass vs lesson in context: {_rho(t['lesson_e_mass_vs_in_context'])}",
            f"- lesson x checkpoint, teaching turns vs lesson in context: "
            f"{_rho(t['lesson_teaching_turns_vs_in_context'])}",
            "",
        ]
    ablation = figures.get("e_ablation")
    if ablation:
        lines += [
            f"E ablation, `{ablation['arm']}` against `{ablation['ablated']}` (same history, E weight 0), paired over "
            f"{ablation['cases']} in-domain cases: lesson brought in only with E {ablation['gained']}, only without E "
            f"{ablation['lost']}.",
            "",
        ]
    return "\n".join(lines)


def plot(measured: Mapping[str, Any], out: Path, *, embedder_id: str = "") -> Path:
    """Four panels: the in-domain curve per arm (all lessons solid, lessons met dashed), the domain E mass per
    checkpoint, E mass against the in-domain share per agent x checkpoint, and the out-of-domain recalled tokens."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = {a: b for a, b in measured["figures"].items() if a != "e_ablation"}
    fig, axes = plt.subplots(1, 4, figsize=(21, 4.6))
    curve_ax, mass_ax, scatter_ax, off_ax = axes
    for n, (arm, block) in enumerate(arms.items()):
        color = f"C{n % 10}"
        ks = [int(k) for k in block["curves"]]
        c = list(block["curves"].values())
        curve_ax.plot(ks, [v["in_domain_lesson_in_context"] or 0 for v in c], "-o", color=color, label=f"{arm}: all")
        curve_ax.plot(
            ks, [v["in_domain_seen_lesson_in_context"] or 0 for v in c], "--", color=color, label=f"{arm}: met"
        )
        mass_ax.plot(ks, [v["domain_e_mass"] or 0 for v in c], "-o", color=color, label=arm)
        points = block["tracking"]["points"]
        rho = block["tracking"]["agent_checkpoint_e_mass_vs_share"]["rho"]
        scatter_ax.scatter(
            [p["e_mass"] for p in points],
            [p["in_domain_share"] or 0 for p in points],
            color=color,
            alpha=0.7,
            label=f"{arm} (rho {'n/a' if rho is None else f'{rho:+.2f}'})",
        )
        off_ax.plot(ks, [v["off_domain_recalled_tokens"] or 0 for v in c], "-o", color=color, label=f"{arm}: out")
        off_ax.plot(ks, [v["in_domain_recalled_tokens"] or 0 for v in c], ":", color=color, label=f"{arm}: in")
    curve_ax.set(
        xlabel="checkpoint (epochs of in-domain work)",
        ylabel="in-domain cases with the lesson in context",
        ylim=(-0.05, 1.05),
    )
    curve_ax.set_title("in-domain curve", fontsize=10)
    mass_ax.set(xlabel="checkpoint", ylabel="domain E mass (sum of E - 0.5 over lessons)")
    mass_ax.set_title("experiential weight of the domain's lessons", fontsize=10)
    scatter_ax.set(xlabel="domain E mass", ylabel="in-domain share", ylim=(-0.05, 1.05))
    scatter_ax.set_title("agent x checkpoint: does the share track E?", fontsize=10)
    off_ax.set(xlabel="checkpoint", ylabel="recalled tokens per case (mean)")
    off_ax.set_title("recalled tokens: out-of-domain (noise) and in-domain", fontsize=10)
    for ax in (curve_ax, mass_ax, off_ax):
        ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7.5)
    fig.suptitle(
        f"Domain imprinting, substrate level ({Path(measured['file']).name}; embedder {embedder_id or 'unnamed'}, "
        "no agent model)",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
