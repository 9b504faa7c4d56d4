"""``pylucid.diffeq``: ordinary differential equation solvers with torchdiffeq's interface.

:func:`odeint` integrates ``dy/dt = func(t, y)`` and is differentiated by
backpropagating through the solver; :func:`odeint_adjoint` gives the same
solution and computes gradients by solving the adjoint system backwards in
time (memory independent of the number of steps); :func:`odeint_event`
integrates until an event function crosses zero, with a differentiable event
time. The methods are Butcher tableaus (``pylucid.diffeq._tableaus``) run by
one explicit and one implicit Runge-Kutta stepper.

>>> import pylucid
>>> from pylucid.diffeq import odeint
>>> t = pylucid.linspace(0.0, 1.0, 3)
>>> y = odeint(lambda t, y: -2.0 * y, pylucid.tensor([1.0]), t)
>>> [round(v, 4) for v in y[:, 0].tolist()]
[1.0, 0.3679, 0.1353]
"""

from __future__ import annotations

from ._adjoint import odeint_adjoint
from ._odeint import odeint, odeint_event
from ._solvers import ADAPTIVE, FIXED, IMPLICIT, METHODS

__all__ = ["ADAPTIVE", "FIXED", "IMPLICIT", "METHODS", "odeint", "odeint_adjoint", "odeint_event"]
