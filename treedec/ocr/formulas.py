"""Formulas from OCR lines: a LaTeX draft from the recogniser's symbols, the test for a
math-looking line, and formula pieces read as separate lines merged into one."""
from __future__ import annotations

import re

from treedec.ocr.geometry import Region, union


_TO_LATEX = {
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\epsilon", "ζ": r"\zeta",
    "η": r"\eta", "θ": r"\theta", "ι": r"\iota", "κ": r"\kappa", "λ": r"\lambda", "μ": r"\mu",
    "ν": r"\nu", "ξ": r"\xi", "π": r"\pi", "ρ": r"\rho", "σ": r"\sigma", "τ": r"\tau", "υ": r"\upsilon",
    "φ": r"\phi", "χ": r"\chi", "ψ": r"\psi", "ω": r"\omega", "Γ": r"\Gamma", "Δ": r"\Delta",
    "Θ": r"\Theta", "Λ": r"\Lambda", "Ξ": r"\Xi", "Π": r"\Pi", "Σ": r"\Sigma", "Φ": r"\Phi",
    "Ψ": r"\Psi", "Ω": r"\Omega", "−": "-", "–": "-", "×": r"\times", "·": r"\cdot", "÷": r"\div",
    "±": r"\pm", "≤": r"\leq", "≥": r"\geq", "≠": r"\neq", "≈": r"\approx", "∞": r"\infty",
    "∑": r"\sum", "∫": r"\int", "√": r"\sqrt", "∂": r"\partial", "→": r"\to", "∈": r"\in",
    "∏": r"\prod", "∇": r"\nabla", "′": "'", "µ": r"\mu",
}
_SUP = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ", "0123456789+-=()ni"))
_SUB = dict(zip("₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₒₓᵢⱼₙ", "0123456789+-=()aeoxijn"))
_MATHY = re.compile("[=+^_<>" + "".join(_TO_LATEX) + "".join(_SUP) + "".join(_SUB) + "]")


def ocr_to_latex(text: str) -> str:
    """A LaTeX draft from an OCR'd formula: symbols to commands, super/subscript runs to
    ^{..}/_{..}. Only a draft: the target model verifies every token."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        for table, op in ((_SUP, "^"), (_SUB, "_")):
            if c in table:
                j = i
                while j < len(text) and text[j] in table:
                    j += 1
                out.append(op + "{" + "".join(table[t] for t in text[i:j]) + "}")
                i = j
                break
        else:
            cmd = _TO_LATEX.get(c)
            if cmd is None:
                out.append(c)
            else:
                nxt = text[i + 1] if i + 1 < len(text) else ""
                out.append(cmd + (" " if cmd.startswith("\\") and nxt.isascii() and nxt.isalpha() else ""))
            i += 1
    return re.sub(r"\s*([=+\-])\s*", r"\1", "".join(out)).strip()


def looks_like_formula(text: str) -> bool:
    """One line with math symbols and few words (runs of 3+ letters)."""
    if not _MATHY.search(text):
        return False
    words = re.findall(r"[A-Za-z]{3,}", text)
    return sum(len(w) for w in words) < 0.4 * len(text.replace(" ", ""))


def merge_formulas(blocks: list[Region], unit: float) -> list[Region]:
    """Formula pieces the OCR read as separate lines (a sum sign, a fraction's parts)
    that touch or overlap: one formula."""
    out: list[Region] = []
    for r in blocks:
        if r.category == "equation_isolated":
            for o in out:
                if o.category == "equation_isolated" and max(
                        o.box[0] - r.box[2], r.box[0] - o.box[2], o.box[1] - r.box[3], r.box[1] - o.box[3]) <= 0.3 * unit:
                    o.lines += r.lines
                    o.box = union([o.box, r.box])
                    o.score = min(o.score, r.score)
                    break
            else:
                out.append(r)
        else:
            out.append(r)
    return out
