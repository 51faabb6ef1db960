"""Experiments whose results the README and the guide report, as tested stages the ``benchmarks/`` scripts call
(research code beside the scripts, not part of the wheel; ``python benchmarks/<script>.py`` finds it there).

:mod:`.world_tdg`: TDG vs prompting on the world-trained Flux, judged by the grounded world
judge (``benchmarks/bench_tdg_world.py``; its settings in :mod:`.world_tdg_settings`, judges in
:mod:`.world_tdg_judges`, stages in :mod:`.world_tdg_stages`); :mod:`.world_tdg_stats`: its table,
power and report; :mod:`.world_compositions`: how often a world Flux draws what a composition prompt asks
(``benchmarks/bench_world_compositions.py``).
Nothing is imported here (import the modules themselves).
"""
