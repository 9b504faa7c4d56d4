"""The OpInfo samples tests/test_opinfo.py does not run, each with its reason.

A skip names an OpInfo (``name`` or ``name.variant``), a dtype (``float32``,
``float64``, ``int64``, ``bool`` or ``*``), a sample kind (``forward``,
``grad``, ``gradgrad`` or ``*``) and, optionally, a predicate choosing the
samples it covers. Its category says why:

- ``deviation``: pylucid deliberately does otherwise; the reason cites the
  semantics page (docs/semantics/) that documents it;
- ``not implemented``: the op or this form of it does not exist yet;
- ``known bug``: a mismatch with PyTorch that the op's owner has yet to fix
  (listed in the conformance report); these are skipped only so that the rest of
  the op's samples keep guarding it.

docs/semantics/opinfo.md summarises the list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Skip:
    op: str
    dtype: str
    kind: str
    category: str
    reason: str
    #: the sample it covers, as ``dtype_free(tests.test_opinfo.sample_repr(s))`` writes it ("" = every sample)
    sample: str = ""
    when: Callable | None = None


def _kw(name, value=None):
    """Samples whose keyword ``name`` is given (and, with ``value``, equals it)."""
    def pred(s):
        return name in s.kwargs and (value is None or s.kwargs[name] == value)
    return pred


SKIPS: list[Skip] = [
    Skip('addmv', 'int64', 'forward', 'known bug',
         "(linalgops) output: dtype pylucid.float32 != torch's torch.int64",
         sample='(T[]:D, T[5, 10]:D, T[10]:D, beta=0.2, alpha=0.6)'),
    Skip('argsort', 'bool', 'forward', 'deviation',
         'which index comes back among equal values is unspecified in PyTorch; the values agree '
         '(docs/semantics/opinfo.md)',
         sample='(T[8000]:D)'),
    Skip('as_strided.partial_views', '*', 'forward', 'deviation',
         'as_strided reads the row-major layout of the tensor it is given, not the storage behind a view '
         '(docs/semantics/shape_indexing.md)',
         sample='(T[10]:D, (2, 2), (1, 2), storage_offset=0)'),
    Skip('as_strided.partial_views', '*', 'forward', 'deviation',
         'as_strided reads the row-major layout of the tensor it is given, not the storage behind a view '
         '(docs/semantics/shape_indexing.md)',
         sample='(T[10]:D, (2, 2), (1, 2), storage_offset=10)'),
    Skip('as_strided.partial_views', '*', 'grad', 'deviation',
         'as_strided reads the row-major layout of the tensor it is given, not the storage behind a view '
         '(docs/semantics/shape_indexing.md)',
         sample='(T[10]:D, requires_grad, (2, 2), (1, 2), storage_offset=0)'),
    Skip('as_strided.partial_views', '*', 'grad', 'deviation',
         'as_strided reads the row-major layout of the tensor it is given, not the storage behind a view '
         '(docs/semantics/shape_indexing.md)',
         sample='(T[10]:D, requires_grad, (2, 2), (1, 2), storage_offset=10)'),
    Skip('as_strided.partial_views', '*', 'gradgrad', 'deviation',
         'as_strided reads the row-major layout of the tensor it is given, not the storage behind a view '
         '(docs/semantics/shape_indexing.md)',
         sample='(T[10]:D, requires_grad, (2, 2), (1, 2), storage_offset=10)'),
    Skip('as_strided_scatter', '*', 'grad', 'deviation',
         "PyTorch 2.13 passes the gradient through to the overwritten positions of input; pylucid's is the "
         'exact derivative, zero there (docs/semantics/opinfo.md)',
         sample='(T[16]:D, requires_grad, T[2, 1, 1, 2]:D, requires_grad, (2, 1, 1, 2), (1, 2, 4, 8), '
                'storage_offset=0)'),
    Skip('as_strided_scatter', '*', 'grad', 'deviation',
         "PyTorch 2.13 passes the gradient through to the overwritten positions of input; pylucid's is the "
         'exact derivative, zero there (docs/semantics/opinfo.md)',
         sample='(T[1]:D, requires_grad, T[]:D, requires_grad, (), (), storage_offset=0)'),
    Skip('as_strided_scatter', '*', 'grad', 'deviation',
         "PyTorch 2.13 passes the gradient through to the overwritten positions of input; pylucid's is the "
         'exact derivative, zero there (docs/semantics/opinfo.md)',
         sample='(T[3, 3]:D, requires_grad, T[2, 2]:D, requires_grad, (2, 2), (1, 2), storage_offset=1)'),
    Skip('baddbmm', 'int64', 'forward', 'known bug',
         "(linalgops) output: dtype pylucid.float32 != torch's torch.int64",
         sample='(T[5, 5, 10]:D, T[5, 5, 5]:D, T[5, 5, 10]:D, beta=0.2, alpha=0.6)'),
    Skip('baddbmm', 'int64', 'forward', 'known bug',
         "(linalgops) output: dtype pylucid.float32 != torch's torch.int64",
         sample='(T[]:D, T[5, 5, 5]:D, T[5, 5, 10]:D, beta=0.2, alpha=0.6)'),
    Skip('div.floor_rounding', '*', 'grad', 'known bug',
         '(mathops) output[0] does not require grad'),
    Skip('div.floor_rounding', '*', 'gradgrad', 'known bug',
         '(mathops) output[0] does not require grad'),
    Skip('div.trunc_rounding', '*', 'grad', 'known bug',
         '(mathops) output[0] does not require grad'),
    Skip('div.trunc_rounding', '*', 'gradgrad', 'known bug',
         '(mathops) output[0] does not require grad'),
    Skip('kthvalue', 'int64', 'forward', 'deviation',
         'which index comes back among equal values is unspecified in PyTorch; the values agree '
         '(docs/semantics/opinfo.md)',
         sample='(T[5, 5, 5]:D, 2)'),
    Skip('kthvalue', 'int64', 'forward', 'deviation',
         'which index comes back among equal values is unspecified in PyTorch; the values agree '
         '(docs/semantics/opinfo.md)',
         sample='(T[5, 5, 5]:D, 2, -1, True)'),
    Skip('linalg.cholesky', '*', 'grad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (1, 1, 0, 0) and B (1, 1, 0, 0) '
         'do not broadcast: cannot reshape array of size 0 into shape (0',
         sample='(T[1, 1, 0, 0]:D, requires_grad, upper=False)'),
    Skip('linalg.cholesky', '*', 'gradgrad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (1, 1, 0, 0) and B (1, 1, 0, 0) '
         'do not broadcast: cannot reshape array of size 0 into shape (0',
         sample='(T[1, 1, 0, 0]:D, requires_grad, upper=False)'),
    Skip('linalg.cholesky_ex', '*', 'grad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (1, 1, 0, 0) and B (1, 1, 0, 0) '
         'do not broadcast: cannot reshape array of size 0 into shape (0',
         sample='(T[1, 1, 0, 0]:D, requires_grad, upper=False)'),
    Skip('linalg.cholesky_ex', '*', 'gradgrad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (1, 1, 0, 0) and B (1, 1, 0, 0) '
         'do not broadcast: cannot reshape array of size 0 into shape (0',
         sample='(T[1, 1, 0, 0]:D, requires_grad, upper=False)'),
    Skip('linalg.eigh', '*', 'forward', 'deviation',
         'eigenvectors and singular vectors are unique only up to sign; LAPACK drivers choose differently, the '
         'absolute values agree (docs/semantics/opinfo.md)',
         sample="(T[2, 5, 5]:D, UPLO='U')"),
    Skip('linalg.eigh', 'float64', 'forward', 'deviation',
         'eigenvectors and singular vectors are unique only up to sign; LAPACK drivers choose differently, the '
         'absolute values agree (docs/semantics/opinfo.md)',
         sample="(T[5, 5]:D, UPLO='U')"),
    Skip('linalg.lstsq', '*', 'forward', 'known bug',
         "(linalgops) output[2]: shape () != torch's (0,)",
         sample="(T[2, 3]:D, T[2, 3]:D, driver='gels')"),
    Skip('linalg.lstsq', '*', 'forward', 'known bug',
         "(linalgops) output[3]: shape (0,) != torch's (3, 2)",
         sample="(T[3, 2, 3]:D, T[3, 2, 3]:D, driver='gelss')"),
    Skip('linalg.lstsq', '*', 'forward', 'known bug',
         "(linalgops) output[1]: shape (0,) != torch's (3, 3, 3)",
         sample="(T[3, 3, 4, 3]:D, T[3, 3, 4, 3]:D, driver='gelsd')"),
    Skip('linalg.lstsq', '*', 'grad', 'known bug',
         '(linalgops) output[1] does not require grad'),
    Skip('linalg.lstsq', '*', 'gradgrad', 'known bug',
         '(linalgops) output[1] does not require grad'),
    Skip('linalg.lstsq.grad_oriented', '*', 'forward', 'known bug',
         "(linalgops) output[1]: shape (0,) != torch's (3, 3, 3)",
         sample="(T[3, 3, 4, 3]:D, T[3, 3, 4, 3]:D, driver='gelsd')"),
    Skip('linalg.lstsq.grad_oriented', '*', 'grad', 'known bug',
         '(linalgops) output[1] does not require grad'),
    Skip('linalg.lstsq.grad_oriented', '*', 'gradgrad', 'known bug',
         '(linalgops) output[1] does not require grad'),
    Skip('linalg.lu_factor', '*', 'grad', 'known bug',
         '(linalgops) LucidError: linalg.lu_factor: the derivative is implemented for square matrices only, '
         'got shape (0, 7, 5)'),
    Skip('linalg.lu_factor', '*', 'gradgrad', 'known bug',
         '(linalgops) LucidError: linalg.lu_factor: the derivative is implemented for square matrices only, '
         'got shape (0, 7, 5)'),
    Skip('linalg.lu_solve', '*', 'forward', 'known bug',
         '(linalgops) ValueError: cannot reshape array of size 0 into shape (0)',
         sample='(T[2, 0, 0]:D, T[2, 0]:int32, T[2, 0, 0]:D, adjoint=False, left=False)'),
    Skip('linalg.lu_solve', '*', 'grad', 'known bug',
         '(linalgops) ValueError: cannot reshape array of size 0 into shape (0)',
         sample='(T[2, 0, 0]:D, T[2, 0]:int32, T[2, 0, 0]:D, requires_grad, adjoint=False, left=False)'),
    Skip('linalg.lu_solve', '*', 'gradgrad', 'known bug',
         '(linalgops) ValueError: cannot reshape array of size 0 into shape (0)',
         sample='(T[2, 0, 0]:D, T[2, 0]:int32, T[2, 0, 0]:D, requires_grad, adjoint=False, left=False)'),
    Skip('linalg.norm.subgradients_at_zero', '*', 'forward', 'known bug',
         '(linalgops) IndexError: amax: expected reduction dim 0 to have non-zero size, shape is (0,)',
         sample='(T[0, 5]:D, 2, keepdim=True)'),
    Skip('linalg.norm.subgradients_at_zero', '*', 'gradgrad', 'known bug',
         '(linalgops) gradgrad of input 0: max |diff| inf at (np.int64(0),) (5 of 5 differ)',
         sample='(T[5]:D, requires_grad, None, keepdim=False)'),
    Skip('linalg.pinv', '*', 'forward', 'not implemented',
         '(linalgops) TypeError: linalg.pinv: rtol as a Tensor is not supported; pass a float',
         sample='(T[1, 1, 0, 0]:D, rtol=T[]:D)'),
    Skip('linalg.pinv', '*', 'grad', 'not implemented',
         '(linalgops) TypeError: linalg.pinv: rtol as a Tensor is not supported; pass a float',
         sample='(T[1, 1, 0, 0]:D, requires_grad, rtol=T[]:D)'),
    Skip('linalg.pinv', '*', 'gradgrad', 'not implemented',
         '(linalgops) TypeError: linalg.pinv: rtol as a Tensor is not supported; pass a float',
         sample='(T[1, 1, 0, 0]:D, requires_grad, rtol=T[]:D)'),
    Skip('linalg.qr', '*', 'grad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (1, 1, 0, 0) and B (1, 1, 0, 0) '
         'do not broadcast: cannot reshape array of size 0 into shape (0',
         sample='(T[1, 1, 0, 0]:D, requires_grad)'),
    Skip('linalg.qr', '*', 'gradgrad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (1, 1, 0, 0) and B (1, 1, 0, 0) '
         'do not broadcast: cannot reshape array of size 0 into shape (0',
         sample='(T[1, 1, 0, 0]:D, requires_grad)'),
    Skip('linalg.solve_triangular', '*', 'forward', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (0, 0, 0) and B (0, 0, 0) do not '
         'broadcast: cannot reshape array of size 0 into shape (0,0)',
         sample='(T[0, 0, 0]:D, T[0, 0, 0]:D, upper=False, left=False, unitriangular=False)'),
    Skip('linalg.solve_triangular', '*', 'forward', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (2, 0, 0) and B (2, 0, 1) do not '
         'broadcast: cannot reshape array of size 0 into shape (0,0)',
         sample='(T[2, 0, 0]:D, T[2, 0, 1]:D, upper=True, left=True, unitriangular=True)'),
    Skip('linalg.solve_triangular', '*', 'grad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (0, 0, 0) and B (0, 0, 0) do not '
         'broadcast: cannot reshape array of size 0 into shape (0,0)',
         sample='(T[0, 0, 0]:D, T[0, 0, 0]:D, requires_grad, upper=False, left=False, unitriangular=False)'),
    Skip('linalg.solve_triangular', '*', 'grad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (2, 0, 0) and B (2, 0, 1) do not '
         'broadcast: cannot reshape array of size 0 into shape (0,0)',
         sample='(T[2, 0, 0]:D, requires_grad, T[2, 0, 1]:D, requires_grad, upper=True, left=True, '
                'unitriangular=True)'),
    Skip('linalg.solve_triangular', '*', 'gradgrad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (0, 0, 0) and B (0, 0, 0) do not '
         'broadcast: cannot reshape array of size 0 into shape (0,0)',
         sample='(T[0, 0, 0]:D, T[0, 0, 0]:D, requires_grad, upper=False, left=False, unitriangular=False)'),
    Skip('linalg.solve_triangular', '*', 'gradgrad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (2, 0, 0) and B (2, 0, 1) do not '
         'broadcast: cannot reshape array of size 0 into shape (0,0)',
         sample='(T[2, 0, 0]:D, requires_grad, T[2, 0, 1]:D, requires_grad, upper=True, left=True, '
                'unitriangular=True)'),
    Skip('linalg.svd', 'float32', 'forward', 'deviation',
         'eigenvectors and singular vectors are unique only up to sign; LAPACK drivers choose differently, the '
         'absolute values agree (docs/semantics/opinfo.md)',
         sample='(T[3, 5, 5]:D, full_matrices=False)'),
    Skip('matrix_exp', 'float32', 'forward', 'known bug',
         '(linalgops) output: max |diff| 0.000568 at (np.int64(2), np.int64(4), np.int64(1)) (1 of 125 differ)',
         sample='(T[5, 5, 5]:D)'),
    Skip('mode', 'int64', 'forward', 'deviation',
         'which index comes back among equal values is unspecified in PyTorch; the values agree '
         '(docs/semantics/opinfo.md)',
         sample='(T[3000]:D)'),
    Skip('mode', 'bool', 'forward', 'deviation',
         'which index comes back among equal values is unspecified in PyTorch; the values agree '
         '(docs/semantics/opinfo.md)',
         sample='(T[3000]:D)'),
    Skip('nn.functional.avg_pool1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[0, 3, 9]:D, (6,), stride=(3,), padding=(2,), ceil_mode=False, count_include_pad=True)'),
    Skip('nn.functional.avg_pool1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 2, 9]:D, (7,), stride=(3,), ceil_mode=True)'),
    Skip('nn.functional.avg_pool1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[2, 3, 9]:D, (3,))'),
    Skip('nn.functional.avg_pool2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 3, 9, 9]:D, 3, 1, 1, True, False, 2)'),
    Skip('nn.functional.avg_pool2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 3, 9, 9]:D, 3, 3)'),
    Skip('nn.functional.avg_pool2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[2, 3, 9, 9]:D, (3, 3), (1, 1), (1,), True, False, 2)'),
    Skip('nn.functional.avg_pool3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[0, 1, 4, 5, 4]:D, (2, 3, 1), stride=(2, 1, 2), padding=0, ceil_mode=False, '
                'count_include_pad=True, divisor_override=None)'),
    Skip('nn.functional.avg_pool3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 1, 7, 5, 7]:D, (6, 3, 4), stride=(2, 3, 2), padding=(3, 1, 0), ceil_mode=False, '
                'count_include_pad=False, divisor_override=2)'),
    Skip('nn.functional.avg_pool3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[2, 3, 3, 4, 4]:D, (2, 2, 2))'),
    Skip('nn.functional.conv1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 3, 4]:D, T[3, 3, 3]:D, T[3]:D, stride=(2,), padding=2, groups=1)'),
    Skip('nn.functional.conv1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample="(T[1, 4, 5]:D, T[1, 4, 3]:D, None, stride=(2,), padding='valid')"),
    Skip('nn.functional.conv1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[4, 5]:D, T[3, 4, 3]:D, None)'),
    Skip('nn.functional.conv2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 3, 4, 4]:D, T[3, 3, 3, 3]:D, T[3]:D, stride=(2, 2), padding=2, groups=1)'),
    Skip('nn.functional.conv2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[2, 4, 6, 6]:D, T[4, 1, 3, 3]:D, T[4]:D, groups=4)'),
    Skip('nn.functional.conv2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[4, 5, 5]:D, T[3, 4, 3, 3]:D, None)'),
    Skip('nn.functional.conv3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample="(T[1, 1, 10, 11, 12]:D, T[1, 1, 1, 2, 5]:D, None, padding='same', dilation=2)"),
    Skip('nn.functional.conv3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample="(T[1, 1, 4, 4, 4]:D, T[1, 1, 1, 1, 1]:D, T[1]:D, padding='same')"),
    Skip('nn.functional.conv3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[9, 3, 1, 9]:D, T[3, 3, 3, 1, 9]:D, T[3]:D, stride=(2, 2, 2), dilation=1, groups=3)'),
    Skip('nn.functional.conv_transpose1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 1, 4]:D, T[1, 1, 4]:D, T[1]:D, stride=2, padding=1, output_padding=1, groups=1, '
                'dilation=(2,))'),
    Skip('nn.functional.conv_transpose1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 3, 4]:D, T[3, 3, 3]:D, T[3]:D, stride=(2,), padding=2, output_padding=(1,), groups=1)'),
    Skip('nn.functional.conv_transpose1d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[4, 5]:D, T[4, 8, 3]:D, None)'),
    Skip('nn.functional.conv_transpose2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 1, 4, 3]:D, T[1, 2, 3, 4]:D, None, stride=2, padding=1, output_padding=1, groups=1)'),
    Skip('nn.functional.conv_transpose2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 3, 4, 4]:D, T[3, 3, 3, 3]:D, T[3]:D, stride=(2, 2), padding=2, output_padding=(1, 1), '
                'groups=1)'),
    Skip('nn.functional.conv_transpose2d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[2, 5, 5]:D, T[2, 4, 3, 3]:D, None)'),
    Skip('nn.functional.conv_transpose3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 1, 4, 5, 2]:D, T[1, 1, 4, 3, 1]:D, T[1]:D, stride=2, padding=1, output_padding=1, '
                'groups=1, dilation=(2, 3, 2))'),
    Skip('nn.functional.conv_transpose3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[1, 3, 4, 4, 4]:D, T[3, 3, 3, 3, 3]:D, T[3]:D, stride=(2, 2, 2), padding=2, '
                'output_padding=(1, 1, 1), groups=1)'),
    Skip('nn.functional.conv_transpose3d', 'int64', 'forward', 'deviation',
         'conv/pool take floating dtypes only (docs/semantics/nn_conv.md)',
         sample='(T[4, 5, 5, 5]:D, T[4, 8, 3, 3, 3]:D, None)'),
    Skip('nn.functional.ctc_loss', '*', 'gradgrad', 'not implemented',
         '(nnops) RuntimeError: derivative for aten::_ctc_loss_backward is not implemented'),
    Skip('nn.functional.embedding', '*', 'forward', 'not implemented',
         '(nnops) NotImplementedError: embedding: scale_grad_by_freq and sparse gradients are not supported by '
         'pylucid',
         sample='(T[5, 5]:D, T[3, 3]:D, sparse=True, scale_grad_by_freq=True, padding_idx=0, max_norm=1.0)'),
    Skip('nn.functional.interpolate.area', '*', 'forward', 'not implemented',
         "(nnops) NotImplementedError: interpolate: mode 'area' is not supported; accepted: 'nearest', "
         "'nearest-exact', 'linear', 'bilinear', 'trilinear'"),
    Skip('nn.functional.interpolate.area', '*', 'grad', 'not implemented',
         "(nnops) NotImplementedError: interpolate: mode 'area' is not supported; accepted: 'nearest', "
         "'nearest-exact', 'linear', 'bilinear', 'trilinear'"),
    Skip('nn.functional.interpolate.area', '*', 'gradgrad', 'not implemented',
         "(nnops) NotImplementedError: interpolate: mode 'area' is not supported; accepted: 'nearest', "
         "'nearest-exact', 'linear', 'bilinear', 'trilinear'"),
    Skip('nn.functional.interpolate.bicubic', '*', 'forward', 'not implemented',
         "(nnops) NotImplementedError: interpolate: mode 'bicubic' is not supported; accepted: 'nearest', "
         "'nearest-exact', 'linear', 'bilinear', 'trilinear'"),
    Skip('nn.functional.interpolate.bicubic', '*', 'grad', 'not implemented',
         "(nnops) NotImplementedError: interpolate: mode 'bicubic' is not supported; accepted: 'nearest', "
         "'nearest-exact', 'linear', 'bilinear', 'trilinear'"),
    Skip('nn.functional.interpolate.bicubic', '*', 'gradgrad', 'not implemented',
         "(nnops) NotImplementedError: interpolate: mode 'bicubic' is not supported; accepted: 'nearest', "
         "'nearest-exact', 'linear', 'bilinear', 'trilinear'"),
    Skip('nn.functional.local_response_norm', 'int64', 'forward', 'known bug',
         "(nnops) output: dtype pylucid.float32 != torch's torch.int64",
         sample='(T[0, 1, 2]:D, 1, alpha=3e-05, beta=0.5, k=1.25)'),
    Skip('nn.functional.multi_head_attention_forward', '*', 'forward', 'not implemented',
         '(nnops) NotImplementedError: multi_head_attention_forward: '
         'bias_k/bias_v/add_zero_attn/static_k/static_v are not supported by pylucid'),
    Skip('nn.functional.multi_head_attention_forward', '*', 'grad', 'not implemented',
         '(nnops) NotImplementedError: multi_head_attention_forward: '
         'bias_k/bias_v/add_zero_attn/static_k/static_v are not supported by pylucid'),
    Skip('nn.functional.multi_head_attention_forward', '*', 'gradgrad', 'not implemented',
         '(nnops) NotImplementedError: multi_head_attention_forward: '
         'bias_k/bias_v/add_zero_attn/static_k/static_v are not supported by pylucid'),
    Skip('nn.functional.normalize', '*', 'forward', 'known bug',
         '(nnops) ZeroDivisionError: float division by zero',
         sample='(T[1, 3, 4, 5]:D, p=0.0, dim=-1)'),
    Skip('nn.functional.normalize', '*', 'grad', 'known bug',
         '(nnops) ZeroDivisionError: float division by zero',
         sample='(T[1, 3, 4, 5]:D, requires_grad, p=0.0, dim=-1)'),
    Skip('nn.functional.normalize', '*', 'gradgrad', 'known bug',
         '(nnops) ZeroDivisionError: float division by zero',
         sample='(T[1, 3, 4, 5]:D, requires_grad, p=0.0, dim=-1)'),
    Skip('nn.functional.scaled_dot_product_attention', '*', 'gradgrad', 'not implemented',
         '(nnops) RuntimeError: derivative for aten::_scaled_dot_product_flash_attention_for_cpu_backward is '
         'not implemented',
         sample='(T[4, 4, 3, 8]:D, requires_grad, T[4, 4, 6, 8]:D, requires_grad, T[4, 4, 6, 8]:D, '
                'requires_grad, is_causal=False, dropout_p=0.0)'),
    Skip('normal.number_mean', 'float32', 'forward', 'known bug',
         "(mathops) TypeError: normal() got an unexpected keyword argument 'layout'",
         sample="(1.6, 0.3, [2, 2, 2], dtype=torch.float32, layout=torch.strided, device='cpu')"),
    Skip('normal.number_mean', 'float64', 'forward', 'known bug',
         "(mathops) TypeError: normal() got an unexpected keyword argument 'layout'",
         sample="(1.6, 0.3, [2, 2, 2], dtype=torch.float64, layout=torch.strided, device='cpu')"),
    Skip('prod', 'bool', 'forward', 'known bug',
         "(mathops) output: dtype pylucid.int64 != torch's torch.bool",
         sample='(T[5, 5, 5]:D, 1, dtype=torch.bool)'),
    Skip('qr', '*', 'grad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (1, 1, 0, 0) and B (1, 1, 0, 0) '
         'do not broadcast: cannot reshape array of size 0 into shape (0',
         sample='(T[1, 1, 0, 0]:D, requires_grad)'),
    Skip('qr', '*', 'gradgrad', 'known bug',
         '(linalgops) ShapeMismatch: linalg.solve_triangular: batch dims of A (1, 1, 0, 0) and B (1, 1, 0, 0) '
         'do not broadcast: cannot reshape array of size 0 into shape (0',
         sample='(T[1, 1, 0, 0]:D, requires_grad)'),
    Skip('searchsorted', '*', 'forward', 'known bug',
         '(mathops) ValueError: cannot reshape array of size 0 into shape (0)',
         sample='(T[0, 0]:D, T[0, 0]:D, out_int32=False, right=False)'),
    Skip('sort', 'bool', 'forward', 'deviation',
         'which index comes back among equal values is unspecified in PyTorch; the values agree '
         '(docs/semantics/opinfo.md)',
         sample='(T[8000]:D)'),
    Skip('sum_to_size', 'bool', 'forward', 'known bug',
         "(mathops) output: dtype pylucid.bool != torch's torch.int64",
         sample='(T[]:D, ())'),
    Skip('tensordot', '*', 'forward', 'known bug',
         '(linalgops) ShapeMismatch: tensordot: contracted dims differ in size: shapes (1, 1, 1) (dim 0) and '
         '(2, 1, 2) (dim 2)',
         sample='(T[1, 1, 1]:D, T[2, 1, 2]:D, dims=([0, 1], [2, 0]))'),
    Skip('tensordot', '*', 'grad', 'known bug',
         '(linalgops) ShapeMismatch: tensordot: contracted dims differ in size: shapes (1, 1, 1) (dim 0) and '
         '(2, 1, 2) (dim 2)',
         sample='(T[1, 1, 1]:D, requires_grad, T[2, 1, 2]:D, requires_grad, dims=([0, 1], [2, 0]))'),
    Skip('tensordot', '*', 'gradgrad', 'known bug',
         '(linalgops) ShapeMismatch: tensordot: contracted dims differ in size: shapes (1, 1, 1) (dim 0) and '
         '(2, 1, 2) (dim 2)',
         sample='(T[1, 1, 1]:D, requires_grad, T[2, 1, 2]:D, requires_grad, dims=([0, 1], [2, 0]))'),
    Skip('topk', 'int64', 'forward', 'deviation',
         'which index comes back among equal values is unspecified in PyTorch; the values agree '
         '(docs/semantics/opinfo.md)',
         sample='(T[5, 10, 5]:D, 3)'),
    Skip('topk', 'int64', 'forward', 'deviation',
         'which index comes back among equal values is unspecified in PyTorch; the values agree '
         '(docs/semantics/opinfo.md)',
         sample='(T[5, 10, 5]:D, 3, -2, True, True)'),
    Skip('unique_consecutive', '*', 'forward', 'known bug',
         '(mathops) ValueError: cannot reshape array of size 0 into shape (0,newaxis)',
         sample='(T[5, 0, 5]:D, return_inverse=True, return_counts=True, dim=1)'),
]

_BY_OP: dict[str, list[Skip]] = {}
for _s in SKIPS:
    _BY_OP.setdefault(_s.op, []).append(_s)


def dtype_free(text: str) -> str:
    """A sample's written form with the tested dtype's name replaced by ``D``, so one skip covers every dtype."""
    return re.sub(r":(float32|float64|int64|bool)\b", ":D", text)


def lookup(op: str, dtype: str, kind: str, sample, describe) -> Skip | None:
    """The skip covering this sample, if any; ``describe(sample)`` gives its written form."""
    text = None
    for s in _BY_OP.get(op, ()):
        if s.dtype not in ("*", dtype) or s.kind not in ("*", kind) or (s.when is not None and not s.when(sample)):
            continue
        if s.sample:
            text = dtype_free(describe(sample)) if text is None else text
            if text != s.sample:
                continue
        return s
    return None
