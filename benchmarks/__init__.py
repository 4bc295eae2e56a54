"""Benchmarks: one ``bench_<family>.py`` per family on the shared runner :mod:`benchmarks.harness`.

Run ``python benchmarks/bench_<family>.py --device cuda --out results/`` (``--quick`` for small
sizes); see ``benchmarks/README.md``.
"""
