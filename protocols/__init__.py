"""Experiments as inspect-ai tasks, benchmarks, reports and the ``lca`` command line.

The packages are layered, each importing only those below it (enforced by import-linter, pyproject.toml;
``a | b`` are siblings that do not import each other):

    cli | _registry                     the command line; inspect's entry point
    report | audit                      the report and the audit of a study run
    bench | study                       ``lca bench`` plug-ins; pre-registered studies and their runner
    evals                               the protocols, one folder each, with their registry and data paths
    harness                             what protocols run on: scenarios, solvers, scorers, planning, replay
    scenarios | providers | analysis    scenario generators; model providers; statistics and raters
"""
