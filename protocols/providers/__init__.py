"""inspect-ai model providers of this project, registered by importing ``protocols._registry``
(the ``inspect_ai`` entry point): ``lca-local`` (``protocols.providers.lca_local``)."""

from protocols.providers.lca_local import LCALocalAPI, lca_local_api

__all__ = ["LCALocalAPI", "lca_local_api"]
