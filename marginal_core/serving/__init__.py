"""Stage 4, serving: many sessions' model work on one machine (docs/design.md, "Turns").

* ``hooks``: the one seam through which a server run changes the library (a no-op elsewhere).
* ``turns``: runs take fair turns on the shared device; ``batching``: their like requests in one pass.

The library runs without this stage; the app's server (``pages/_app/server.py``) and the benches use it.
"""
