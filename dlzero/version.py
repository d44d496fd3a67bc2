"""The package version, in a module of its own so that low layers (the run directory's info file)
can read it without importing the package's public facade."""

__version__ = "0.1.0"
