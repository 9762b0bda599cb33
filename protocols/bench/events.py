"""``lca bench events``: how well the model-free change detector finds, without labels, the turns a later turn
corrected or superseded; and (``--fit``) the fitting of its model.

Each scenario file is read with its corrections and supersessions unlabelled (``--labels none``, the default:
``protocols.harness.scenario.without_labels``), so the gold is the events the labels named (or ``gold_events``) and
the detector sees plain turns. The detector is the product's (``lca.change_detector.StructuralChangeDetector``, as
``lca.events.EventBook.observe`` runs it at ingest), read over each scenario's turns in order. Per file and over all:
precision and recall of the inferred events against gold at the hold-back and marking thresholds, counted on the
replaced turn (``of_*``: what recall acts on) and on the pair (``pair_*``).

``--fit OUT`` fits the detector's logistic model (``lca.change_detector.ChangeModel``) on the screened candidate pairs
of the given files, scored leave one file out (scikit-learn's ``LeaveOneGroupOut``: each file a group), then on all
of them, and writes OUT (the shipped model is ``lca/change_model.json``). Fit on some files and measure on others:
the record says which were which.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from lca.events import precision_recall
from protocols.evals.benchmark import Benchmark, BenchmarkResult, build_provenance, dataset_provenance, write_result
from protocols.harness.scenario import load_scenarios, without_labels

THRESHOLDS = (0.5, 0.65, 0.8, 0.85, 0.9)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenarios", action="append", required=True, help="a scenario file (repeatable)")
    parser.add_argument("--labels", choices=("none", "mixed"), default="none", help="how the files are read")
    parser.add_argument("--model", help="a model file to measure (default: the shipped lca/change_model.json)")
    parser.add_argument("--fit", metavar="OUT", help="fit the detector's model on the files and write it to OUT")
    parser.add_argument("--hold", type=float, default=None, help="the hold-back threshold (default: recall's)")
    parser.add_argument("--mark", type=float, default=None, help="the marking threshold (default: recall's)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of --labels mixed")
    parser.add_argument("--out", default="results/bench/events.json")


def scenario_turns(scenario: Any) -> list[Any]:
    """A scenario's turns as the transcript entries a host appends, in order."""
    return [entry for session in scenario.sessions for entry in scenario.entries(session)]


def read_files(paths: Sequence[Path], labels: str, seed: int) -> list[tuple[Path, str, list[Any]]]:
    out = []
    for path in paths:
        scenarios, digest = load_scenarios(path)
        out.append((path, digest, [without_labels(s, labels, seed=seed) for s in scenarios]))
    return out


def detect(scenarios: Iterable[Any], model: Any) -> tuple[list[Any], set[tuple[str, str]]]:
    """The detector's events over each scenario (a fresh detector each, as a fresh store) and the gold pairs that no
    label names (what the detector must find)."""
    from lca.change_detector import StructuralChangeDetector

    found, gold = [], set()
    for scenario in scenarios:
        detector = StructuralChangeDetector(model=model, min_confidence=min(THRESHOLDS) - 0.1)
        found.extend(detector.observe(scenario_turns(scenario)))
        gold |= {(e["of"], e["by"]) for e in scenario.replacement_events() if not e["labelled"]}
    return found, gold


def figures(found: Sequence[Any], gold: set[tuple[str, str]], thresholds: Iterable[float]) -> dict[str, Any]:
    return {f"{t:g}": precision_recall(found, gold, threshold=t) for t in thresholds}


FIT = {"n_estimators": 200, "max_depth": 2, "learning_rate": 0.1, "min_samples_leaf": 10, "random_state": 0}


def model_from_sklearn(fitted: Any, fitted_on: Sequence[str]) -> Any:
    """A fitted ``GradientBoostingClassifier`` (binary, log loss) as the detector's ``ChangeModel``."""
    import numpy as np

    from lca.change_detector import FEATURES, ChangeModel, Tree

    probe = np.zeros((1, len(FEATURES)))
    init = float(fitted.decision_function(probe)[0]) - fitted.learning_rate * sum(
        float(tree[0].predict(probe)[0]) for tree in fitted.estimators_
    )
    trees = tuple(
        Tree(
            tuple(int(v) for v in t.tree_.feature),
            tuple(round(float(v), 6) for v in t.tree_.threshold),
            tuple(int(v) for v in t.tree_.children_left),
            tuple(int(v) for v in t.tree_.children_right),
            tuple(round(float(v), 6) for v in t.tree_.value[:, 0, 0]),
        )
        for (t,) in fitted.estimators_
    )
    return ChangeModel(round(init, 6), float(fitted.learning_rate), trees, tuple(fitted_on))


def fit_model(files: Sequence[tuple[Path, str, list[Any]]]) -> tuple[Any, dict[str, Any]]:
    """The model fitted on every screened candidate pair of ``files`` (label: the pair is gold), and its leave one
    file out figures: precision and recall of the best candidate per new turn, as the detector keeps it."""
    import numpy as np
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.model_selection import LeaveOneGroupOut

    from lca.change_detector import FEATURES, ChangeModel, StructuralChangeDetector

    rows, labels, groups, pairs = [], [], [], []
    all_gold: set[tuple[str, str]] = set()
    for number, (_, _, scenarios) in enumerate(files):
        for scenario in scenarios:
            gold = {(e["of"], e["by"]) for e in scenario.replacement_events() if not e["labelled"]}
            all_gold |= gold
            detector = StructuralChangeDetector(model=ChangeModel(0.0))
            for of, by, features in detector.candidate_pairs(scenario_turns(scenario)):
                rows.append([features[name] for name in FEATURES])
                labels.append(int((of, by) in gold))
                groups.append(number)
                pairs.append((of, by))
    x, y, g = np.asarray(rows), np.asarray(labels), np.asarray(groups)
    held_out = np.zeros(len(y))
    for train, test in LeaveOneGroupOut().split(x, y, g):
        if len(set(y[train])) < 2:
            continue
        held_out[test] = GradientBoostingClassifier(**FIT).fit(x[train], y[train]).predict_proba(x[test])[:, 1]
    final = GradientBoostingClassifier(**FIT).fit(x, y)
    model = model_from_sklearn(final, [f"{path.name}@{digest[:12]}" for path, digest, _ in files])
    # as the detector keeps them: the best candidate of each new turn
    best: dict[str, tuple[float, str]] = {}
    for (of, by), p in zip(pairs, held_out, strict=True):
        if by not in best or p > best[by][0]:
            best[by] = (float(p), of)
    reachable = {pair for pair, label in zip(pairs, labels, strict=True) if label}
    cv: dict[str, Any] = {"candidate_pairs": len(y), "positive_pairs": int(y.sum()), "gold_events": len(all_gold)}
    cv["gold_reachable"] = round(len(reachable) / len(all_gold), 4) if all_gold else None
    cv["fit"] = dict(FIT)
    for t in THRESHOLDS:
        kept = {(of, by) for by, (p, of) in best.items() if p >= t}
        right = kept & all_gold
        cv[f"{t:g}"] = {
            "kept": len(kept),
            "precision": round(len(right) / len(kept), 4) if kept else None,
            "recall": round(len(right) / len(all_gold), 4) if all_gold else None,
        }
    return model, cv


def run_events_bench(args: argparse.Namespace) -> int:
    from lca.change_detector import ChangeModel
    from lca.recall import RecallConfig

    paths = [Path(p) for p in args.scenarios]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"lca bench events: no scenario file at {', '.join(missing)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    files = read_files(paths, args.labels, args.seed)
    config: dict[str, Any] = {"labels": args.labels, "files": [str(p) for p in paths]}
    metrics: dict[str, Any] = {}
    if args.fit:
        model, cv = fit_model(files)
        Path(args.fit).parent.mkdir(parents=True, exist_ok=True)
        Path(args.fit).write_text(json.dumps(model.to_dict(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        metrics["fit_leave_one_file_out"] = cv
        config["fit_written_to"] = args.fit
        print(f"fitted on {len(files)} files; leave one file out: {json.dumps(cv)}")
        print(f"model written to {args.fit}")
    else:
        model = ChangeModel.from_dict(json.loads(Path(args.model).read_text()), path=args.model) if args.model else None
        model = model or ChangeModel.shipped()
        defaults = RecallConfig()
        hold = defaults.hold_confidence if args.hold is None else args.hold
        mark = defaults.mark_confidence if args.mark is None else args.mark
        thresholds = sorted({mark, hold, *THRESHOLDS})
        config.update({"hold": hold, "mark": mark, "model": args.model or "lca/change_model.json"})
        every, all_gold = [], set()
        for path, _, scenarios in files:
            found, gold = detect(scenarios, model)
            metrics[str(path)] = figures(found, gold, thresholds)
            every.extend(found)
            all_gold |= gold
            at = metrics[str(path)][f"{hold:g}"]
            print(
                f"{path}: at hold {hold:g} precision {at['of_precision']} recall {at['of_recall']} ({at['inferred']} kept of {at['gold']} gold)"
            )
        metrics["all"] = figures(every, all_gold, thresholds)
        at = metrics["all"][f"{hold:g}"]
        print(f"all: at hold {hold:g} precision {at['of_precision']} recall {at['of_recall']}")
        config["fitted_on"] = list(model.fitted_on)
    result = BenchmarkResult(
        benchmark="events",
        metrics=metrics,
        config=config,
        provenance=build_provenance(
            datasets=[dataset_provenance(str(p), sha256=d) for p, d, _ in files],
            seeds={"seed": args.seed},
            wall_seconds=time.perf_counter() - started,
        ),
    )
    write_result(result, Path(args.out))
    print(f"written to {args.out}")
    return 0


BENCHMARK = Benchmark(
    name="events",
    help="precision and recall of the model-free change detector on unlabelled scenario files; --fit fits its model",
    description=__doc__ or "",
    add_arguments=add_arguments,
    run=run_events_bench,
)
