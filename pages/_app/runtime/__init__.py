"""The server's runtime: how it starts (``serve``) and what it lets visitors ask (``server``), the
turns every session's model work takes (``machine``), models and results cached once per server
(``loaders``, ``shared_results``), live runs with Stop (``live``), the devices it offers
(``device_choices``), the results folders it opens (``folders``) and its allocator (``_malloc``)."""
