"""pylucid.nn.functional: the functional forms of the nn layers and losses.

Every name here is a declaration of namespace ``pylucid.nn.functional``: the
activations and convolutions/pools of ``pylucid.ops``, and the layers and
losses of ``pylucid.nn._functional_core`` / ``_functional_conv`` (importing
them declares them).

>>> import pylucid
>>> import pylucid.nn.functional as F
>>> F.relu is pylucid.relu
True
"""

from ..ops import registry as _registry
from . import _functional_conv, _functional_core, _functional_loss, _functional_pool, _functional_sampling  # noqa: F401 - importing them declares them

globals().update(_registry.namespace("pylucid.nn.functional"))
__all__ = sorted(_registry.namespace("pylucid.nn.functional"))
