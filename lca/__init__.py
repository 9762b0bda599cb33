"""The Layered Continuity Architecture substrate.

The verbatim, append-only transcript is the authority; memory files, indexes and
health are views derived from it. This package imports neither ``conditions``,
``protocols`` nor ``inspect_ai``.
"""

__version__ = "0.1.0"
