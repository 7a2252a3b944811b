"""The UI every page shares, defined once: the shared inputs and widgets, the live-page skeleton
(``live_page``), plain words and error messages, links, the lesson and its examples, projector
mode, and the tables and figures several pages show (bounds, counts, top tokenizations, the
downstream tasks' rows and drill-downs)."""
