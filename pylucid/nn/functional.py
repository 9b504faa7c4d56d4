"""pylucid.nn.functional: the functional forms of the nn layers and losses."""

from ._functional_core import *  # noqa: F401,F403
from ._functional_conv import *  # noqa: F401,F403
