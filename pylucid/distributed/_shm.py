"""Memory shared by the ranks of one machine, for DistributedDataParallel's gradient buckets.

A segment is a file in ``/dev/shm`` that every rank maps; group rank 0 makes
it and removes its name once every rank has mapped it (the memory lives until
the last rank unmaps it, so nothing is left behind when a rank dies later).
It holds, for each rank in turn, ``nflags`` int64 flags and ``data`` bytes.

A rank writes into its own part only and then raises a flag; the others
read that part once they see the flag. The flag is a plain store after the
data's stores, and a reader loads the flag before the data: on x86-64 the
processor keeps stores in order and loads in order (total store order), so
the data is complete when the flag is seen. Other architectures would need
memory barriers that Python cannot issue, so :func:`supported` is False
there and DDP keeps its MPI all-reduce.
"""

from __future__ import annotations

import mmap
import os
import platform
import secrets

from ._arrays import np

__all__ = ["supported", "create", "attach", "remove", "Segment"]

_DIR = "/dev/shm"
_ALIGN = 64  # a cache line: no two ranks write into one
#: the most a segment may take: this many bytes, and half of what /dev/shm has free
MAX_BYTES = 2 * 1024**3


def supported() -> bool:
    return (platform.machine().lower() in ("x86_64", "amd64") and os.name == "posix"
            and os.path.isdir(_DIR) and os.access(_DIR, os.W_OK))


def aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def create(nbytes: int):
    """Make a segment of ``nbytes`` (its pages reserved now, so a full ``/dev/shm`` fails here and not
    with SIGBUS later): ``(name, mmap)``, or ``(None, None)`` when that is not possible or the segment
    would exceed :data:`MAX_BYTES` or half of the free space of ``/dev/shm``."""
    try:
        st = os.statvfs(_DIR)
    except OSError:
        return None, None
    if nbytes > min(MAX_BYTES, st.f_bavail * st.f_frsize // 2):
        return None, None
    name = os.path.join(_DIR, f"pylucid-ddp-{os.getpid()}-{secrets.token_hex(8)}")
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None, None
    try:
        os.posix_fallocate(fd, 0, nbytes)
        mm = mmap.mmap(fd, nbytes)
    except (OSError, ValueError):
        os.close(fd)
        remove(name)
        return None, None
    os.close(fd)
    return name, mm


def attach(name: str, nbytes: int):
    """Map the segment ``name`` made by another rank (None when this rank cannot: another machine)."""
    try:
        fd = os.open(name, os.O_RDWR)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size != nbytes:
            return None
        return mmap.mmap(fd, nbytes)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def remove(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


class Segment:
    """A mapped segment seen as ``world`` parts: flags and data per rank."""

    def __init__(self, mm, world: int, rank: int, nflags: int, data: int) -> None:
        self._mm = mm
        self.rank = rank
        self.world = world
        flag_bytes = aligned(8 * max(nflags, 1))
        self.part = self.part_bytes(nflags, data)
        raw = np.frombuffer(mm, dtype=np.uint8)
        self._raw = raw
        self.flags = [raw[k * self.part:k * self.part + 8 * nflags].view(np.int64) for k in range(world)]
        self._data0 = flag_bytes
        self._mine = self.flags[rank]

    @staticmethod
    def part_bytes(nflags: int, data: int) -> int:
        """Bytes of one rank's part: its flags, then its data, each cache-line aligned."""
        return aligned(8 * max(nflags, 1)) + aligned(data)

    def array(self, k: int, offset: int, shape, dtype):
        """A view of rank ``k``'s data at byte ``offset``."""
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start = k * self.part + self._data0 + offset
        return self._raw[start:start + n].view(dtype).reshape(shape)

    def publish(self, i: int, gen: int) -> None:
        """Raise this rank's flag ``i`` to ``gen`` (after the data's stores: see the module docstring)."""
        self._mine[i] = gen

    def reached(self, i: int, gen: int) -> bool:
        """Whether every rank's flag ``i`` is at ``gen`` or beyond."""
        for f in self.flags:
            if f[i] < gen:
                return False
        return True

    def behind(self, i: int, gen: int) -> list:
        """Ranks (of the group) whose flag ``i`` is below ``gen``."""
        return [k for k, f in enumerate(self.flags) if f[i] < gen]
