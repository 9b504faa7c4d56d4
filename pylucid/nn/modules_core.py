"""The core layer classes of ``pylucid.nn``: Module and containers, linear, activations, normalisation,
dropout, embeddings, attention/transformers and losses (each family in its own module)."""

from . import activation as _activation, dropout as _dropout, linear as _linear, loss as _loss  # noqa: I001
from . import normalization as _normalization, padding as _padding, sparse as _sparse, transformer as _transformer
from .activation import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .module import Buffer, Module, ModuleDict, ModuleList, Parameter, ParameterDict, ParameterList, Sequential
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403

__all__ = ["Buffer", "Module", "ModuleDict", "ModuleList", "Parameter", "ParameterDict", "ParameterList",
           "Sequential"] + [n for m in (_activation, _dropout, _linear, _loss, _normalization, _padding, _sparse,
                                      _transformer)
                            for n in m.__all__]
