"""perfkit's version, in one place: the package, the run directory and ``perfkit --version`` read it."""

__version__ = "0.1.0"
