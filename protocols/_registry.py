"""inspect-ai extension entry point (``[project.entry-points.inspect_ai] lca = "protocols._registry"``).

inspect loads this module when it meets a name it does not know (e.g. ``--model lca-local/smollm2``);
importing it registers this project's extensions: the ``lca-local`` model provider.
"""

import protocols.providers.lca_local  # noqa: F401  (registers @modelapi(name="lca-local"))
