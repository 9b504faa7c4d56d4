"""The launcher: ``pylucid launch -n N script.py args`` / ``python -m pylucid.distributed.run -n N ...``.

It runs ``mpiexec`` (MPICH's Hydra or Open MPI's, found beside the Python
interpreter or on ``PATH``) with N copies of a small worker that sets the
usual environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``), then runs the script as ``__main__``. The launcher:

- passes ``--timeout`` on to every rank's collectives (``PYLUCID_DIST_TIMEOUT``);
- gives each rank its share of the machine's cores for BLAS/OpenMP threads
  unless ``OMP_NUM_THREADS`` is set (N ranks each using every core would
  slow each other down);
- forwards SIGINT, SIGTERM and SIGHUP to the job, and kills it if it has not
  ended 10 s later;
- ends every rank when one fails: a rank whose script raises writes the
  traceback headed by its rank and calls ``MPI_Abort``, which makes
  ``mpiexec`` end the others; the job exits with that rank's code.

A rank's traceback goes to a report file in a directory the launcher made
(``PYLUCID_LAUNCH_REPORTS``), and the launcher prints it on its own stderr
once the job has ended: ``MPI_Abort`` kills the ranks at once, and output a
rank wrote to its pipe just before may never reach ``mpiexec``. A rank on
another machine, where that directory does not exist, writes to its stderr.

Several machines: ``--hostfile FILE`` (one host per line, ``host:slots`` for
MPICH, ``host slots=N`` for Open MPI) or ``--hosts a,b``; see docs/distributed.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

__all__ = ["main", "find_mpiexec", "build_command"]

_WORKER_FLAG = "--pylucid-worker"
_REPORTS_ENV = "PYLUCID_LAUNCH_REPORTS"


def find_mpiexec(explicit: str | None = None) -> str:
    """The ``mpiexec`` to use: ``explicit``, ``$PYLUCID_MPIEXEC``, the one beside this Python (the mpich
    wheel installs it there) or the first on PATH."""
    for cand in (explicit, os.environ.get("PYLUCID_MPIEXEC")):
        if cand:
            path = shutil.which(cand)
            if path is None:
                raise FileNotFoundError(f"pylucid launch: mpiexec {cand!r} not found")
            return path
    here = os.path.dirname(sys.executable)
    for name in ("mpiexec", "mpirun"):
        path = shutil.which(name, path=here) or shutil.which(name)
        if path:
            return path
    raise FileNotFoundError(
        "pylucid launch: no mpiexec found (beside the Python interpreter or on PATH). Install an MPI: "
        "pip install 'pylucid[distributed]' (mpi4py and mpich), or point PYLUCID_MPIEXEC at one."
    )


def _flavour(mpiexec: str) -> str:
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=20)
        text = (out.stdout + out.stderr).lower()
    except (OSError, subprocess.TimeoutExpired):
        return "hydra"
    return "openmpi" if "open mpi" in text or "open-mpi" in text or "openrte" in text else "hydra"


def build_command(args, mpiexec: str, flavour: str) -> list:
    """The ``mpiexec`` command line for parsed launcher ``args``."""
    cmd = [mpiexec, "-n", str(args.nproc)]
    if flavour == "openmpi":
        if args.hostfile:
            cmd += ["--hostfile", args.hostfile]
        if args.hosts:
            cmd += ["--host", args.hosts]
        for name in _forwarded_env(args):
            cmd += ["-x", name]
        if args.oversubscribe:
            cmd += ["--oversubscribe"]
    else:
        if args.hostfile:
            cmd += ["-f", args.hostfile]
        if args.hosts:
            cmd += ["-hosts", args.hosts]
        if args.tag_output:
            cmd += ["-prepend-rank"]
    cmd += list(args.mpi_args or [])
    cmd += [sys.executable, "-u", "-m", "pylucid.distributed.run", _WORKER_FLAG]
    if args.module:
        cmd += ["-m"]
    cmd += [args.script] + list(args.script_args)
    return cmd


def _forwarded_env(args) -> list:
    names = ["PYLUCID_DIST_TIMEOUT", _REPORTS_ENV, "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "PYTHONPATH", "PYTHONUNBUFFERED", "PATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV"]
    names += [k for k in os.environ if k.startswith(("NCCL_", "PYLUCID_", "CUDA_", "TORCH_"))]
    return sorted(set(n for n in names if n in os.environ or n.startswith("PYLUCID_")))


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Run a script on N ranks through mpiexec (data-parallel training).",
        epilog="Example: pylucid launch -n 4 train.py --epochs 3")
    p.add_argument("-n", "--nproc", "--nproc-per-node", "--np", dest="nproc", type=int, default=1,
                   help="number of ranks (processes) to start (default 1)")
    p.add_argument("--hostfile", "-f", default=None, help="mpiexec host file (several machines)")
    p.add_argument("--hosts", default=None, help="comma-separated host list (several machines)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds a collective may wait before it fails (default 1800)")
    p.add_argument("--threads", type=int, default=None,
                   help="BLAS/OpenMP threads per rank (default: cores // nproc, at least 1; OMP_NUM_THREADS wins)")
    p.add_argument("--mpiexec", default=None, help="the mpiexec to run (default: beside Python, else on PATH)")
    p.add_argument("--mpi-arg", dest="mpi_args", action="append", default=[],
                   help="an extra argument for mpiexec (repeatable), e.g. --mpi-arg=-bind-to --mpi-arg=core")
    p.add_argument("--tag-output", action="store_true", help="prefix every output line with its rank (MPICH)")
    p.add_argument("--oversubscribe", action="store_true", help="Open MPI: allow more ranks than cores")
    p.add_argument("-m", "--module", action="store_true", help="run SCRIPT as a module (python -m SCRIPT)")
    p.add_argument("script", help="the Python script (or module, with -m) every rank runs")
    p.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    return p


def main(argv=None, prog: str = "python -m pylucid.distributed.run") -> int:
    """Launch a job; returns its exit status (0 when every rank succeeded)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [_WORKER_FLAG]:
        return _worker(argv[1:])
    args = _parser(prog).parse_args(argv)
    if args.nproc < 1:
        raise SystemExit(f"{prog}: -n must be >= 1, got {args.nproc}")
    if args.timeout is not None and args.timeout <= 0:
        raise SystemExit(f"{prog}: --timeout must be positive, got {args.timeout}")
    try:
        mpiexec = find_mpiexec(args.mpiexec)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 127
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if args.timeout is not None:
        env["PYLUCID_DIST_TIMEOUT"] = repr(float(args.timeout))
    if "OMP_NUM_THREADS" not in env:
        threads = args.threads or max(1, (os.cpu_count() or 1) // args.nproc)
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(name, str(threads))
    # the worker imports pylucid from where this launcher was imported
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory(prefix="pylucid-launch-") as reports:
        env[_REPORTS_ENV] = reports
        cmd = build_command(args, mpiexec, _flavour(mpiexec))
        try:
            return _run(cmd, env)
        finally:
            _print_reports(reports)


def _print_reports(reports: str) -> None:
    """Print the failure reports the ranks left (in rank order) on the launcher's stderr."""
    def rank_of(name):
        return int(name[4:-4]) if name[4:-4].isdigit() else -1

    names = sorted((n for n in os.listdir(reports) if n.startswith("rank") and n.endswith(".txt")), key=rank_of)
    for name in names:
        with open(os.path.join(reports, name), encoding="utf-8", errors="replace") as f:
            sys.stderr.write(f.read())
    sys.stderr.flush()


def _run(cmd: list, env: dict) -> int:
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    received: list = []

    def forward(signum, frame):
        received.append(signum)
        try:
            proc.send_signal(signum)  # mpiexec passes it on to the ranks
        except ProcessLookupError:
            pass

    sigs = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    old = {}
    for s in sigs:
        try:
            old[s] = signal.signal(s, forward)
        except ValueError:  # not the main thread: signals stay as they are
            pass
    try:
        while True:
            try:
                rc = proc.wait(timeout=10.0 if received else None)
                break
            except subprocess.TimeoutExpired:
                _kill_group(proc)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if received and rc == 0:
        rc = 128 + received[0]
    return rc if rc >= 0 else 128 - rc


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


# ---------------------------------------------------------------------------------------------------------------------
# the worker: what every rank runs
# ---------------------------------------------------------------------------------------------------------------------
def _rank_env() -> tuple:
    def get(*names, default=None):
        for n in names:
            v = os.environ.get(n)
            if v not in (None, ""):
                return int(v)
        return default

    rank = get("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", default=0)
    size = get("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", default=1)
    local = get("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", default=0)
    local_size = get("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", default=1)
    return rank, size, local, local_size


def _worker(argv: list) -> int:
    import runpy
    import traceback

    as_module = argv[:1] == ["-m"]
    if as_module:
        argv = argv[1:]
    if not argv:
        print("pylucid launch worker: no script given", file=sys.stderr)
        return 2
    rank, size, local, local_size = _rank_env()
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(local),
                      LOCAL_WORLD_SIZE=str(local_size))
    target, sys.argv = argv[0], list(argv)
    if not as_module:
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    code = 0
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException as exc:  # every failure of the rank ends the job, with its traceback
        sys.stdout.flush()
        tb = exc.__traceback__
        while tb is not None and (tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>")
                                  or tb.tb_frame.f_code.co_filename.endswith("runpy.py")):
            tb = tb.tb_next  # the launcher's own frames say nothing about the failure
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        _report(rank, f"[rank {rank}] pylucid launch: rank {rank} of {size} failed:\n{text}")
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if code != 0 and size > 1:
        _abort(code)
    if code == 0:
        from . import _core

        if _core.is_initialized():
            _core.destroy_process_group()
    return code


def _report(rank: int, text: str) -> None:
    """Leave a failure report for the launcher to print (see the module docstring: output written just
    before ``MPI_Abort`` can be lost); on a machine without the launcher's directory, write it to stderr."""
    reports = os.environ.get(_REPORTS_ENV)
    if reports and os.path.isdir(reports):
        path = os.path.join(reports, f"rank{rank}.txt")
        try:
            with open(path + ".part", "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(path + ".part", path)  # the launcher never reads half a report
            return
        except OSError:
            pass
    sys.stderr.write(text)
    sys.stderr.flush()


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _abort(code: int) -> None:
    """End the whole job now: MPI_Abort when MPI is up (mpiexec then ends the other ranks), else exit
    (mpiexec ends the job when a rank exits with an error)."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.COMM_WORLD.Abort(code)
    os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
