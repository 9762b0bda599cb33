"""``lca run PROTOCOL --conditions a,b --model M``: an inspect eval_set over conditions."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path


def _pairs(pairs: list[str] | None, flag: str, shape: str) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"lca: error: {flag} takes {shape}, got '{pair}'")
        out[key] = value
    return out


def resolve_model(model: str):
    """Fail before any sample runs when the model string cannot be resolved (the provider's message)."""
    from inspect_ai.model import get_model

    from lca.errors import LCAError

    try:
        return get_model(model)
    except Exception as exc:  # any provider error: report it as given
        raise LCAError(f"model '{model}' cannot be resolved: {exc}") from None


def cmd_run(args: argparse.Namespace) -> int:
    from inspect_ai import eval_set

    from conditions import available_conditions, condition_class
    from protocols.evals import protocol_task

    task_fn = protocol_task(args.protocol)
    names = [c.strip() for c in args.conditions.split(",") if c.strip()]
    for name in names:
        condition_class(name)  # refuses unknown names with the list
    if not names:
        raise SystemExit(f"lca: error: --conditions is empty; known: {', '.join(available_conditions())}")
    task_args = _pairs(args.task_arg, "-T", "key=value")
    roles = _pairs(args.role, "--role", "role=model")
    tasks = [task_fn(condition=name, **task_args) for name in names]  # bad task arguments fail here
    resolve_model(args.model)
    for role_model in roles.values():
        resolve_model(role_model)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    log_dir = Path(args.log_dir or f"results/logs/{args.protocol}-{stamp}")
    ok, logs = eval_set(tasks, log_dir=str(log_dir), model=args.model, model_roles=roles or None,
                        limit=args.limit, display=args.display, retry_attempts=args.retry_attempts)
    summary = []
    for log in logs:
        scores = {}
        for result in (log.results.scores if log.results else []):
            for metric_name, metric in result.metrics.items():
                scores[f"{result.scorer}/{result.name}/{metric_name}"] = round(metric.value, 4)
        summary.append({"task": log.eval.task, "status": log.status,
                        "samples": log.results.completed_samples if log.results else 0,
                        "scores": scores, "log": log.location})
    print(json.dumps({"log_dir": str(log_dir), "ok": ok, "tasks": summary}, indent=2))
    return 0 if ok else 1


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a protocol under several conditions as an inspect eval_set",
                       description="Run PROTOCOL once per condition with inspect's eval_set; logs go to "
                                   "results/logs/PROTOCOL-TIME/ (inspect view shows them).")
    p.add_argument("protocol")
    p.add_argument("--conditions", required=True, help="comma-separated condition names")
    p.add_argument("--model", required=True, help="any inspect model string, e.g. lca-local/smollm2")
    p.add_argument("--role", action="append", help="role=model for summarizer, reviewer, grader (default: --model)")
    p.add_argument("--limit", type=int, help="samples per task")
    p.add_argument("-T", dest="task_arg", action="append", help="task argument key=value (repeatable)")
    p.add_argument("--log-dir")
    p.add_argument("--display", default="rich", choices=["full", "rich", "plain", "conversation", "log", "none"])
    p.add_argument("--retry-attempts", type=int, default=0)
    p.set_defaults(func=cmd_run)
