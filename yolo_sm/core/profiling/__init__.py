"""Profiler wrappers: each captures to a file and loads that file into a tidy DataFrame."""
