"""Benchmarks and the fuzz rig, importable and runnable as `python -m bench.<name>`.

Each prints its numbers and writes JSON; docs/BENCHMARKS.md records results with the command that made them.
"""
