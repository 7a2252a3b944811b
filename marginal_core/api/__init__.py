"""The one-call forms of the public API (``mc.estimate``, ``mc.surprisal``, ``mc.scan``,
``mc.build_lattice`` in ``calls``; ``mc.compare`` in ``comparison``): each takes what the
command line takes, a model's name with its device and dtype included."""
