"""The MPI engine (mpi4py): rendezvous and collectives on host memory.

Every collective is started as a non-blocking MPI call (``Iallreduce``,
``Ibcast``, ...) and completed through :class:`MPIWork`, which polls the
request so that a timeout can end the wait. Buffers go to MPI as contiguous
NumPy arrays: a contiguous CPU tensor is used in place, anything else
(non-contiguous views, CUDA tensors, which MPI is not assumed to read) is
staged through a host copy and written back on completion. float16 and
bfloat16 have no MPI datatype: reductions of them run in float32 and round
once at the end (moving them without reducing is byte-exact).

In a communicator of two ranks, ``all_reduce`` with SUM or AVG exchanges the
two buffers with one ``Isend``/``Irecv`` pair (on a communicator of its own,
so no user receive can match it) and adds locally: each rank then completes
after one poll once its peer has posted, where MPICH's ``Iallreduce`` needs
about five rounds of polls from both ranks. On a machine whose cores are
shared, every round can wait for a time slice of the peer, so fewer rounds
is most of an all-reduce's time there. The sum is the same on both ranks
(``a + b == b + a`` exactly) and the same as MPI's.

``SelfEngine`` is the same interface for a world of one process without
mpi4py (every collective is then a local copy or nothing).
"""

from __future__ import annotations

from . import _arrays as A
from ._work import CompletedWork, Work

np = A.np
_MPI = None


def load():
    """``mpi4py.MPI`` (initialising MPI on first use); ImportError/RuntimeError when unusable."""
    global _MPI
    if _MPI is None:
        import mpi4py

        mpi4py.rc.thread_level = "multiple"  # the NCCL watchdog and user threads may run beside MPI calls
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


class MPIWork(Work):
    """A Work over MPI requests; ``status`` receives the source of a receive."""

    def __init__(self, op, group, timeout, requests, outputs=(), finishers=None, keep=(), status=None,
                 ranks=None) -> None:
        super().__init__(op, group, timeout, outputs, finishers)
        self._reqs = list(requests)
        self._keep = keep  # buffers MPI reads or writes until completion
        self._status = status
        self._ranks = ranks

    def _test(self) -> bool:
        reqs = self._reqs
        if self._status is not None:
            done = reqs[0].Test(self._status)
            if done:
                src = self._status.Get_source()
                self._source = self._ranks[src] if self._ranks is not None else src
            return done
        if len(reqs) == 1:
            return reqs[0].Test()
        return _MPI.Request.Testall(reqs)

    def _finish(self) -> None:
        super()._finish()
        self._keep = None


class _Stage:
    """A contiguous host buffer standing for tensor ``t`` during one MPI call.

    ``read``: fill it with ``t``'s values; ``reduce``: float16/bfloat16 become
    float32. ``finish()`` writes the buffer back into ``t`` unless it is ``t``'s
    own memory, and records the in-place write.
    """

    __slots__ = ("t", "buf", "own")

    def __init__(self, t, read: bool = True, reduce: bool = False) -> None:
        self.t = t
        half = reduce and A.array(t).dtype in A.HALF_DTYPES
        if not A.is_cuda(t) and not half and A.array(t).flags.c_contiguous:
            self.buf, self.own = A.array(t), True
            return
        self.own = False
        if read:
            buf = A.host_copy(t)
            self.buf = buf.astype(np.float32) if half else buf
        else:
            self.buf = A.empty_like(t, dtype=np.float32 if half else None, host=True)

    def finish(self) -> None:
        if self.own:
            A.mark_written(self.t)
        else:
            A.write(self.t, self.buf)


def _host_input(t, reduce: bool = False):
    """A contiguous host array of ``t``'s values that MPI only reads (float32 for half reductions)."""
    buf = A.host_copy(t)
    if reduce and buf.dtype in A.HALF_DTYPES:
        buf = buf.astype(np.float32)
    return buf


def _bytes(buf):
    return buf.reshape(-1).view(np.uint8)


class _Scratch:
    """Receive buffers of the pair exchange, kept for reuse (at most ``cap`` bytes of them).

    A fresh buffer per call would cost page faults every time from 32 MB on (glibc returns
    chunks that large to the OS when they are freed); DDP's buckets reuse the same sizes
    every step.
    """

    def __init__(self, cap: int = 256 * 1024 * 1024) -> None:
        self.free: dict = {}
        self.held = 0
        self.cap = cap

    def take(self, like):
        """An uninitialised array of ``like``'s shape and dtype."""
        n = like.nbytes
        bufs = self.free.get(n)
        raw = None
        if bufs:
            raw = bufs.pop()
            self.held -= n
        if raw is None:
            raw = np.empty(n, dtype=np.uint8)
        return raw.view(like.dtype).reshape(like.shape)

    def give(self, arr) -> None:
        n = arr.nbytes
        if self.held + n <= self.cap:
            self.free.setdefault(n, []).append(arr.reshape(-1).view(np.uint8))
            self.held += n


class MPIEngine:
    """Collectives of one MPI communicator. ``ranks``: the global rank of each rank of ``comm``."""

    name = "mpi"

    def __init__(self, comm, ranks, group=None) -> None:
        MPI = load()
        self.MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.ranks = list(ranks)
        self.group = group
        self.timeout = 1800.0
        self._types = {
            np.dtype(np.float32): MPI.FLOAT, np.dtype(np.float64): MPI.DOUBLE,
            np.dtype(np.complex64): MPI.C_FLOAT_COMPLEX, np.dtype(np.complex128): MPI.C_DOUBLE_COMPLEX,
            np.dtype(np.int8): MPI.INT8_T, np.dtype(np.int16): MPI.INT16_T, np.dtype(np.int32): MPI.INT32_T,
            np.dtype(np.int64): MPI.INT64_T, np.dtype(np.uint8): MPI.UINT8_T, np.dtype(np.bool_): MPI.C_BOOL,
            np.dtype(np.uint16): MPI.UINT16_T, np.dtype(np.uint32): MPI.UINT32_T, np.dtype(np.uint64): MPI.UINT64_T,
        }
        self._ops = {"SUM": MPI.SUM, "AVG": MPI.SUM, "PRODUCT": MPI.PROD, "MIN": MPI.MIN, "MAX": MPI.MAX,
                     "BAND": MPI.BAND, "BOR": MPI.BOR, "BXOR": MPI.BXOR}
        # logical types: PyTorch's bool SUM is OR, PRODUCT is AND
        self._bool_ops = {"SUM": MPI.LOR, "AVG": MPI.LOR, "PRODUCT": MPI.LAND, "MIN": MPI.LAND, "MAX": MPI.LOR,
                          "BAND": MPI.LAND, "BOR": MPI.LOR, "BXOR": MPI.LXOR}
        # two ranks: all-reduce by exchanging buffers, on a duplicate so that no receive of the
        # program's (dist.recv from any source, any tag) can take these messages
        self._pair = comm.Dup() if self.size == 2 else None
        self._scratch = _Scratch()

    # -- helpers -------------------------------------------------------------------
    def _typed(self, buf):
        return [buf, self._types[buf.dtype]]

    def _op(self, op: str, dtype):
        return (self._bool_ops if dtype == np.bool_ else self._ops)[op]

    def _work(self, name, reqs, outputs=(), finishers=(), keep=(), status=None):
        return MPIWork(name, self.group, self.timeout, reqs, outputs, list(finishers), keep, status, self.ranks)

    def _avg(self, buf):
        def scale():
            if self.size > 1:
                buf[...] /= self.size
        return scale

    # -- collectives ----------------------------------------------------------------
    def all_reduce(self, t, op: str) -> Work:
        st = _Stage(t, reduce=True)
        if self._pair is not None and op in ("SUM", "AVG") and st.buf.dtype != np.bool_:
            return self._pair_all_reduce(t, st, op)
        req = self.comm.Iallreduce(self.MPI.IN_PLACE, self._typed(st.buf), self._op(op, st.buf.dtype))
        fins = [self._avg(st.buf), st.finish] if op == "AVG" else [st.finish]
        return self._work("all_reduce", [req], [t], fins, (st,))

    def _pair_all_reduce(self, t, st, op: str) -> Work:
        """SUM/AVG over two ranks: send this buffer, receive the peer's, add (see the module's docstring)."""
        buf = st.buf
        theirs = self._scratch.take(buf)
        peer = 1 - self.rank
        reqs = [self._pair.Irecv(_bytes(theirs), peer, 0), self._pair.Isend(_bytes(buf), peer, 0)]

        def combine():
            with np.errstate(all="ignore"):  # overflow to inf / wrap-around, silently, as in MPI's sum
                np.add(buf, theirs, out=buf)
            self._scratch.give(theirs)
        fins = [combine, self._avg(buf), st.finish] if op == "AVG" else [combine, st.finish]
        return self._work("all_reduce", reqs, [t], fins, (st, theirs))

    def broadcast(self, t, root: int) -> Work:
        mine = self.rank == root
        st = _Stage(t, read=mine)
        req = self.comm.Ibcast(_bytes(st.buf), root)
        return self._work("broadcast", [req], [t], () if mine else [st.finish], (st,))

    def reduce(self, t, root: int, op: str) -> Work:
        if self.rank == root:
            st = _Stage(t, reduce=True)
            req = self.comm.Ireduce(self.MPI.IN_PLACE, self._typed(st.buf), self._op(op, st.buf.dtype), root)
            fins = [self._avg(st.buf), st.finish] if op == "AVG" else [st.finish]
            return self._work("reduce", [req], [t], fins, (st,))
        buf = _host_input(t, reduce=True)
        req = self.comm.Ireduce(self._typed(buf), None, self._op(op, buf.dtype), root)
        return self._work("reduce", [req], [t], (), (buf,))

    def all_gather_into(self, out, inp) -> Work:
        src = _host_input(inp)
        st = _Stage(out, read=False)
        req = self.comm.Iallgather(_bytes(src), _bytes(st.buf))
        return self._work("all_gather", [req], [out], [st.finish], (src, st))

    def reduce_scatter_into(self, out, inp, op: str) -> Work:
        src = _host_input(inp, reduce=True)
        st = _Stage(out, read=False, reduce=True)
        req = self.comm.Ireduce_scatter_block(self._typed(src), self._typed(st.buf), self._op(op, src.dtype))
        fins = [self._avg(st.buf), st.finish] if op == "AVG" else [st.finish]
        return self._work("reduce_scatter", [req], [out], fins, (src, st))

    def gather_into(self, out, inp, root: int) -> Work:
        src = _host_input(inp)
        if self.rank == root:
            st = _Stage(out, read=False)
            req = self.comm.Igather(_bytes(src), _bytes(st.buf), root)
            return self._work("gather", [req], [out], [st.finish], (src, st))
        req = self.comm.Igather(_bytes(src), None, root)
        return self._work("gather", [req], (), (), (src,))

    def scatter_from(self, out, inp, root: int) -> Work:
        st = _Stage(out, read=False)
        src = _host_input(inp) if self.rank == root else None
        req = self.comm.Iscatter(None if src is None else _bytes(src), _bytes(st.buf), root)
        return self._work("scatter", [req], [out], [st.finish], (src, st))

    def all_to_all_single(self, out, inp, out_counts, in_counts) -> Work:
        item = A.array(inp).dtype.itemsize
        src = _host_input(inp)
        st = _Stage(out, read=False)
        sc = [c * item for c in in_counts]
        rc = [c * item for c in out_counts]
        sd = [sum(sc[:i]) for i in range(len(sc))]
        rd = [sum(rc[:i]) for i in range(len(rc))]
        B = self.MPI.BYTE
        req = self.comm.Ialltoallv([_bytes(src), (sc, sd), B], [_bytes(st.buf), (rc, rd), B])
        return self._work("all_to_all", [req], [out], [st.finish], (src, st))

    def send(self, t, peer: int, tag: int) -> Work:
        src = _host_input(t)
        req = self.comm.Isend(_bytes(src), peer, tag)
        return self._work("send", [req], [t], (), (src,))

    def recv(self, t, peer, tag: int) -> Work:
        st = _Stage(t, read=False)
        MPI = self.MPI
        status = MPI.Status()
        req = self.comm.Irecv(_bytes(st.buf), MPI.ANY_SOURCE if peer is None else peer,
                              MPI.ANY_TAG if tag is None else tag)
        w = self._work("recv", [req], [t], [st.finish], (st,), status)
        if peer is not None:
            w._source = self.ranks[peer]
        return w

    def barrier(self) -> Work:
        return self._work("barrier", [self.comm.Ibarrier()])

    # -- groups ---------------------------------------------------------------------
    def split(self, ranks, local: bool):
        """The engine of the sub-communicator of ``ranks`` (indices into this one), None for non-members.
        ``local``: only the members call this (MPI_Comm_create_group); else every rank does."""
        grp = self.comm.Get_group()
        sub = grp.Incl(list(ranks))
        try:
            if local:
                if self.rank not in ranks:
                    return None
                comm = self.comm.Create_group(sub)
            else:
                comm = self.comm.Create(sub)
        finally:
            sub.Free()
            grp.Free()
        if comm == self.MPI.COMM_NULL:
            return None
        return MPIEngine(comm, [self.ranks[r] for r in ranks])

    def bcast_object(self, obj, root: int):
        """Blocking object broadcast (NCCL unique ids)."""
        return self.comm.bcast(obj, root=root)

    def ranks_on_this_node(self) -> int:
        """How many ranks of this communicator share this machine (a collective call)."""
        node = self.comm.Split_type(self.MPI.COMM_TYPE_SHARED)
        try:
            return node.Get_size()
        finally:
            node.Free()

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)

    def close(self) -> None:
        comms = [self.comm] + ([self._pair] if self._pair is not None else [])
        for comm in comms:
            if comm != self.MPI.COMM_WORLD and comm != self.MPI.COMM_NULL:
                try:
                    comm.Free()
                except Exception:  # MPI already finalised at interpreter exit
                    pass
        self._pair = None


class SelfEngine:
    """The engine of a one-process world without MPI: every collective is complete at once."""

    name = "self"

    def __init__(self, ranks=(0,), group=None) -> None:
        self.rank = 0
        self.size = 1
        self.ranks = list(ranks)
        self.group = group
        self.timeout = 1800.0

    def _done(self, name, outputs=(), finishers=()):
        return CompletedWork(name, self.group, outputs, list(finishers))

    def all_reduce(self, t, op):
        return self._done("all_reduce", [t], [lambda: A.mark_written(t)])

    def broadcast(self, t, root):
        return self._done("broadcast", [t])

    def reduce(self, t, root, op):
        return self._done("reduce", [t], [lambda: A.mark_written(t)])

    def _copy(self, name, out, inp):
        return self._done(name, [out], [lambda: A.write(out, A.contiguous(inp))])

    def all_gather_into(self, out, inp):
        return self._copy("all_gather", out, inp)

    def reduce_scatter_into(self, out, inp, op):
        return self._copy("reduce_scatter", out, inp)

    def gather_into(self, out, inp, root):
        return self._copy("gather", out, inp)

    def scatter_from(self, out, inp, root):
        return self._copy("scatter", out, inp)

    def all_to_all_single(self, out, inp, out_counts, in_counts):
        return self._copy("all_to_all", out, inp)

    def send(self, t, peer, tag):
        raise ValueError("send: a world of one process has no other rank to send to")

    def recv(self, t, peer, tag):
        raise ValueError("recv: a world of one process has no other rank to receive from")

    def barrier(self):
        return self._done("barrier")

    def split(self, ranks, local):
        return SelfEngine([self.ranks[r] for r in ranks]) if 0 in ranks else None

    def bcast_object(self, obj, root):
        return obj

    def ranks_on_this_node(self) -> int:
        return 1

    def abort(self, code: int = 1) -> None:
        import os

        os._exit(code)

    def close(self) -> None:
        pass
