"""Instrumentation for the index benchmark: call meters, other processes' CPU use, BLAS threads, summaries."""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


class Meter:
    """Counts calls, items and seconds of selected methods by shadowing them on the instance."""

    def __init__(self) -> None:
        self.totals: dict[str, list[float]] = {}
        self._patched: list[tuple[object, str]] = []

    def wrap(self, obj: object, name: str, label: str | None = None, items: Callable[..., int] | None = None) -> None:
        original = getattr(obj, name)
        key = label or name
        totals = self.totals.setdefault(key, [0, 0, 0.0])

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                totals[0] += 1
                totals[1] += items(*args, **kwargs) if items else 0
                totals[2] += time.perf_counter() - started

        setattr(obj, name, wrapper)
        self._patched.append((obj, name))

    def restore(self) -> None:
        for obj, name in reversed(self._patched):
            try:
                delattr(obj, name)
            except AttributeError:
                pass
        self._patched.clear()

    def snapshot(self) -> dict[str, tuple[float, float, float]]:
        return {k: (v[0], v[1], v[2]) for k, v in self.totals.items()}

    def since(self, before: dict[str, tuple[float, float, float]]) -> dict[str, dict[str, float]]:
        out = {}
        for key, now in self.totals.items():
            then = before.get(key, (0, 0, 0.0))
            out[key] = {
                "calls": int(now[0] - then[0]),
                "items": int(now[1] - then[1]),
                "seconds": round(now[2] - then[2], 4),
            }
        return out


class CpuWatch:
    """Other processes' CPU use while a phase runs: busy machine time minus this process's own.

    The latency targets are for an otherwise idle 2-core machine; multi-threaded torch,
    faiss and BLAS slow down sharply when another process holds a core, so every phase
    records how many cores something else kept busy (``other_cores``).
    """

    def __init__(self) -> None:
        self._start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        busy = 0.0
        try:
            with open("/proc/stat") as handle:
                fields = [int(x) for x in handle.readline().split()[1:9]]
            busy = (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return busy, usage.ru_utime + usage.ru_stime, time.perf_counter()

    def restart(self) -> None:
        self._start = self._sample()

    def read(self) -> dict[str, float]:
        busy, own, now = self._sample()
        wall = now - self._start[2]
        other = max(0.0, (busy - self._start[0]) - (own - self._start[1]))
        return {
            "wall_seconds": round(wall, 3),
            "own_cpu_seconds": round(own - self._start[1], 3),
            "other_cpu_seconds": round(other, 3),
            "other_cores": round(other / wall, 3) if wall else 0.0,
        }


def one_blas_thread():
    """A context limiting BLAS libraries to one thread, and a note saying what it did."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        return contextlib.nullcontext(), {"limited": False, "why": "threadpoolctl is not installed"}
    before = [
        {"library": Path(i.get("filepath", "")).name, "api": i.get("internal_api"), "threads": i.get("num_threads")}
        for i in threadpool_info()
    ]
    return threadpool_limits(limits=1, user_api="blas"), {
        "limited": True,
        "limit": 1,
        "user_api": "blas",
        "pools_by_default": before,
    }


def summary(values_ms: list[float]) -> dict[str, float]:
    """n, p50, p95, mean, min and max of some timings in milliseconds."""
    arr = np.asarray(values_ms, dtype=np.float64)
    if not len(arr):
        return {"n": 0}
    return {
        "n": int(len(arr)),
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p95_ms": round(float(np.percentile(arr, 95)), 3),
        "mean_ms": round(float(arr.mean()), 3),
        "min_ms": round(float(arr.min()), 3),
        "max_ms": round(float(arr.max()), 3),
    }


def measured(meter: Meter, run: Callable[[], Any]) -> tuple[Any, float, dict[str, float], dict[str, Any]]:
    """Run one ingest phase: its result, wall seconds, CPU use (ours and others') and metered calls."""
    before = meter.snapshot()
    watch = CpuWatch()
    started = time.perf_counter()
    out = run()
    wall = time.perf_counter() - started
    return out, wall, watch.read(), meter.since(before)
