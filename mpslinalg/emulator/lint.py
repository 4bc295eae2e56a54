"""Static checks ("lint") for the project's Metal Shading Language sources.

The emulator compiles ``.metal`` files with clang as C++ (DESIGN.md §5).  C++ accepts many things
that the Metal compiler rejects or that behave differently on an Apple GPU, so every source is
linted before it is compiled: a kernel that passes the emulator but cannot run on a Mac is a bug
found by the first Mac user, which is what the emulator exists to prevent.

The linter is token based (a small tokenizer aware of comments, string literals and preprocessor
lines, plus a light declaration/call parser); it needs no compiler, so it also runs where none is
installed.  It is designed to have **no false positives on valid MSL**: when a construct cannot be
classified with certainty it is accepted (the emulator's runtime checks, e.g. the 32 KiB
threadgroup meter, remain as a second line of defence).

Rules (``LintProblem.rule``):

======================== ===================================================================
``double``               the ``double`` type (incl. ``long double``) or an ``L``-suffixed
                         floating literal: Metal has no float64
``std-namespace``        ``std::`` or ``using namespace std``: there is no C++ standard library
``include``              an ``#include`` other than ``<metal_stdlib>`` or a quoted include of
                         one of our own ``metal/*.h`` (the loader inlines those)
``host-function``        calls of ``printf``, ``malloc``, ``free``, ``memcpy``, ``assert``, ...
``dynamic-memory``       ``new`` / ``delete`` expressions
``exceptions``           ``throw`` / ``try`` / ``catch``
``virtual``              virtual functions
``rtti``                 ``typeid`` / ``dynamic_cast``
``goto``                 ``goto``
``thread-local``         ``thread_local`` storage
``vla``                  arrays whose extent is a run-time value (a parameter or non-constant
                         local)
``recursion``            a cycle in the call graph of the functions defined in the source
``program-scope-variable`` program-scope variables not in the ``constant`` address space
``vector-cast``          C-style casts to vector types, e.g. ``(float2)x``: clang (the
                         emulator) makes these bit casts, Metal makes them conversions
``threadgroup-memory``   more than 32 KiB of threadgroup variables in one kernel (per template
                         instantiation where the sizes depend on template arguments)
``asm``                  inline assembly (``asm``, ``__asm__``)
``linkage``              ``extern`` declarations and ``extern "C"`` blocks: Metal links no host
                         code (in the emulator such a declaration would reach libc)
``function-pointer``     a barrier or simdgroup function used as a value (its address taken):
                         they must be called directly, in uniform control flow
``address-space``        a pointer or reference parameter without an address space (device,
                         constant, threadgroup, thread): Apple's compiler rejects it
``non-ascii``            bytes outside ASCII: PyTorch passes the source to Metal as an ASCII
                         string
``unsupported``          features the project does not use and the emulator does not model:
                         textures, samplers, ``[[stage_in]]``, ``vertex`` / ``fragment``
                         functions, ``[[threadgroup(n)]]`` buffers; ``simdgroup_matrix`` names
                         in a source that includes neither ``<metal_simdgroup_matrix>`` nor
                         ``<metal_stdlib>`` (which includes it)
======================== ===================================================================

Positions honour ``#line N "file"`` markers (the loader inlines headers with them), so a problem
in an inlined header is reported as ``header.h:line:col``.  Results are cached per source text.

Run ``python -m mpslinalg.emulator.lint FILE...`` to lint files from the command line.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ._frontend import SYNC_NAMES, LineMap, _Macro, _Tok, tokenize
from ._lint_functions import _Functions
from ._lint_preproc import _Preprocessor
from ._lint_structure import _Structure
from ._lint_tables import (
    _EXPR_KEYWORDS,
    _HOST_FUNCTIONS,
    _INTERESTING,
    _KEYWORD_RULES,
    _LONG_DOUBLE_RE,
    _LONG_SUFFIX_RE,
    _SIMDGROUP_MATRIX_NAMES,
    _TYPE_LAYOUT,
    _UNSUPPORTED_ATTRS,
    _UNSUPPORTED_IDENTS,
    _VECTOR_TYPES,
    THREADGROUP_MEMORY_LIMIT,
    _Func,
)

__all__ = [
    "RULES",
    "THREADGROUP_MEMORY_LIMIT",
    "LintProblem",
    "MetalLintError",
    "check_source",
    "lint_file",
    "lint_source",
]


#: Rule name -> one-line description.
RULES: dict[str, str] = {
    "double": "Metal has no double precision",
    "std-namespace": "no C++ standard library in Metal",
    "include": "only Metal standard headers and our own metal/*.h may be included",
    "host-function": "host C library functions do not exist in Metal",
    "dynamic-memory": "no dynamic memory (new/delete) in Metal",
    "exceptions": "no exceptions in Metal",
    "virtual": "no virtual functions in Metal",
    "rtti": "no run-time type information in Metal",
    "goto": "no goto in Metal",
    "thread-local": "no thread_local storage in Metal",
    "vla": "array extents must be compile-time constants",
    "recursion": "Metal functions cannot recurse",
    "program-scope-variable": "program-scope variables must be in the constant address space",
    "vector-cast": "C-style vector casts are bit casts in clang but conversions in Metal",
    "threadgroup-memory": "at most 32 KiB of threadgroup memory per kernel",
    "asm": "no inline assembly in Metal",
    "linkage": "no extern declarations or extern \"C\" linkage in Metal",
    "function-pointer": "barriers and simdgroup functions must be called directly",
    "non-ascii": "Metal sources must be ASCII (PyTorch encodes them as ASCII)",
    "address-space": "pointers and references need an address space",
    "unsupported": "feature not supported by the project / emulator",
}


@dataclass(frozen=True, order=True)
class LintProblem:
    """One lint finding.

    Attributes
    ----------
    line, col : int
        1-based position of the offending token (columns count characters).
    rule : str
        Rule name, one of :data:`RULES`.
    message : str
        What is wrong and what to do instead.
    file : str or None
        The file named by the last ``#line N "file"`` directive before the problem (the loader
        inlines ``metal/*.h`` headers with such markers), in which case ``line`` is the line in
        that file; None when the source has no ``#line`` markers.
    """

    line: int
    col: int
    rule: str
    message: str
    file: str | None = None

    def format(self, name: str = "<source>") -> str:
        """Return ``name:line:col: [rule] message`` (``file`` replaces ``name`` when set)."""
        return f"{self.file or name}:{self.line}:{self.col}: [{self.rule}] {self.message}"

    def __str__(self) -> str:
        return self.format()


class MetalLintError(RuntimeError, ValueError):
    """Raised by :func:`check_source` when a source violates a lint rule.

    Attributes
    ----------
    name : str
        Name of the linted source (file name or ``"<source>"``).
    problems : list of LintProblem
        Every problem found, sorted by position.
    """

    def __init__(self, name: str, problems: Sequence[LintProblem]) -> None:
        self.name = name
        self.problems = list(problems)
        n = len(self.problems)
        lines = [f"{name}: {n} Metal lint problem{'s' if n != 1 else ''}:"]
        lines += ["  " + p.format(name) for p in self.problems]
        super().__init__("\n".join(lines))



class _Linter(_Preprocessor, _Structure, _Functions):
    """One lint run over one source (the passes are mixins, one module each)."""

    def __init__(self, source: str, headers: frozenset | None) -> None:
        self.source = source
        self.headers = headers
        self.problems: list[LintProblem] = []
        self.raw, self.cands, self.directives = tokenize(source, _INTERESTING)
        self.macros: dict[str, _Macro] = {}
        self.types: dict[str, tuple[int, int] | None] = dict(_TYPE_LAYOUT)
        self.aliases: dict[str, list] = {}
        self.templates: set[str] = {"vec", "array", "atomic", "numeric_limits", "packed_vec"}
        self.globals: dict[str, tuple] = {}
        self.funcs: list[_Func] = []
        self.insts: list = []  # (name tok, host_name, args tokens list)
        self.toks: list = []
        self.match: dict[int, int] = {}
        self.lines = LineMap(source, marks=[])  # markers: the active #line directives (preprocessor)
        self.host_calls: list[_Tok] = []
        self.namespaces: set[str] = set()
        self.generic_tg: dict[int, list] = {}
        self.matrix_header = False  # <metal_simdgroup_matrix> or <metal_stdlib> included

    # -- reporting -------------------------------------------------------------------------
    def linecol(self, pos: int) -> tuple[int, int]:
        """1-based (line, column) of a source offset."""
        return self.lines.linecol(pos)

    def presumed(self, pos: int) -> tuple[int, int, str | None]:
        """(line, column, file) of an offset after ``#line`` markers, as a compiler reports it."""
        return self.lines.presumed(pos)

    def spelling(self, toks: list) -> str:
        """Source text of a token range (joined tokens if it came out of a macro expansion)."""
        first, last = toks[0], toks[-1]
        text = self.source[first.pos : last.pos + len(last.text)]
        if text.startswith(first.text) and text.endswith(last.text) and len(text) < 200:
            return " ".join(text.split())
        return " ".join(t.text for t in toks)

    def report(self, tok: _Tok, rule: str, message: str) -> None:
        line, col, file = self.presumed(tok.pos)
        self.problems.append(LintProblem(line, col, rule, message, file))

    # -- driver ----------------------------------------------------------------------------
    def run(self) -> list[LintProblem]:
        raw = self.raw
        events = self.check_directives()
        if not self.source.isascii():
            self.check_ascii()
        for i in self.cands:
            self.check_token(raw, i, in_macro=False)
        for m in self.macros_ever:
            for i, t in enumerate(m.body):
                if t.text in _INTERESTING:
                    self.check_token(m.body, i, in_macro=True)
        if _LONG_SUFFIX_RE.search(self.source) and _LONG_DOUBLE_RE.search(self.source):
            for t in raw:
                self.check_number(t)
            for m in self.macros_ever:
                for t in m.body:
                    self.check_number(t)
        self.toks = self.expand_all(raw, events) if self.macros_ever else raw
        self.texts = [t.text for t in self.toks]
        self.match = self.match_brackets(self.toks)
        self.scan_scope(0, len(self.toks), None)
        self.analyze_functions()
        defined_macros = {m.name for m in self.macros_ever}
        for t in self.host_calls:
            if t.text not in self.by_name and t.text not in defined_macros:
                self.report(
                    t,
                    "host-function",
                    f"`{t.text}()` is a host C library function that does not exist in Metal",
                )
        return sorted(set(self.problems))

    def check_ascii(self) -> None:
        """One problem per line holding non-ASCII characters (comments included: PyTorch encodes
        the whole source string as ASCII before handing it to Metal)."""
        pos = 0
        for line in self.source.splitlines(keepends=True):
            if not line.isascii():
                k = next(k for k, ch in enumerate(line) if ord(ch) > 127)
                ch = line[k]
                self.report(
                    _Tok(ch, pos + k),
                    "non-ascii",
                    f"non-ASCII character {ch!r} (U+{ord(ch):04X}): PyTorch passes Metal sources as "
                    "ASCII; spell it in ASCII (e.g. 'x' for U+00D7, '<=' for U+2264)",
                )
            pos += len(line)


    # -- token-local rules ----------------------------------------------------------------------
    def check_number(self, t: _Tok) -> None:
        text = t.text
        low = text.lower()
        if (
            low.endswith("l")
            and low[0] in "0123456789."
            and not low.startswith("0x")
            and ("." in low or "e" in low)
        ):
            self.report(
                t,
                "double",
                f"`{text}` is a long double literal; Metal has no double precision: use an `f` suffix",
            )

    def check_token(self, toks: list, i: int, in_macro: bool) -> None:
        """Token-local rules for the identifier ``toks[i]`` (a candidate from the tokenizer)."""
        t = toks[i]
        text = t.text
        n = len(toks)
        nxt = toks[i + 1].text if i + 1 < n else ""
        prev = toks[i - 1].text if i > 0 else ""
        report = self.report
        if text in _SIMDGROUP_MATRIX_NAMES and not self.matrix_header and prev not in (".", "->"):
            report(
                t,
                "unsupported",
                f"`{text}` is declared in <metal_simdgroup_matrix>: include it (or <metal_stdlib>, "
                "which includes it)",
            )
        rule = _KEYWORD_RULES.get(text)
        if rule is not None:
            if text == "delete" and prev == "=":
                return  # `= delete;` deleted function
            report(t, rule[0], rule[1])
        elif text == "std":
            if nxt == "::" or prev == "namespace":
                report(
                    t,
                    "std-namespace",
                    "`std::` does not exist in Metal (no C++ standard library); use the `metal::` equivalent",
                )
        elif text in _HOST_FUNCTIONS and nxt == "(" and prev not in (".", "->", "::"):
            self.host_calls.append(t)  # reported unless the source defines a function of that name
        elif text in _UNSUPPORTED_IDENTS:
            if text == "sampler" and not (nxt.isidentifier() or nxt in ("&", "*", "(")):
                return  # `sampler` is a type, not a keyword: a variable may be called so
            report(
                t,
                "unsupported",
                f"`{text}` is not supported by the project / emulator (compute kernels on buffers only)",
            )
        elif text in _UNSUPPORTED_ATTRS:
            if self.in_attribute(toks, i):
                report(t, "unsupported", _UNSUPPORTED_ATTRS[text])
        elif text in SYNC_NAMES:
            j = i + 1
            if nxt == "<":  # explicit template arguments: look past them
                depth = 0
                while j < n:
                    depth += {"<": 1, ">": -1, ">>": -2}.get(toks[j].text, 0)
                    j += 1
                    if depth <= 0:
                        break
            called = j < n and toks[j].text == "("
            # a value where an expression starts (not a member access, not a declared name)
            as_value = prev in ("=", "&", "(", ",", "return", "?", ":", "{", "::")
            if not called and as_value and not in_macro:
                report(
                    t,
                    "function-pointer",
                    f"`{text}` used as a value (a function pointer): call barriers and simdgroup "
                    "functions directly, in uniform control flow (the emulator finds the kernels that "
                    "need them from direct calls)",
                )
        elif not in_macro and (text in _VECTOR_TYPES or text == "vec"):
            k = i - 1
            if k >= 1 and toks[k].text == "::" and toks[k - 1].text == "metal":
                k -= 2
            if k >= 0 and toks[k].text == "(":
                self.check_vector_cast(toks, k)

    @staticmethod
    def in_attribute(toks: list, i: int) -> bool:
        """Is ``toks[i]`` the name of an attribute inside ``[[ ... ]]``?"""
        j = i - 1
        depth = 0
        limit = max(0, i - 64)
        while j >= limit + 1:
            x = toks[j].text
            if x == ")":
                depth += 1
            elif x == "(":
                if depth == 0:
                    return False
                depth -= 1
            elif depth == 0:
                if x == "[":
                    return toks[j - 1].text == "[" and (j + 1 == i or toks[i - 1].text == ",")
                if x in (";", "{", "}", "]"):
                    return False
            j -= 1
        return False

    def check_vector_cast(self, toks: list, i: int) -> None:
        n = len(toks)
        j = i + 1
        if j + 1 < n and toks[j].text == "metal" and toks[j + 1].text == "::":
            j += 2
        if j >= n:
            return
        name = toks[j].text
        if name in _VECTOR_TYPES:
            j += 1
        elif name == "vec" and j + 1 < n and toks[j + 1].text == "<":
            while j < n and toks[j].text != ">":
                j += 1
            name = " ".join(t.text for t in toks[i + 1 : j + 1])
            j += 1
        else:
            return
        if j >= n or toks[j].text != ")":
            return
        if i > 0:
            p = toks[i - 1]
            if p.kind == "id" and p.text not in _EXPR_KEYWORDS:
                return  # call, sizeof(...), decltype(...), unnamed parameter
            if p.text in (")", "]", ">"):
                return
        if j + 1 < n and toks[j + 1].text in (")", ",", ";"):
            return
        self.report(
            toks[i],
            "vector-cast",
            f"C-style cast `({name})`: clang (the emulator) makes it a bit cast, Metal a "
            f"conversion; write `{name}(x)` or `static_cast<{name}>(x)`",
        )


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _lint_cached(source: str, headers: frozenset | None) -> tuple[LintProblem, ...]:
    return tuple(_Linter(source, headers).run())


def lint_source(
    source: str, *, name: str = "<source>", headers: Iterable[str] | None = None
) -> list[LintProblem]:
    """Lint a Metal Shading Language source.

    Parameters
    ----------
    source : str
        The MSL text (one ``.metal`` file, or a file with our headers already inlined).
    name : str, optional
        Name used in messages (kept for symmetry with :func:`check_source`; problems carry only
        positions).
    headers : iterable of str, optional
        File names of our own ``metal/*.h`` headers.  When given, a quoted ``#include`` must
        name one of them; when omitted, any plain ``name.h`` without a directory is accepted.

    Returns
    -------
    list of LintProblem
        Every problem found, sorted by line and column; empty when the source is clean.

    Raises
    ------
    TypeError
        If ``source`` is not a ``str``.

    Examples
    --------
    >>> [p.rule for p in lint_source("kernel void k(device double* x [[buffer(0)]]) {}")]
    ['double']
    """
    if not isinstance(source, str):
        raise TypeError(f"lint_source: source must be a str, got {type(source).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"lint_source: name must be a str, got {type(name).__name__}")
    hdrs = None if headers is None else frozenset(headers)
    return list(_lint_cached(source, hdrs))


def check_source(source: str, *, name: str = "<source>", headers: Iterable[str] | None = None) -> None:
    """Raise :class:`MetalLintError` if ``source`` violates any lint rule.

    Parameters
    ----------
    source : str
        The MSL text.
    name : str, optional
        File name used in the error message (``name:line:col: [rule] message``).
    headers : iterable of str, optional
        Allowed quoted includes, see :func:`lint_source`.

    Raises
    ------
    MetalLintError
        Listing every problem, one per line.
    TypeError
        If ``source`` is not a ``str``.

    Examples
    --------
    >>> check_source("kernel void k(device float* x [[buffer(0)]]) { x[0] = 1.0f; }")
    """
    problems = lint_source(source, name=name, headers=headers)
    if problems:
        raise MetalLintError(name, problems)


def lint_file(path: str | Path, *, headers: Iterable[str] | None = None) -> list[LintProblem]:
    """Lint one file; quoted includes default to the ``*.h`` files next to it.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.metal`` or ``.h`` file.
    headers : iterable of str, optional
        Allowed quoted includes; defaults to the names of the ``*.h`` files in the same directory.

    Returns
    -------
    list of LintProblem
    """
    p = Path(path)
    if headers is None:
        headers = [h.name for h in p.parent.glob("*.h")]
    return lint_source(p.read_text(encoding="utf-8"), name=str(p), headers=headers)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m mpslinalg.emulator.lint FILE...``; exit status 1 on problems."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m mpslinalg.emulator.lint FILE.metal [FILE.h ...]", file=sys.stderr)
        return 2
    bad = 0
    for a in args:
        for p in lint_file(a):
            print(p.format(a))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
