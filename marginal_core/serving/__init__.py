"""Serving: many sessions' model work on one machine (docs/design.md, "Turns").

* ``turns``: runs take fair turns on the shared device; ``batching``: their like requests in one pass.

The library sees this stage only through ``ground.hooks`` and runs without it; the app's server
(``pages/_app/runtime/server.py``) and the benches use it.
"""
