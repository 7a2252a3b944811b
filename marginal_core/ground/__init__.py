"""Ground: what every stage may use and that uses no stage (docs/design.md, "The order of the stages").

* ``errors``: the errors a user sees, each one line (``MarginalError`` and its kinds).
* ``progress``: how long work reports how far it got and learns that it must stop.
* ``hooks``: the one seam through which a server run changes the library (a no-op elsewhere).
* ``cache_home``: where marginal keeps what it builds once (``$MARGINAL_CACHE``).
"""
