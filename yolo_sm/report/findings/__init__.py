"""Headline findings per notebook: each module holds the ``RULES`` of one notebook."""
