"""Integer constant expressions for the lint (array extents, template arguments, ``sizeof``)."""

from __future__ import annotations

from ._frontend import _Tok
from ._lint_tables import _qualified_tokens

# ---------------------------------------------------------------------------------------------
# Constant expressions
# ---------------------------------------------------------------------------------------------

_CONST, _RUNTIME, _UNKNOWN, _LAZY = "const", "runtime", "unknown", "lazy"
_INT_CASTS = {
    "int",
    "uint",
    "short",
    "ushort",
    "long",
    "ulong",
    "size_t",
    "char",
    "uchar",
    "bool",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
    "unsigned",
    "ptrdiff_t",
}
_BINARY_PREC = {
    "||": 1,
    "&&": 2,
    "|": 3,
    "^": 4,
    "&": 5,
    "==": 6,
    "!=": 6,
    "<": 7,
    ">": 7,
    "<=": 7,
    ">=": 7,
    "<<": 8,
    ">>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "%": 10,
}


class _NotConstant(Exception):
    pass


def _c_div(a: int, b: int) -> int:
    if b == 0:
        raise _NotConstant
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _parse_int_literal(text: str) -> int:
    t = text.replace("'", "")
    low = t.lower()
    if low.startswith("0x"):
        if "." in low or "p" in low:
            raise _NotConstant
        digits = low[2:].rstrip("ul")
        return int(digits, 16)
    if any(c in low for c in ".e") or low.endswith(("f", "h")):
        raise _NotConstant
    digits = low.rstrip("ul")
    if low.startswith("0b"):
        return int(digits[2:], 2)
    if len(digits) > 1 and digits.startswith("0"):
        return int(digits, 8)
    return int(digits)


class _Evaluator:
    """Evaluates integral constant expressions over tokens.

    ``lookup(name)`` returns ``(_CONST, value)``, ``(_RUNTIME, None)`` or ``(_UNKNOWN, None)``;
    ``sizeof(tokens)`` returns a size in bytes or None.
    """

    def __init__(self, toks: list, lookup, sizeof) -> None:
        self.toks = toks
        self.i = 0
        self.lookup = lookup
        self.sizeof = sizeof

    def peek(self) -> str:
        return self.toks[self.i].text if self.i < len(self.toks) else ""

    def take(self) -> _Tok:
        if self.i >= len(self.toks):
            raise _NotConstant
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str) -> None:
        if self.take().text != text:
            raise _NotConstant

    def run(self) -> int:
        v = self.ternary()
        if self.i != len(self.toks):
            raise _NotConstant
        return v

    def ternary(self) -> int:
        c = self.binary(1)
        if self.peek() == "?":
            self.i += 1
            a = self.ternary()
            self.expect(":")
            b = self.ternary()
            return a if c else b
        return c

    def binary(self, min_prec: int) -> int:
        lhs = self.unary()
        while True:
            op = self.peek()
            prec = _BINARY_PREC.get(op)
            if prec is None or prec < min_prec:
                return lhs
            self.i += 1
            rhs = self.binary(prec + 1)
            lhs = self.apply(op, lhs, rhs)

    @staticmethod
    def apply(op: str, a: int, b: int) -> int:
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return _c_div(a, b)
        if op == "%":
            if b == 0:
                raise _NotConstant
            return a - b * _c_div(a, b)
        if op == "<<":
            if b < 0 or b > 64:
                raise _NotConstant
            return a << b
        if op == ">>":
            if b < 0 or b > 64:
                raise _NotConstant
            return a >> b
        if op == "&":
            return a & b
        if op == "|":
            return a | b
        if op == "^":
            return a ^ b
        if op == "&&":
            return int(bool(a) and bool(b))
        if op == "||":
            return int(bool(a) or bool(b))
        return int({"==": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op])

    def unary(self) -> int:
        op = self.peek()
        if op in ("-", "+", "~", "!"):
            self.i += 1
            v = self.unary()
            return {"-": -v, "+": v, "~": ~v, "!": int(not v)}[op]
        return self.primary()

    def primary(self) -> int:
        t = self.take()
        if t.kind == "num":
            return _parse_int_literal(t.text)
        if t.text == "(":
            v = self.ternary()
            self.expect(")")
            return v
        if t.kind != "id":
            raise _NotConstant
        if t.text in ("true", "false"):
            return int(t.text == "true")
        if t.text in ("sizeof", "alignof"):
            self.expect("(")
            start = self.i
            depth = 1
            while depth:
                x = self.take().text
                if x == "(":
                    depth += 1
                elif x == ")":
                    depth -= 1
            layout = self.sizeof(self.toks[start : self.i - 1])
            if layout is None:
                raise _NotConstant
            return layout[0] if t.text == "sizeof" else layout[1]
        if t.text == "static_cast":
            self.expect("<")
            while self.take().text != ">":
                pass
            self.expect("(")
            v = self.ternary()
            self.expect(")")
            return v
        if t.text in ("metal", "fast", "precise") and self.peek() == "::":
            self.i += 1
            return self.primary()
        if t.text in _INT_CASTS and self.peek() == "(":
            self.i += 1
            v = self.ternary()
            self.expect(")")
            return v
        name, j = _qualified_tokens(self.toks, self.i - 1)
        self.i = j
        state, value = self.lookup(name)
        if state != _CONST:
            raise _NotConstant
        return value
