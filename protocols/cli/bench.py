"""``lca bench NAME``: one subcommand per benchmark of the registry (``protocols.bench``); the command line
holds no benchmark's options, each benchmark adds its own."""

from __future__ import annotations

from protocols.bench import available_benchmarks, benchmark


def add_parser(sub) -> None:
    names = available_benchmarks()
    p = sub.add_parser(
        "bench",
        help="benchmarks writing JSON under results/bench/",
        description="Benchmarks, each writing its measurements as JSON under results/bench/. "
        f"Registered: {', '.join(names)}.",
    )
    bench = p.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")
    for name in names:
        registered = benchmark(name)
        b = bench.add_parser(name, help=registered.help, description=registered.description)
        registered.add_arguments(b)
        b.set_defaults(func=registered.run)
