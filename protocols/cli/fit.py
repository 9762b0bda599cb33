"""``lca fit retrieval|recall``: the retrieval fusion weights, or recall's resonance weights, fitted on a labelled
benchmark with grouped cross-validation, written (a RetrievalConfig YAML, or a ``weights:`` file) only when they
beat the defaults on held-out folds (``protocols.bench.fit``)."""

from __future__ import annotations

from protocols.evals.datasets import options_by_flag


def add_parser(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="fit ranking weights on labelled data, held-out folds deciding whether they are written",
        description="Fit ranking weights with scikit-learn from a labelled benchmark, grouped cross-validation; "
        "write them only when they beat the defaults on held-out folds (exit 1 otherwise).",
    )
    fit = p.add_subparsers(dest="fit", required=True, metavar="WHAT")
    r = fit.add_parser(
        "retrieval",
        help="the retrieval fusion and signal weights (a RetrievalConfig YAML)",
        description="LoCoMo: leave one conversation out; LongMemEval: grouped folds by haystack. The held-out "
        "figure is the product's search under each fold's fitted config against the defaults on the same questions.",
    )
    add_options(r, "retrieval.yaml", "the starting RetrievalConfig YAML (default: the dataset's retrieval.yaml)")
    c = fit.add_parser(
        "recall",
        help="recall's resonance weights (a weights: YAML, the format of a task's recall-weights.yaml)",
        description="The same folds and contract, on the candidates recall ranks (the bench's resonance retriever).",
    )
    add_options(c, "recall.yaml", "the starting weights: YAML (default: the dataset's recall-weights.yaml)")


def add_options(r, out: str, config: str) -> None:
    r.add_argument("--dataset", choices=["locomo", "longmemeval"], required=True)
    r.add_argument("--data", help="the official file (plain, .gz or .xz) or a folder holding it")
    r.add_argument("--config", help=config)
    r.add_argument("--out", default=out, help="the fitted file (written only if it beats the defaults held out)")
    r.add_argument("--folds", type=int, default=5, help="grouped folds where the dataset is not left out one by one")
    r.add_argument("--depth", type=int, default=50, help="irrelevant candidates a question the fit reads")
    r.add_argument("--c", type=float, default=1.0, help="the logistic regression's C (inverse regularization)")
    r.add_argument("--limit", type=int, help="first N conversations (LoCoMo) or questions (LongMemEval)")
    for option, _ in options_by_flag("retrieval").values():  # LongMemEval's --roles
        option.add_to(r)
    r.add_argument("--cache", default="results/bench/cache", help="embedding cache folder (kept across runs)")
    r.add_argument("--workdir", default="results/bench/work-fit", help="where the stores are built")
    r.add_argument("--quiet", action="store_true")
    r.set_defaults(func=_fit)


def _fit(args) -> int:
    from protocols.bench.fit.run import fit_command

    return fit_command(args)
