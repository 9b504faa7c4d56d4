"""NumPy's floating-point warnings, silenced inside pylucid.

NumPy reports IEEE floating-point events (``0/0``, overflow, ``log(0)``, ...) and NaN-only reductions as
``RuntimeWarning``\\ s attributed to the Python line that called it. In pylucid those lines are kernels whose inf or
NaN result *is* the defined answer, the one PyTorch returns without a word. So the warnings are ignored when they are
attributed to a pylucid module, and only then: NumPy called from user code warns as always, and pylucid's own
warnings (they never start with these phrases) are untouched. Being a filter, it costs nothing until a warning is
raised, unlike an ``errstate`` around every kernel.
"""

from __future__ import annotations

import warnings

FP_EVENTS = (r"(invalid value|divide by zero|overflow|underflow) encountered|Mean of empty slice|"
             r"All-NaN (slice|axis) encountered|Degrees of freedom <= 0 for slice")


def install() -> None:
    """Add the filter (again: ``warnings.catch_warnings`` blocks and ``simplefilter`` calls can drop it)."""
    warnings.filterwarnings("ignore", message=FP_EVENTS, category=RuntimeWarning, module=r"pylucid(\.|$)")


install()
