"""Generated scenario sets: a seeded generator of multi-session histories with planted events and probes
(``generate``), and the data card that says how a set was made and what it holds (``data_card``)."""

from protocols.scenarios.card import data_card, write_set
from protocols.scenarios.generator import CATEGORIES, DENSITIES, GENERATOR_VERSION, generate

__all__ = ["CATEGORIES", "DENSITIES", "GENERATOR_VERSION", "data_card", "generate", "write_set"]
