"""Assemble docs/semantics.md from the per-family files in docs/semantics/ (run after editing them)."""

from pathlib import Path

HERE = Path(__file__).parent
ORDER = ["documented_ops", "core", "compat",
         "elementwise", "reductions", "shape_indexing", "linalg_fft", "nn", "nn_conv",
         "optim", "cuda"]
HEADER = """# Semantics: where pylucid differs from PyTorch

pylucid implements the ops that the Lucid framework documents, with the
semantics written below, and otherwise follows PyTorch 2.13's documented
behaviour. Every deviation from PyTorch is listed here, family by family, with
the reason. This file is assembled from `docs/semantics/*.md` by
`python docs/build_semantics.py`; the first section states what Lucid
documents.

"""


def main() -> None:
    parts = [HEADER]
    names = ORDER + sorted(p.stem for p in (HERE / "semantics").glob("*.md") if p.stem not in ORDER)
    for name in names:
        path = HERE / "semantics" / f"{name}.md"
        if path.exists():
            text = path.read_text().strip()
            # demote every heading of the family file one level
            lines = [("#" + ln if ln.startswith("#") else ln) for ln in text.splitlines()]
            parts.append("\n".join(lines) + "\n\n")
    (HERE / "semantics.md").write_text("".join(parts))


if __name__ == "__main__":
    main()
