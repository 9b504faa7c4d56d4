"""``pylucid.nn.utils.rnn``: padding variable-length sequences.

>>> import pylucid
>>> from pylucid.nn.utils.rnn import pad_sequence
>>> pad_sequence([pylucid.tensor([1, 2, 3]), pylucid.tensor([4])], batch_first=True)
tensor([[1, 2, 3],
        [4, 0, 0]])
"""

from __future__ import annotations

import pylucid as _pl

__all__ = ["pad_sequence", "unpad_sequence"]


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right"):
    """Stack sequences of shape ``(L_i, *)`` into ``(T, B, *)`` (or ``(B, T, *)``), padding with
    ``padding_value`` on ``padding_side`` (``'right'`` or ``'left'``). Differentiable."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: received an empty list of sequences")
    T = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        n = T - s.shape[0]
        if n:
            fill = _pl.full((n,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = _pl.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        rows.append(s)
    return _pl.stack(rows, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first: bool = False) -> list:
    """Inverse of ``pad_sequence`` (right padding): a list of the unpadded sequences."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :int(n)] for i, n in enumerate(lengths)]
