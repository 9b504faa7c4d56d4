"""The NCCL engine (``cupy.cuda.nccl``): collectives on CUDA tensors.

One NCCL communicator per (process group, GPU), made on first use: group rank
0 draws the unique id and the host engine (MPI) broadcasts it. Each
communicator runs on its own CUDA stream, as PyTorch's does: a collective
waits (on the device) for the work queued so far on the caller's current
stream, runs on the NCCL stream, and ``Work.wait()`` makes the current stream
wait for it; the host never blocks unless asked to (``wait(timeout=...)``,
``barrier``). Buffers stay referenced until their collective has run, so
CuPy's memory pool cannot hand them out again too early.

Datatypes NCCL lacks are mapped as PyTorch maps them: bool as uint8 (SUM is
OR through MAX, PRODUCT is AND through MIN), complex as pairs of reals
(SUM and AVG only), int16 reductions through int32; moving data without
reducing is done on bytes, so every dtype travels exactly.

A watchdog thread checks the running collectives; one that outlives the
process group's timeout aborts the communicator and ends the process with
the reason on stderr (the launcher then ends the other ranks), which is what
PyTorch's NCCL watchdog does by default.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref

from ..backend import nccl as _nccl_library
from . import _arrays as A
from ._work import Work, spin_until

np = A.np

_REDUCE = {"SUM": 0, "PRODUCT": 1, "MAX": 2, "MIN": 3, "AVG": 4}
_BOOL_REDUCE = {"SUM": 2, "AVG": 2, "PRODUCT": 3, "MAX": 2, "MIN": 3, "BOR": 2, "BAND": 3}
_UINT8 = 1


def _nccl_types():
    return {
        np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int32): 2, np.dtype(np.uint32): 3,
        np.dtype(np.int64): 4, np.dtype(np.uint64): 5, np.dtype(np.float16): 6, np.dtype(np.float32): 7,
        np.dtype(np.float64): 8, np.dtype("bfloat16"): 9,
    }


def _ptr(a) -> int:
    """The device address of CuPy array ``a``."""
    return a.data.ptr


def available() -> bool:
    return _nccl_library.available()


class NCCLWork(Work):
    """A collective queued on an NCCL stream; ``done`` is the CUDA event recorded after it."""

    def __init__(self, op, group, timeout, done, device_index, outputs=(), finishers=None, keep=()) -> None:
        super().__init__(op, group, timeout, outputs, finishers)
        self._event = done
        self._device_index = device_index
        self._keep = keep

    def _test(self) -> bool:
        return self._event.done

    def _release(self) -> None:
        self._keep = None

    def _finish(self) -> None:
        super()._finish()

    def wait(self, timeout=None) -> bool:
        """Make the current CUDA stream wait for the collective (the host does not block); with
        ``timeout`` the host blocks until it finished, raising past the timeout."""
        if self._exc is not None:
            raise self._exc
        if self._done:
            return True
        cp, _ = _nccl_library.modules()

        with cp.cuda.Device(self._device_index):
            if timeout is not None:
                from ._work import _seconds

                spin_until(self._test, time.monotonic() + _seconds(timeout), self._timed_out)
            cp.cuda.get_current_stream().wait_event(self._event)
            self._finish()  # copy-backs are queued on the current stream, after the collective
        return True


class _Watchdog:
    """Ends the process when an NCCL collective outlives its timeout (it would otherwise hang forever)."""

    def __init__(self) -> None:
        self._works: list = []
        self._lock = threading.Lock()
        self._thread = None

    def add(self, work, engine) -> None:
        with self._lock:
            self._works.append((weakref.ref(work), work._event, work._started, work._timeout, engine))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pylucid-nccl-watchdog", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(1.0)
            now = time.monotonic()
            with self._lock:
                live = []
                for entry in self._works:
                    ref, event, started, timeout, engine = entry
                    try:
                        done = event.done
                    except Exception:
                        done = True
                    if done:
                        continue
                    if now - started > timeout:
                        w = ref()
                        op = w._op if w is not None else "collective"
                        sys.stderr.write(
                            f"[rank {engine.global_rank}] pylucid.distributed NCCL watchdog: {op} did not complete "
                            f"within the timeout ({timeout:g} s); another rank failed or did not call it. "
                            "Aborting the communicator and this process.\n")
                        sys.stderr.flush()
                        engine.abort_all()
                        os._exit(1)
                    live.append(entry)
                self._works = live


_WATCHDOG = _Watchdog()


class NCCLEngine:
    """NCCL collectives of one process group; ``host`` is the group's MPI (or self) engine."""

    name = "nccl"

    def __init__(self, host, group=None) -> None:
        cp, nccl = _nccl_library.modules()
        if not getattr(nccl, "available", False):
            raise RuntimeError("pylucid.distributed: CuPy was built without NCCL (cupy.cuda.nccl.available is False)")
        self.cp = cp
        self.nccl = nccl
        self.host = host
        self.rank = host.rank
        self.size = host.size
        self.ranks = host.ranks
        self.global_rank = host.ranks[host.rank]
        self.group = group
        self.timeout = host.timeout
        self._comms: dict = {}  # device index -> (NcclCommunicator, stream)
        self._inflight: list = []
        self._types = _nccl_types()
        self._version = nccl.get_version()

    # -- communicators -------------------------------------------------------------
    def _comm(self, index: int):
        got = self._comms.get(index)
        if got is None:
            uid = self.nccl.get_unique_id() if self.rank == 0 else None
            uid = self.host.bcast_object(uid, 0)
            with self.cp.cuda.Device(index):
                comm = self.nccl.NcclCommunicator(self.size, uid, self.rank)
                stream = self.cp.cuda.Stream(non_blocking=True)
            got = self._comms[index] = (comm, stream)
        return got

    def _each_comm(self, method: str) -> None:
        for comm, _ in self._comms.values():
            try:
                getattr(comm, method)()
            except Exception:  # teardown of a communicator that already failed: nothing more to report
                pass

    def abort_all(self) -> None:
        self._each_comm("abort")

    def close(self) -> None:
        self._each_comm("destroy")
        self._comms.clear()

    # -- launching ---------------------------------------------------------------------
    def _launch(self, name, dev_index, body, outputs=(), finishers=(), keep=()):
        """Run ``body(comm, stream_ptr)`` on the NCCL stream after the current stream's queued work."""
        cp = self.cp
        self._inflight = [w for w in self._inflight if not w._event.done]
        comm, stream = self._comm(dev_index)
        with cp.cuda.Device(dev_index):
            ready = cp.cuda.Event(disable_timing=True)
            ready.record(cp.cuda.get_current_stream())
            stream.wait_event(ready)
            body(comm, stream.ptr)
            done = cp.cuda.Event(disable_timing=True)
            done.record(stream)
        w = NCCLWork(name, self.group, self.timeout, done, dev_index, outputs, list(finishers), keep)
        self._inflight.append(w)  # buffers stay alive until the device ran the collective
        _WATCHDOG.add(w, self)
        return w

    def _reduce_view(self, arr, op: str, name: str):
        """(buffer, nccl dtype, count, nccl op, post) for reducing ``arr`` (contiguous) in NCCL."""
        dt = arr.dtype
        if dt == np.bool_:
            return arr.view(np.uint8), _UINT8, arr.size, _BOOL_REDUCE[op], None
        if dt.kind == "c":
            if op not in ("SUM", "AVG"):
                raise ValueError(f"{name}: ReduceOp.{op} is not defined for complex tensors on NCCL (SUM, AVG)")
            real = arr.view(np.float32 if dt == np.complex64 else np.float64)
            return real, self._types[real.dtype], real.size, self._op(op), None
        if dt == np.int16:
            return arr.astype(np.int32), 2, arr.size, self._op(op), "cast"
        if op in ("BAND", "BOR", "BXOR"):
            raise ValueError(f"{name}: NCCL has no bitwise reductions (ReduceOp.{op})")
        return arr, self._types[dt], arr.size, self._op(op), None

    def _op(self, op: str) -> int:
        if op == "AVG" and self._version < 21000:
            return _REDUCE["SUM"]  # scaled after the sum (NCCL before 2.10 has no ncclAvg)
        return _REDUCE[op]

    def _scale_if_needed(self, op, buf):
        if op == "AVG" and self._version < 21000:
            return [lambda: buf.__itruediv__(self.size)]
        return []

    @staticmethod
    def _index(t) -> int:
        return A.device_of(t).index

    def _staged(self, t, read=True):
        """A contiguous device buffer for ``t`` and the finisher that writes it back (None if it is ``t``)."""
        a = A.array(t)
        if a.flags.c_contiguous:
            return a, None
        buf = A.contiguous(t) if read else A.empty_like(t)
        return buf, (lambda: A.write(t, buf))

    # -- collectives ----------------------------------------------------------------
    def _after_reduce(self, op: str, red, buf, post, back, t) -> list:
        """Finishers of a reduction into ``red``: AVG's scaling, the cast back from a wider reduction
        dtype into ``buf``, then the copy back into (or the version bump of) the tensor ``t``."""
        fins = self._scale_if_needed(op, red)
        if post == "cast":
            fins.append(lambda: buf.__setitem__(Ellipsis, red.astype(buf.dtype)))
        fins.append(back if back is not None else (lambda: A.mark_written(t)))
        return fins

    def all_reduce(self, t, op: str) -> Work:
        buf, back = self._staged(t)
        red, dt, count, nop, post = self._reduce_view(buf, op, "all_reduce")
        fins = self._after_reduce(op, red, buf, post, back, t)

        def body(comm, s):
            comm.allReduce(_ptr(red), _ptr(red), count, dt, nop, s)
        return self._launch("all_reduce", self._index(t), body, [t], fins, (buf, red))

    def broadcast(self, t, root: int) -> Work:
        buf, back = self._staged(t)
        mine = self.rank == root
        nbytes = buf.nbytes

        def body(comm, s):
            comm.broadcast(_ptr(buf), _ptr(buf), nbytes, _UINT8, root, s)
        fins = [] if mine else [back if back is not None else (lambda: A.mark_written(t))]
        return self._launch("broadcast", self._index(t), body, [t], fins, (buf,))

    def reduce(self, t, root: int, op: str) -> Work:
        buf, back = self._staged(t)
        red, dt, count, nop, post = self._reduce_view(buf, op, "reduce")
        fins = self._after_reduce(op, red, buf, post, back, t) if self.rank == root else []

        def body(comm, s):
            comm.reduce(_ptr(red), _ptr(red), count, dt, nop, root, s)
        return self._launch("reduce", self._index(t), body, [t], fins, (buf, red))

    def all_gather_into(self, out, inp) -> Work:
        src = A.contiguous(inp)
        dst, back = self._staged(out, read=False)
        n = src.nbytes

        def body(comm, s):
            comm.allGather(_ptr(src), _ptr(dst), n, _UINT8, s)
        fins = [back if back is not None else (lambda: A.mark_written(out))]
        return self._launch("all_gather", self._index(out), body, [out], fins, (src, dst))

    def reduce_scatter_into(self, out, inp, op: str) -> Work:
        src = A.contiguous(inp)
        dst, back = self._staged(out, read=False)
        red_in, dt, _, nop, post = self._reduce_view(src, op, "reduce_scatter")
        red_out = dst.astype(np.int32) if post == "cast" else self._reduce_view(dst, op, "reduce_scatter")[0]
        count = red_out.size
        fins = self._after_reduce(op, red_out, dst, post, back, out)

        def body(comm, s):
            comm.reduceScatter(_ptr(red_in), _ptr(red_out), count, dt, nop, s)
        return self._launch("reduce_scatter", self._index(out), body, [out], fins, (src, dst, red_in, red_out))

    def _p2p_group(self, comm, s, sends, recvs):
        """One NCCL group of sends ``(ptr, nbytes, peer)`` and receives ``(ptr, nbytes, peer)``."""
        self.nccl.groupStart()
        try:
            for ptr, n, peer in sends:
                if n:
                    comm.send(ptr, n, _UINT8, peer, s)
            for ptr, n, peer in recvs:
                if n:
                    comm.recv(ptr, n, _UINT8, peer, s)
        finally:
            self.nccl.groupEnd()

    def gather_into(self, out, inp, root: int) -> Work:
        src = A.contiguous(inp)
        n = src.nbytes
        if self.rank == root:
            dst, back = self._staged(out, read=False)
            base = _ptr(dst)

            def body(comm, s):
                self._p2p_group(comm, s, [(_ptr(src), n, root)], [(base + r * n, n, r) for r in range(self.size)])
            fins = [back if back is not None else (lambda: A.mark_written(out))]
            return self._launch("gather", self._index(inp), body, [out], fins, (src, dst))

        def body(comm, s):
            self._p2p_group(comm, s, [(_ptr(src), n, root)], [])
        return self._launch("gather", self._index(inp), body, (), (), (src,))

    def scatter_from(self, out, inp, root: int) -> Work:
        dst, back = self._staged(out, read=False)
        n = dst.nbytes
        src = A.contiguous(inp) if self.rank == root else None

        def body(comm, s):
            sends = [(_ptr(src) + r * n, n, r) for r in range(self.size)] if src is not None else []
            self._p2p_group(comm, s, sends, [(_ptr(dst), n, root)])
        fins = [back if back is not None else (lambda: A.mark_written(out))]
        return self._launch("scatter", self._index(out), body, [out], fins, (src, dst))

    def all_to_all_single(self, out, inp, out_counts, in_counts) -> Work:
        src = A.contiguous(inp)
        dst, back = self._staged(out, read=False)
        item = src.dtype.itemsize
        sends, recvs, so, ro = [], [], 0, 0
        for r in range(self.size):
            sends.append((_ptr(src) + so, in_counts[r] * item, r))
            recvs.append((_ptr(dst) + ro, out_counts[r] * item, r))
            so += in_counts[r] * item
            ro += out_counts[r] * item

        def body(comm, s):
            self._p2p_group(comm, s, sends, recvs)
        fins = [back if back is not None else (lambda: A.mark_written(out))]
        return self._launch("all_to_all", self._index(out), body, [out], fins, (src, dst))

    def send(self, t, peer: int, tag: int) -> Work:
        src = A.contiguous(t)

        def body(comm, s):
            comm.send(_ptr(src), src.nbytes, _UINT8, peer, s)
        return self._launch("send", self._index(t), body, [t], (), (src,))

    def recv(self, t, peer, tag: int) -> Work:
        if peer is None:
            raise ValueError("recv: NCCL cannot receive from any source; pass src=")
        dst, back = self._staged(t, read=False)

        def body(comm, s):
            comm.recv(_ptr(dst), dst.nbytes, _UINT8, peer, s)
        fins = [back if back is not None else (lambda: A.mark_written(t))]
        w = self._launch("recv", self._index(t), body, [t], fins, (dst,))
        w._source = self.ranks[peer]
        return w

    def barrier(self, device_index: int) -> Work:
        cp = self.cp
        with cp.cuda.Device(device_index):
            one = cp.ones(1, dtype=np.float32)

        def body(comm, s):
            comm.allReduce(_ptr(one), _ptr(one), 1, 7, 0, s)
        w = self._launch("barrier", device_index, body, (), (), (one,))
        w._event.synchronize()  # PyTorch's NCCL barrier also blocks the host until the device finished
        return w
