"""perfkit's optional compiled hot path; everything else about the package is in pyproject.toml.

``optional=True``: where no C compiler is present (or the build fails) the install goes on
without it and perfkit runs its pure-Python path (``perfkit --version`` says which is active).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("perfkit._speedups", ["perfkit/_speedups.c"], optional=True)])
