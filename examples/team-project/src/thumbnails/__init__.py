"""Acme's thumbnails: the lambdas the worker hosts run (thumbnails.lambdas)."""
