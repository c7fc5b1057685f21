"""maxcode: max-reward inference-time search for code optimization."""

__version__ = "0.1.0"
