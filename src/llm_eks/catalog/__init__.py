"""Catalogs of facts (instance types with accelerators, model architectures): pure data and lookups.

Both sides read them: the planner (infra) and the charts' validation and synth-time checks (manifests), so they
live outside both and import neither.
"""
