"""Argument checks for code built on perfkit: fail at construction, naming the parameter and the value.

The same checks perfkit's own constructors make, for an integration (such as perfkit-lightning)
that must refuse a bad argument with the same words. A bool is never taken for a number.

>>> from perfkit.checks import check_int, check_number
>>> check_int(5, "top_k", low=1), check_number(0.5, "interval_s", high=3600)
(5, 0.5)
>>> check_int(0, "log_interval", low=1)
Traceback (most recent call last):
...
ValueError: log_interval must be an int >= 1, got 0
"""

from ._validate import check_int, check_name, check_number

__all__ = ["check_int", "check_name", "check_number"]
