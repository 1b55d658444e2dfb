"""Notebook views: data shaping and plotly figures for one notebook (or a pair) per module."""
