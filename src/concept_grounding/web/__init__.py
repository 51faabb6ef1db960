"""The web shell every app of the project is served in (the Space, the annotation app).

:func:`concept_grounding.web.shell.launch_blocks` launches a ``gr.Blocks`` behind one edge: the
limits of :class:`concept_grounding.web.limits.WebLimits` (one dataclass, one ``Gate``), the
middlewares of :mod:`.middleware`, :mod:`.events` and :mod:`.timeouts`, the paths alias of
:mod:`.paths` and the cache sweep of :mod:`.sweep`. Manual: docs/guide/web_shell.md.
"""
