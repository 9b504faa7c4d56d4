"""Coverage and agreement of pylucid against PyTorch's OpInfo database.

    PYTHONPATH=. python tools/opinfo_report.py [--full] [--markdown FILE] [--only NAME[,NAME]]
    PYTHONPATH=. python tools/opinfo_report.py --op NAME --kind forward|grad|gradgrad --dtype float64 --sample I

The first form runs tests/test_opinfo.py's checks on every OpInfo and prints
how many OpInfos matched a pylucid op and the share of forward, first-order
and second-order samples that agree with PyTorch (``--full``: every sample,
as ``PYLUCID_OPINFO_FULL=1``); ``--markdown`` also writes the per-family list
of unmatched and disagreeing OpInfos. The second form re-runs one sample and
prints its traceback (the reproducer the list gives for each failure).

Counting: the database's entries (one per OpInfo, variants separate) minus
the sparse, prototype and internal ones (``tests.test_opinfo.excluded``: names
starting with ``_``, ``torch.``, ``sparse.``, ``jiterator_``, ``to_sparse``).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# family modules -> the helper that owns them
OWNERS = {
    "elementwise": "mathops", "reduction": "mathops", "compare": "mathops", "scan": "mathops",
    "sorting": "mathops", "linalg": "linalgops", "fft": "linalgops", "special": "linalgops",
    "nn": "nnops", "conv": "nnops", "activation": "nnops", "shape": "opinfo", "indexing": "opinfo",
    "conversion": "opinfo", "complex": "opinfo", "random_ops": "opinfo", "creation": "opinfo",
    "_tensor": "opinfo", "random": "opinfo", "_functional_core": "nnops", "masked": "mathops", "signal": "?",
}

# unmatched top-level names -> the family that would hold them
_UNMATCHED_FAMILY = {
    "shape": "H mH adjoint as_strided as_strided_copy as_strided_scatter block_diag cartesian_prod combinations "
             "diagflat diagonal_copy diagonal_scatter expand_copy permute_copy select select_scatter slice "
             "slice_scatter split_with_sizes split_with_sizes_copy squeeze_copy t_copy transpose_copy unbind_copy "
             "unfold_copy unsqueeze_copy view_copy alias_copy unsafe_chunk unsafe_split tril_indices triu_indices "
             "unravel_index resize_ resize_as_ chalf resolve_neg fill put index_reduce scalar_tensor empty_permuted "
             "empty_strided new_empty_strided nonzero_static",
    "random_ops": "cauchy exponential geometric log_normal uniform",
    "linalg": "cholesky cholesky_inverse cholesky_solve geqrf lu lu_solve lu_unpack ormqr svd triangular_solve "
              "pca_lowrank svd_lowrank addr addbmm",
    "nn": "native_batch_norm native_group_norm native_layer_norm native_dropout_backward grid_sampler_2d "
          "grid_sampler_3d max_pool2d_with_indices_backward constant_pad_nd cdist",
    "fft": "stft istft",
}
_UNMATCHED_FAMILY = {n: fam for fam, names in _UNMATCHED_FAMILY.items() for n in names.split()}


def _method_module(fn) -> str:
    """The pylucid module of the Tensor method a database lambda calls (``lambda x: x.mT`` -> shape)."""
    import inspect

    import pylucid

    for attr in getattr(getattr(fn, "__code__", None), "co_names", ()):
        m = inspect.getattr_static(pylucid.Tensor, attr, None)
        m = getattr(m, "fget", m)
        mod = getattr(m, "__module__", "") or ""
        if mod.startswith("pylucid"):
            return mod
    return ""


def family(opinfo, fn) -> str:
    mod = getattr(fn, "__module__", "") or ""
    if fn is not None and not mod.startswith("pylucid"):
        mod = _method_module(fn)
    if fn is not None and mod.startswith("pylucid"):
        part = mod.split(".")[-1]
        if part == "functional":
            return "nn"
        return part
    name = opinfo.name
    for prefix, fam in (("nn.functional.", "nn"), ("linalg.", "linalg"), ("fft.", "fft"), ("special.", "special"),
                        ("signal.", "signal"), ("masked.", "masked")):
        if name.startswith(prefix):
            return fam
    return _UNMATCHED_FAMILY.get(name, "elementwise")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true")
    p.add_argument("--markdown")
    p.add_argument("--only")
    p.add_argument("--op")
    p.add_argument("--kind", default="forward")
    p.add_argument("--dtype", default="float64")
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--check-skips", action="store_true", help="run the skipped samples too; list stale skips")
    p.add_argument("--emit-skips", help="write Skip entries for the current failures to this file")
    p.add_argument("--report", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.full:
        os.environ["PYLUCID_OPINFO_FULL"] = "1"
    import torch

    from tests import test_opinfo as T

    if a.op:
        return reproduce(T, torch, a)
    db = T.op_db()
    if a.only:
        wanted = set(a.only.split(","))
        db = [o for o in db if o.name in wanted or T.key(o) in wanted]
    counted = [o for o in db if not T.excluded(o)]
    results = []  # (key, dtype, kind, i, status, msg, sample)

    def record(k, d, kind, i, status, msg, s):
        results.append((k, d, kind, i, status, msg, T.sample_repr(s)))

    matched, unmatched = [], []
    t0 = time.time()
    for o in counted:
        fn = T.resolve(o)
        if fn is None:
            unmatched.append(o)
            continue
        matched.append((o, fn))
        for kind in T.KINDS:
            try:
                T.run(o, kind, record, check_skips=a.check_skips)
            except Exception as e:  # noqa: BLE001 - sample generation itself failing
                results.append((T.key(o), "*", kind, -1, "fail", f"sample generation: {type(e).__name__}: {e}",
                                ""))
    elapsed = time.time() - t0
    lines = summary(T, db, counted, matched, unmatched, results, elapsed)
    print("\n".join(lines))
    if a.markdown:
        write_markdown(a.markdown, T, lines, matched, unmatched, results)
    if a.emit_skips:
        emit_skips(a.emit_skips, T, matched, results)
    return 0


_TIES = "which index comes back among equal values is unspecified in PyTorch; the values agree"
# reviewed deviations: (OpInfo name prefix, kind or "", message part) -> reason citing the semantics page
DEVIATIONS = [
    (("as_strided.partial_views",), "", "", "as_strided reads the row-major layout of the tensor it is given, not "
     "the storage behind a view (docs/semantics/shape_indexing.md)"),
    (("as_strided_scatter",), "grad", "", "PyTorch 2.13 passes the gradient through to the overwritten positions "
     "of input; pylucid's is the exact derivative, zero there (docs/semantics/opinfo.md)"),
    (("nn.functional.conv", "nn.functional.avg_pool"), "forward", "expected a floating point input",
     "conv/pool take floating dtypes only (docs/semantics/nn_conv.md)"),
    (("sort", "argsort", "topk", "kthvalue", "mode"), "forward", "values differ",
     _TIES + " (docs/semantics/opinfo.md)"),
    (("linalg.eigh", "linalg.svd", "svd"), "forward", "output[", "eigenvectors and singular vectors are unique only "
     "up to sign; LAPACK drivers choose differently, the absolute values agree (docs/semantics/opinfo.md)"),
    (("linalg.eig",), "forward", "output[1]", "eigenvectors are defined up to a complex phase; LAPACK builds pick "
     "different ones (the eigenvalues agree; docs/semantics/linalg_special_ops.md)"),
    (("linalg.norm.subgradients_at_zero",), "gradgrad", "", "a norm has no second derivative at the zero vector: "
     "PyTorch gives NaN there, pylucid 0, with the first derivative 0 as PyTorch's (docs/semantics/opinfo.md)"),
    (("masked.logaddexp",), "gradgrad", "", "the second derivative of logaddexp where an argument is -inf (masked "
     "out) is 0; PyTorch's formula gives NaN (0 * inf) (docs/semantics/masked.md)"),
    (("native_layer_norm",), "gradgrad", "Expected a proper Tensor but got None", "no reference: PyTorch 2.13 "
     "cannot take the second derivative of native_layer_norm without a weight (docs/semantics/opinfo.md)"),
]


def _category(k, kind, msg):
    for prefixes, knd, part, reason in DEVIATIONS:
        if any(k == p or k.startswith(p) for p in prefixes) and knd in ("", kind) and part in msg:
            return "deviation", reason
    if "NotImplementedError" in msg or "not supported" in msg or "not implemented" in msg:
        return "not implemented", None
    return "known bug", None


def _wrapped(text: str, indent: int) -> str:
    """A string literal split into implicitly concatenated pieces that fit 120 columns."""
    width = 110 - indent
    parts, cur = [], ""
    for word in re.split(r"(?<= )", text):
        if cur and len(cur) + len(word) > width:
            parts.append(cur)
            cur = ""
        cur += word
    parts.append(cur)
    return ("\n" + " " * indent).join(repr(p) for p in parts)


def emit_skips(path, T, matched, results):
    """Skip entries for the failing samples (for review before they go into tests/opinfo_skips.py): one entry per
    OpInfo, kind and sample (its dtype-free written form; all dtypes failing alike share it)."""
    from tests.opinfo_skips import dtype_free

    fam_of = {T.key(o): family(o, fn) for o, fn in matched}
    rows = collections.defaultdict(list)
    for k, d, kind, i, status, msg, srepr in results:
        rows[(k, kind)].append((d, status, re.sub(r" \[pylucid/[^\]]*\]$", "", msg), dtype_free(srepr)))
    out = []
    for (k, kind), rs in sorted(rows.items()):
        fails = [r for r in rs if r[1] == "fail"]
        if not fails:
            continue
        owner = OWNERS.get(fam_of.get(k, "?"), "?")
        by_sample = collections.defaultdict(list)
        for d, _, msg, srepr in fails:
            by_sample[srepr].append((d, msg[:150]))
        whole = False  # one entry per sample: a skip never hides a sample that agrees
        for srepr, dms in sorted(by_sample.items()):
            ds = {d for d, _ in dms}
            msg = dms[0][1]
            dtype = next(iter(ds)) if len(ds) == 1 and len({d for d, *_ in rs}) > 1 else "*"
            cat, reason = _category(k, kind, msg)
            head = f"    Skip({k!r}, {dtype!r}, {kind!r}, {cat!r},\n         "
            body = _wrapped(reason or f"({owner}) {msg}", 9)
            tail = "" if whole else ",\n         sample=" + _wrapped(srepr, 16)
            out.append(head + body + tail + "),")
            if whole:
                break
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def summary(T, db, counted, matched, unmatched, results, elapsed):
    lines = [f"OpInfo entries: {len(db)}; counted (not sparse/prototype/internal): {len(counted)}; "
             f"matched to pylucid ops: {len(matched)}; unmatched: {len(unmatched)}",
             f"samples per op and dtype: {'all' if T.FULL else T.SAMPLES}; run time {elapsed:.0f} s"]
    stale = sorted({(r[0], r[1], r[2]) for r in results if r[4] == "skip-pass"})
    if stale:
        lines.append(f"stale skips (the skipped sample now agrees): {len(stale)}: "
                     + ", ".join(f"{k} {d} {kind}" for k, d, kind in stale))
    for kind in T.KINDS:
        c = collections.Counter(r[4] if r[4] != "skip-pass" else "skip" for r in results if r[2] == kind)
        ran = c["pass"] + c["fail"]
        tot = ran + c["skip"]
        pct = 100.0 * c["pass"] / ran if ran else 100.0
        pct_all = 100.0 * c["pass"] / tot if tot else 100.0
        lines.append(f"{kind:9s}: {c['pass']}/{ran} run samples agree ({pct:.2f}%); {c['skip']} skipped; "
                     f"agreeing of all samples incl. skipped: {pct_all:.2f}%")
    return lines


def write_markdown(path, T, lines, matched, unmatched, results):
    fam_of = {T.key(o): family(o, fn) for o, fn in matched}
    by_fam = collections.defaultdict(lambda: {"unmatched": [], "fail": collections.defaultdict(list)})
    for o in unmatched:
        by_fam[family(o, None)]["unmatched"].append(T.key(o))
    for k, d, kind, i, status, msg, srepr in results:
        if status == "fail" or (status in ("skip", "skip-pass") and "deviation" not in msg[:30]):
            if status == "skip-pass":
                msg = "STALE SKIP (now agrees): " + msg
            by_fam[fam_of.get(k, "unknown")]["fail"][k].append((d, kind, i, msg, srepr))
    out = ["# OpInfo conformance report", "",
           "Generated by `PYTHONPATH=. python tools/opinfo_report.py --markdown FILE` (tests/test_opinfo.py). "
           "Reproduce one failure with the command given under it (prints the traceback; run from the worktree root "
           "with `PYTHONPATH=.`).", "",
           "Per pylucid module family (the module the matched function is declared in; unmatched names by where "
           "they would go), the OpInfos pylucid lacks and, per matched OpInfo, its failing samples grouped by "
           "kind and message (`dtype#i` = sample i of that dtype's selection). Owners: mathops = elementwise/"
           "reduction/compare/scan/sorting/masked, linalgops = linalg/fft/special, nnops = nn/conv/activation/"
           "_functional_core, opinfo = shape/indexing/conversion/complex/random/creation/_tensor.", "", "```"]
    out += lines + ["```", ""]
    for fam in sorted(by_fam):
        entry = by_fam[fam]
        owner = OWNERS.get(fam, "?")
        nfail = len(entry["fail"])
        out.append(f"## {fam} (owner: {owner}) — {len(entry['unmatched'])} unmatched, {nfail} ops with failing "
                   "samples (run or skipped as not implemented / known bug)")
        out.append("")
        if entry["unmatched"]:
            out.append("Unmatched: " + ", ".join(f"`{n}`" for n in sorted(entry["unmatched"])))
            out.append("")
        for k in sorted(entry["fail"]):
            fails = entry["fail"][k]
            out.append(f"- **{k}** ({len(fails)} failing samples)")
            groups = {}
            for d, kind, i, msg, srepr in fails:
                sig = (kind, re.sub(r"(float32|float64|int64|bool)", "D", msg)[:70])
                groups.setdefault(sig, []).append((d, kind, i, msg, srepr))
            for (kind, _), members in groups.items():
                d, kind, i, msg, srepr = members[0]
                where = ", ".join(f"{m[0]}#{m[2]}" for m in members[:8]) + (" ..." if len(members) > 8 else "")
                out.append(f"  - {kind} [{where}] `{srepr[:160]}`: {msg[:400]}")
                out.append(f"    `python tools/opinfo_report.py --op {k} --kind {kind} --dtype {d} --sample {i}`")
        out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def reproduce(T, torch, a):
    opinfo = next(o for o in T.op_db() if T.key(o) == a.op or o.name == a.op)
    fn = T.resolve(opinfo)
    dtype = getattr(torch, a.dtype)
    ss = T.samples(opinfo, dtype, a.kind != "forward")
    s = ss[a.sample]
    print(f"{T.key(opinfo)} -> {fn}; sample {a.sample} of {len(ss)}: {T.sample_repr(s)}")
    try:
        if a.kind == "forward":
            T.run_forward(opinfo, fn, s, dtype)
        else:
            T.run_grad(opinfo, fn, s, 1 if a.kind == "grad" else 2)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 1
    print("agrees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
