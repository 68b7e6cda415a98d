"""Benchmarks: ``brainmem-ros bench`` (the memory core as the store grows)."""
