"""Providers: what turns a prompt into a kernel candidate.

`registry.make_provider(cfg)` picks one; `base` holds the interface every provider implements.
"""
