"""Switches for the libraries behind the CUDA backend, under PyTorch's names (``torch.backends``).

* ``pylucid.backends.cudnn``: ``enabled`` (convolutions and attention go through cuDNN wherever it takes
  the configuration; False: pylucid's own kernels everywhere), ``benchmark`` (for each new configuration,
  time the first few engines cuDNN's heuristics propose and keep the fastest), ``deterministic`` (only
  engines without atomic accumulation; ``pylucid.use_deterministic_algorithms(True)`` implies it),
  ``allow_tf32`` (float32 convolutions may use TF32 tensor cores; True, as PyTorch);
* ``pylucid.backends.cuda.matmul.allow_tf32``: float32 GEMMs may use TF32 (False, as PyTorch);
* ``pylucid.backends.mkldnn``: ``enabled`` (CPU convolutions go through oneDNN where it is installed, the
  ``onednn`` extra, and takes the configuration; False: the GEMM kernels everywhere).

The switches are read at every call, so they take effect at once.

>>> import pylucid.backends
>>> pylucid.backends.cudnn.enabled, pylucid.backends.cuda.matmul.allow_tf32
(True, False)
"""

from . import cuda, cudnn, mkldnn

__all__ = ["cuda", "cudnn", "mkldnn"]
