"""Model providers of this project.

``lca-local`` (``protocols.providers.lca_local``) is an inspect-ai model provider, registered by
importing ``protocols._registry`` (the ``inspect_ai`` entry point). ``protocols.providers.models``
turns any model string into a ``TextGenerator`` for the harness and the command line; it imports
inspect only for non-local model strings, so this package imports nothing on its own.
``protocols.providers.structured`` gets a JSON-schema answer from any inspect model: the API's structured
output (``json_schema``, or llama-cpp-python's ``json_object`` with a schema), validated, asked again when
invalid.
"""
