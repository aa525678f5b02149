"""The package's version, in a leaf module: a record stamps it (``app_version``) and the package
re-exports it, so :mod:`attention_core.records` need not import the package it belongs to."""

from importlib.metadata import PackageNotFoundError, version

try:  # the installed distribution's version (pyproject.toml), written into every record's app_version
    __version__ = version("attention-workbench")
except PackageNotFoundError:  # run from a copy of the sources that was never installed
    __version__ = "0+unknown"
