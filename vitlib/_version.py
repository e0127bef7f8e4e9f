"""The version of vitlib, in one place (pyproject.toml reads it from here)."""

__version__ = "0.3.0"
