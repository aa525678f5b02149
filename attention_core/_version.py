"""The package's version, in a leaf module: a record stamps it (``app_version``) and the package
re-exports it, so :mod:`attention_core.records` need not import the package it belongs to."""

__version__ = "0.1.0"
