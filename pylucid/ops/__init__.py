"""Ops: ``OpSchema``, ``AmpPolicy``, the registry and one module per op family.

Every public function is declared once, next to its op class, with
``registry.declare``; this module only imports the families (which registers
them) and re-exports the ``pylucid`` namespace the declarations built.

>>> import pylucid
>>> s = pylucid.ops.schema("mean")
>>> s.amp_policy.value, s.saves_input, s.saves_output
('Promote', False, False)
>>> "sqrt" in pylucid.ops.list_ops()
True
"""

from ._op import Op, apply
from .registry import (
    declaration, declaration_of, declarations, declare, list_ops, namespace, op_class, op_function, schema,
)
from .schema import AmpPolicy, OpSchema

# the families, in dependency order; importing one registers its ops and declarations
from . import conversion, elementwise, compare, reduction, shape, indexing, linalg, activation, scan  # noqa: E402
from . import sorting, special, fft, complex as _complex, nn as _nn, conv, random_ops  # noqa: E402
from . import fused  # noqa: E402
from . import sampling  # noqa: E402
from . import rnn  # noqa: E402

_FAMILIES = (conversion, elementwise, compare, reduction, shape, indexing, linalg, activation, scan, sorting, special,
             fft, _complex, _nn, conv, random_ops, fused, sampling, rnn)


def _exports() -> dict:
    names = {}
    for m in _FAMILIES:  # families not yet declared export through their own __all__
        for n in getattr(m, "__all__", ()):
            if hasattr(m, n):
                names[n] = getattr(m, n)
    names.update(namespace("pylucid"))
    return names


globals().update(_exports())
__all__ = sorted(_exports())
