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
``non-ascii``            bytes outside ASCII: PyTorch passes the source to Metal as an ASCII
                         string
``unsupported``          features the project does not use and the emulator does not model:
                         textures, samplers, ``simdgroup_matrix``, ``[[stage_in]]``,
                         ``vertex`` / ``fragment`` functions, ``[[threadgroup(n)]]`` buffers
======================== ===================================================================

Positions honour ``#line N "file"`` markers (the loader inlines headers with them), so a problem
in an inlined header is reported as ``header.h:line:col``.  Results are cached per source text.

Run ``python -m mpslinalg.emulator.lint FILE...`` to lint files from the command line.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, chain, repeat
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

from ._prepass import SYNC_NAMES

__all__ = [
    "RULES",
    "THREADGROUP_MEMORY_LIMIT",
    "LintProblem",
    "MetalLintError",
    "check_source",
    "lint_file",
    "lint_source",
]

#: Threadgroup memory available to one threadgroup on Apple GPUs, in bytes.
THREADGROUP_MEMORY_LIMIT = 32 * 1024

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


# ---------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------


class _Tok(NamedTuple):
    """A token: its text and 0-based character offset in the source (line/col computed lazily).

    A named tuple so that the tokenizer can build all tokens with C-level ``map``/``zip``.
    """

    text: str
    pos: int

    @property
    def kind(self) -> str:
        """One of 'id', 'num', 'str', 'chr', 'op'."""
        s = self.text
        c = s[0]
        if c.isalpha() or c == "_" or c == "$":
            if s[-1] == '"':
                return "str"
            if s[-1] == "'":
                return "chr"
            return "id"
        if c.isdigit() or (c == "." and len(s) > 1 and s[1].isdigit()):
            return "num"
        if c == '"':
            return "str"
        if c == "'":
            return "chr"
        return "op"


_new_tok = tuple.__new__


# Each match is (leading blanks, one piece); pieces are directives, comments, literals,
# identifiers and punctuators.  The offset of a piece is the sum of the lengths before it
# (``re.findall`` is several times faster than ``re.finditer`` with match objects, which matters:
# the emulator lints every source it compiles).
_PIECE_RE = re.compile(
    r"""
    ([ \t\r\f\v\n]*)
    ( [A-Za-z_$][\w$]*
    | [0-9](?:[eEpP][+-]|[\w.])*
    | //[^\n]*
    | /\*.*?(?:\*/|\Z)
    | >>=|<<=|\.\.\.|->\*|::|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\#\#|\.\*
    | \.[0-9](?:[eEpP][+-]|[\w.])*
    | "(?:[^"\\\n]|\\.)*"?
    | '(?:[^'\\\n]|\\.)*'?
    | \#(?:[^\n\\/"']|\\.|//[^\n]*|/\*.*?(?:\*/|\Z)|/|"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)*
    | .
    )
    """,
    re.X | re.S,
)


class _Directive:
    __slots__ = ("name", "pos", "toks", "raw")

    def __init__(self, name: str, pos: int, toks: list, raw: str) -> None:
        self.name = name
        self.pos = pos
        self.toks = toks
        self.raw = raw


class _Macro:
    __slots__ = ("name", "params", "body", "variadic")

    def __init__(self, name: str, params: list | None, body: list, variadic: bool) -> None:
        self.name = name
        self.params = params
        self.body = body
        self.variadic = variadic


def _literal_condition(toks: list) -> bool | None:
    """Value of an ``#if`` condition when it is a literal 0/1, else None (unknown)."""
    if len(toks) == 1 and toks[0].kind == "num":
        try:
            return int(toks[0].text.rstrip("uUlL"), 0) != 0
        except ValueError:
            return None
    return None


def _pieces_to_tokens(text: str, base: int, out: list) -> None:
    """Tokens of a directive's ``text`` (comments dropped), offsets shifted by ``base``."""
    pos = base
    for ws, s in _PIECE_RE.findall(text):
        pos += len(ws)
        if s[0] == "#" and len(s) > 1 and s[1] != "#":  # `#param` (stringification)
            out.append(_Tok("#", pos))
            _pieces_to_tokens(s[1:], pos + 1, out)
        elif s != "\\" and not (s[0] == "/" and len(s) > 1 and s[1] in "/*"):
            out.append(_Tok(s, pos))  # (a lone backslash is a line continuation)
        pos += len(s)


def _tokenize(source: str, interesting: frozenset):
    """Split ``source`` into code tokens (inactive ``#if 0`` regions removed) and directives.

    Also returns the indices of tokens whose text is in ``interesting`` (the candidates of the
    token-local rules), so that those rules need not loop over every token.  Directives are
    returned as ``(index of the next code token, directive)``.
    """
    pieces = _PIECE_RE.findall(source)
    texts = list(map(itemgetter(1), pieces))
    ends = list(accumulate(map(len, chain.from_iterable(pieces))))
    starts = ends[0::2]  # offset of each piece (after its leading blanks)
    # Comments and directives are the only pieces starting with '/' or '#' besides the
    # operators '/', '/=', '#' and '##'.
    special = [i for i, s in enumerate(texts) if s[0] in "#/" and len(s) > 1 and s[1] not in "=#"]
    toks: list = []
    directives: list = []
    active = True
    cond_stack: list = []  # [parent_active, a branch known to be true was taken]
    seg = 0

    def flush(stop: int) -> None:
        if active and stop > seg:
            toks.extend(map(_new_tok, repeat(_Tok), zip(texts[seg:stop], starts[seg:stop])))

    for i in special:
        s = texts[i]
        pos = starts[i]
        if s[0] == "/":  # comment
            flush(i)
            seg = i + 1
            continue
        # a directive only at the start of a line (after blanks / comments)
        if not (
            pos == 0
            or "\n" in pieces[i][0]
            or source.rfind("\n", 0, pos) >= (ends[2 * i - 1] - len(texts[i - 1]) if i else 0)
        ):
            continue
        flush(i)
        seg = i + 1
        ptoks: list = []
        _pieces_to_tokens(s[1:], pos + 1, ptoks)
        name = ptoks[0].text if ptoks and ptoks[0].kind == "id" else ""
        rest = ptoks[1:]
        if name in ("if", "ifdef", "ifndef"):
            val = _literal_condition(rest) if name == "if" else None
            cond_stack.append([active, val is True])
            active = active and val is not False
        elif name in ("elif", "elifdef", "elifndef"):
            if cond_stack:
                entry = cond_stack[-1]
                val = _literal_condition(rest) if name == "elif" else None
                if entry[1]:
                    active = False
                else:
                    active = entry[0] and val is not False
                    entry[1] = val is True
        elif name == "else":
            if cond_stack:
                entry = cond_stack[-1]
                active = entry[0] and not entry[1]
        elif name == "endif":
            if cond_stack:
                active = cond_stack.pop()[0]
        elif active:
            directives.append((len(toks), _Directive(name, pos, ptoks, s)))
    flush(len(texts))
    cands = [i for i, t in enumerate(toks) if t.text in interesting]
    return toks, cands, directives


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------

_SCALAR_SIZES = {
    "bool": 1,
    "char": 1,
    "uchar": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "short": 2,
    "ushort": 2,
    "int16_t": 2,
    "uint16_t": 2,
    "half": 2,
    "bfloat": 2,
    "int": 4,
    "uint": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "float": 4,
    "unsigned": 4,
    "signed": 4,
    "long": 8,
    "ulong": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "ptrdiff_t": 8,
    "intptr_t": 8,
    "uintptr_t": 8,
    "atomic_int": 4,
    "atomic_uint": 4,
    "atomic_float": 4,
    "atomic_bool": 1,
}
_VECTOR_BASES = (
    "bool",
    "char",
    "uchar",
    "short",
    "ushort",
    "int",
    "uint",
    "long",
    "ulong",
    "half",
    "bfloat",
    "float",
)

#: name -> (size, alignment) in bytes, for the Metal types whose layout we know.
_TYPE_LAYOUT: dict[str, tuple[int, int]] = {k: (v, v) for k, v in _SCALAR_SIZES.items()}
_VECTOR_TYPES: set[str] = set()
for _b in _VECTOR_BASES:
    _s = _SCALAR_SIZES[_b]
    for _n in (2, 3, 4):
        _sz = _s * (4 if _n == 3 else _n)
        _TYPE_LAYOUT[f"{_b}{_n}"] = (_sz, _sz)
        _TYPE_LAYOUT[f"packed_{_b}{_n}"] = (_s * _n, _s)
        _VECTOR_TYPES.add(f"{_b}{_n}")
for _b in ("half", "float", "bfloat"):
    for _c in (2, 3, 4):
        for _r in (2, 3, 4):
            _vs, _va = _TYPE_LAYOUT[f"{_b}{_r}"]
            _TYPE_LAYOUT[f"{_b}{_c}x{_r}"] = (_c * _vs, _va)

_MULTIWORD_TYPE = {"unsigned", "signed", "long", "short", "int", "char"}

#: Metal standard headers (only <metal_stdlib> may be included: the loader allows only it).
_METAL_HEADERS = {
    "metal_stdlib",
    "metal_math",
    "metal_common",
    "metal_integer",
    "metal_relational",
    "metal_geometric",
    "metal_atomic",
    "metal_compute",
    "metal_simdgroup",
    "metal_numeric",
    "metal_limits",
    "metal_types",
    "metal_type_traits",
    "metal_utility",
    "metal_array",
    "metal_pack",
    "metal_matrix",
    "metal_functional",
}
_UNSUPPORTED_HEADERS = {
    "metal_texture",
    "metal_simdgroup_matrix",
    "metal_imageblocks",
    "metal_raytracing",
    "metal_graphics",
    "metal_quadgroup",
    "metal_visible_function_table",
}
_QUOTED_HEADER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\.h")

_KEYWORD_RULES = {
    "double": ("double", "`double` does not exist in Metal (no float64); use float"),
    "goto": ("goto", "`goto` is not allowed in Metal; use structured control flow"),
    "virtual": ("virtual", "virtual functions are not supported in Metal"),
    "typeid": ("rtti", "`typeid` (RTTI) is not supported in Metal"),
    "dynamic_cast": ("rtti", "`dynamic_cast` (RTTI) is not supported in Metal"),
    "thread_local": ("thread-local", "`thread_local` storage does not exist in Metal"),
    "_Thread_local": ("thread-local", "`_Thread_local` storage does not exist in Metal"),
    "__thread": ("thread-local", "`__thread` storage does not exist in Metal"),
    "throw": (
        "exceptions",
        "exceptions (`throw`) are not supported in Metal; report errors through an info/status buffer",
    ),
    "try": ("exceptions", "exceptions (`try`) are not supported in Metal"),
    "catch": ("exceptions", "exceptions (`catch`) are not supported in Metal"),
    "new": (
        "dynamic-memory",
        "`new` (dynamic memory) is not available in Metal; use fixed-size thread or threadgroup arrays",
    ),
    "delete": ("dynamic-memory", "`delete` (dynamic memory) is not available in Metal"),
    "asm": ("asm", "inline assembly (`asm`) does not exist in Metal"),
    "__asm__": ("asm", "inline assembly (`__asm__`) does not exist in Metal"),
    "__asm": ("asm", "inline assembly (`__asm`) does not exist in Metal"),
    "extern": (
        "linkage",
        "`extern` declarations (and `extern \"C\"` linkage) are not Metal: a kernel library links no "
        "host code, so define every function in the source",
    ),
}

_HOST_FUNCTIONS = {
    "printf",
    "fprintf",
    "sprintf",
    "snprintf",
    "puts",
    "putchar",
    "malloc",
    "calloc",
    "realloc",
    "free",
    "memcpy",
    "memmove",
    "memset",
    "memcmp",
    "strlen",
    "strcpy",
    "assert",
    "abort",
    "exit",
}

_UNSUPPORTED_IDENTS = {
    "texture1d",
    "texture1d_array",
    "texture2d",
    "texture2d_array",
    "texture2d_ms",
    "texture2d_ms_array",
    "texture3d",
    "texturecube",
    "texturecube_array",
    "texture_buffer",
    "depth2d",
    "depth2d_array",
    "depth2d_ms",
    "depth2d_ms_array",
    "depthcube",
    "depthcube_array",
    "sampler",
    "simdgroup_matrix",
    "simdgroup_float8x8",
    "simdgroup_half8x8",
    "simdgroup_bfloat8x8",
    "simdgroup_load",
    "simdgroup_store",
    "simdgroup_multiply",
    "simdgroup_multiply_accumulate",
    "make_filled_simdgroup_matrix",
    "vertex",
    "fragment",
    "imageblock",
    "threadgroup_imageblock",
    "visible_function_table",
    "intersection_function_table",
    "acceleration_structure",
    "instance_acceleration_structure",
    "primitive_acceleration_structure",
    "intersector",
    "stage_in",
}
_UNSUPPORTED_ATTRS = {
    "stage_in": "`[[stage_in]]` (vertex/fragment input) is not supported",
    "texture": "texture arguments (`[[texture(n)]]`) are not supported",
    "sampler": "sampler arguments (`[[sampler(n)]]`) are not supported",
    "threadgroup": "`[[threadgroup(n)]]` buffers are not supported: torch.mps.compile_shader "
    "cannot set their length; declare a fixed-size threadgroup array in the kernel",
    "visible": "`[[visible]]` functions are not supported",
    "color": "`[[color(n)]]` (fragment output) is not supported",
    "vertex_id": "`[[vertex_id]]` (vertex input) is not supported",
    "instance_id": "`[[instance_id]]` (vertex input) is not supported",
    "raster_order_group": "`[[raster_order_group]]` is not supported",
    "intersection": "intersection functions are not supported",
    "object": "object shaders are not supported",
    "mesh": "mesh shaders are not supported",
}

_DECL_QUALS = {
    "const",
    "constexpr",
    "static",
    "volatile",
    "thread",
    "threadgroup",
    "device",
    "constant",
    "inline",
    "extern",
    "register",
    "mutable",
    "ray_data",
    "object_data",
    "threadgroup_imageblock",
    "typename",
}
_NOT_TYPE = {
    "return",
    "if",
    "else",
    "while",
    "for",
    "do",
    "switch",
    "case",
    "default",
    "break",
    "continue",
    "goto",
    "throw",
    "try",
    "catch",
    "delete",
    "new",
    "sizeof",
    "alignof",
    "using",
    "typedef",
    "namespace",
    "template",
    "static_assert",
    "operator",
    "this",
    "true",
    "false",
    "nullptr",
    "co_return",
    "co_yield",
    "co_await",
    "asm",
    "friend",
    "public",
    "private",
    "protected",
    "decltype",
    "static_cast",
    "reinterpret_cast",
    "const_cast",
    "dynamic_cast",
    "as_type",
    "struct",
    "class",
    "union",
    "enum",
    "kernel",
    "vertex",
    "fragment",
}
#: Identifiers after which ``( type )`` or ``name(`` is an expression, not a call / declaration.
_EXPR_KEYWORDS = {
    "return",
    "case",
    "else",
    "do",
    "throw",
    "co_return",
    "co_yield",
    "and",
    "or",
    "not",
    "xor",
    "bitand",
    "bitor",
    "compl",
}
_QUALIFIED_SKIP = {"metal", "fast", "precise", "std"}
#: Tokens after a type name that can start a declarator (besides identifiers).
_DECL_FOLLOW = {"*", "&", "&&", "<", "::", "("}
_WALK_MARKS = {"{", "}", ";", "for"}


def _qualified_tokens(toks: list, i: int) -> tuple[str, int]:
    """Join ``a::b::c`` starting at ``i`` into one name; return (name, index after)."""
    n = len(toks)
    parts = [toks[i].text]
    j = i + 1
    while j + 1 < n and toks[j].text == "::" and toks[j + 1].kind == "id":
        parts.append(toks[j + 1].text)
        j += 2
    return "::".join(parts), j


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


# ---------------------------------------------------------------------------------------------
# The linter
# ---------------------------------------------------------------------------------------------


class _Func:
    __slots__ = (
        "name",
        "tok",
        "params",
        "min_arity",
        "max_arity",
        "tparams",
        "body",
        "is_kernel",
        "host_name",
        "scope",
    )

    def __init__(self) -> None:
        self.name = ""
        self.tok: _Tok | None = None
        self.params: list = []  # names of non-template parameters
        self.min_arity = 0
        self.max_arity = 0
        self.tparams: list | None = None  # [(kind 'type'|'value', name, default tokens)]
        self.body = (0, 0)
        self.is_kernel = False
        self.host_name: str | None = None
        self.scope: str | None = None  # enclosing struct name


class _Decl:
    __slots__ = ("quals", "type_toks", "declarators", "end")

    def __init__(self, quals: set, type_toks: list, declarators: list, end: int) -> None:
        self.quals = quals
        self.type_toks = type_toks
        self.declarators = declarators  # [(name_tok, indirect, extents, init)]
        self.end = end


_INTERESTING = frozenset(
    set(_KEYWORD_RULES)
    | {"std"}
    | _HOST_FUNCTIONS
    | _UNSUPPORTED_IDENTS
    | set(_UNSUPPORTED_ATTRS)
    | _VECTOR_TYPES
    | {"vec"}
    | SYNC_NAMES
)
_LONG_SUFFIX_RE = re.compile(r"[0-9.][lL]\b")  # cheap pre-filter for the one below
# a decimal floating literal with an L suffix (long double), e.g. 1.0L, .5l, 1e3L
_LONG_DOUBLE_RE = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?[lL]\b")


class _Linter:
    def __init__(self, source: str, headers: frozenset | None) -> None:
        self.source = source
        self.headers = headers
        self.problems: list[LintProblem] = []
        self.raw, self.cands, self.directives = _tokenize(source, _INTERESTING)
        self.macros: dict[str, _Macro] = {}
        self.types: dict[str, tuple[int, int] | None] = dict(_TYPE_LAYOUT)
        self.aliases: dict[str, list] = {}
        self.templates: set[str] = {"vec", "array", "atomic", "numeric_limits", "packed_vec"}
        self.globals: dict[str, tuple] = {}
        self.funcs: list[_Func] = []
        self.insts: list = []  # (name tok, host_name, args tokens list)
        self.toks: list = []
        self.match: dict[int, int] = {}
        self._line_starts: list[int] | None = None
        self.host_calls: list[_Tok] = []
        self.namespaces: set[str] = set()
        self.generic_tg: dict[int, list] = {}

    # -- reporting -------------------------------------------------------------------------
    def linecol(self, pos: int) -> tuple[int, int]:
        """1-based (line, column) of a source offset."""
        if self._line_starts is None:
            starts = [0]
            find = self.source.find
            k = find("\n")
            while k >= 0:
                starts.append(k + 1)
                k = find("\n", k + 1)
            self._line_starts = starts
        line = bisect_right(self._line_starts, pos)
        return line, pos - self._line_starts[line - 1] + 1

    def presumed(self, pos: int) -> tuple[int, int, str | None]:
        """(line, column, file) of an offset after ``#line`` markers, as a compiler reports it."""
        line, col = self.linecol(pos)
        k = bisect_right(self.line_marks, (line,)) - 1
        if k < 0:
            return line, col, None
        at, number, file = self.line_marks[k]
        return number + (line - at - 1), col, file

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

    # -- preprocessor ------------------------------------------------------------------------
    def check_directives(self) -> list:
        """Check includes; record macro definitions as (token index, name, macro or None)."""
        events = []
        self.macros_ever: list[_Macro] = []
        # `#line N "file"` markers: (physical line of the marker, N, file)
        self.line_marks: list[tuple[int, int, str | None]] = []
        file = None
        for _index, d in self.directives:
            if d.name == "line" and len(d.toks) >= 2 and d.toks[1].kind == "num":
                if len(d.toks) >= 3 and d.toks[2].kind == "str":
                    file = d.toks[2].text[1:-1]
                self.line_marks.append((self.linecol(d.pos)[0], int(d.toks[1].text), file))
        for index, d in self.directives:
            if d.name in ("include", "include_next", "import"):
                self.check_include(d)
            elif d.name == "define" and len(d.toks) >= 2 and d.toks[1].kind == "id":
                m = self.define(d.toks)
                self.macros_ever.append(m)
                events.append((index, m.name, m))
            elif d.name == "undef" and len(d.toks) >= 2:
                events.append((index, d.toks[1].text, None))
        return events

    def check_include(self, d: _Directive) -> None:
        m = re.match(r"#\s*\w+\s*(<([^>\n]*)>|\"([^\"\n]*)\")", d.raw)
        tok = _Tok("#", d.pos)
        hint = (
            "kernels must be self-contained: include only <metal_stdlib> and our own "
            "metal/*.h headers (the loader inlines them)"
        )
        if d.name != "include":
            self.report(tok, "include", f"`#{d.name}` is not supported; {hint}")
            return
        if m is None:
            self.report(tok, "include", f"cannot check a computed `#include`; {hint}")
            return
        if m.group(2) is not None:
            header = m.group(2).strip()
            if header == "metal_stdlib":
                return
            if header in _METAL_HEADERS:
                self.report(
                    tok,
                    "include",
                    f"`#include <{header}>`: include <metal_stdlib> instead "
                    "(it has everything; the loader allows only it)",
                )
                return
            if header in _UNSUPPORTED_HEADERS:
                self.report(
                    tok,
                    "unsupported",
                    f"`#include <{header}>`: this Metal feature is not supported by the project / emulator",
                )
                return
            self.report(tok, "include", f"`#include <{header}>` is not a Metal header; {hint}")
            return
        header = m.group(3)
        ok = _QUOTED_HEADER_RE.fullmatch(header) is not None
        if ok and self.headers is not None:
            ok = header in self.headers
        if not ok:
            known = (
                f" (known: {', '.join(sorted(self.headers)) or 'none'})" if self.headers is not None else ""
            )
            self.report(
                tok, "include", f'`#include "{header}"` is not one of our metal/*.h headers{known}; {hint}'
            )

    @staticmethod
    def define(ptoks: list) -> _Macro:
        name_tok = ptoks[1]
        rest = ptoks[2:]
        params = None
        variadic = False
        if rest and rest[0].text == "(" and rest[0].pos == name_tok.pos + len(name_tok.text):
            params = []
            k = 1
            while k < len(rest) and rest[k].text != ")":
                if rest[k].kind == "id":
                    params.append(rest[k].text)
                elif rest[k].text == "...":
                    variadic = True
                    params.append("__VA_ARGS__")
                k += 1
            rest = rest[k + 1 :]
        return _Macro(name_tok.text, params, rest, variadic)

    def expand_all(self, raw: list, events: list) -> list:
        """Expand macro uses, each with the definitions in force at that point of the file."""
        names = {e[1] for e in events}
        uses = [i for i, t in enumerate(raw) if t.text in names]
        if not uses:
            return raw
        out: list = []
        cursor = 0
        ev = 0
        self.macros = {}
        for i in uses:
            if i < cursor:
                continue
            while ev < len(events) and events[ev][0] <= i:
                _index, name, macro = events[ev]
                if macro is None:
                    self.macros.pop(name, None)
                else:
                    self.macros[name] = macro
                ev += 1
            out.extend(raw[cursor:i])
            expanded, cursor = self.expand_one(raw, i, frozenset(), 0)
            out.extend(expanded)
        out.extend(raw[cursor:])
        return out

    def expand(self, toks: list, hide: frozenset, depth: int) -> list:
        """Expand every macro use in a (short) token list."""
        if depth > 32:
            return toks
        out: list = []
        i = 0
        n = len(toks)
        macros = self.macros
        while i < n:
            if toks[i].text in macros:
                expanded, i = self.expand_one(toks, i, hide, depth)
                out.extend(expanded)
            else:
                out.append(toks[i])
                i += 1
        return out

    def expand_one(self, toks: list, i: int, hide: frozenset, depth: int) -> tuple[list, int]:
        """Expand the macro use at ``toks[i]`` (simplified C preprocessor semantics).

        Returns the expansion and the index after the use.  Expanded tokens take the position of
        the macro name they come from.
        """
        t = toks[i]
        m = self.macros.get(t.text)
        n = len(toks)
        if m is None or t.text in hide or depth > 32:
            return [t], i + 1
        at = t.pos
        if m.params is None:
            body = self.paste([_Tok(b.text, at) for b in m.body], at)
            return self.expand(body, hide | {m.name}, depth + 1), i + 1
        if i + 1 >= n or toks[i + 1].text != "(":
            return [t], i + 1
        args: list = [[]]
        k = i + 2
        level = 0
        while k < n:
            x = toks[k].text
            if x in ("(", "[", "{"):
                level += 1
            elif x in (")", "]", "}"):
                if level == 0:
                    break
                level -= 1
            elif x == "," and level == 0 and not (m.variadic and len(args) >= len(m.params)):
                args.append([])
                k += 1
                continue
            args[-1].append(toks[k])
            k += 1
        if args == [[]]:
            args = []
        body: list = []
        b = m.body
        params = m.params
        j = 0
        while j < len(b):
            bt = b[j]
            if bt.text == "#" and j + 1 < len(b) and b[j + 1].text in params:
                idx = params.index(b[j + 1].text)
                arg = args[idx] if idx < len(args) else []
                text = " ".join(a.text for a in arg).replace("\\", "\\\\").replace('"', '\\"')
                body.append(_Tok(f'"{text}"', at))
                j += 2
                continue
            if bt.text in params:
                idx = params.index(bt.text)
                arg = args[idx] if idx < len(args) else []
                pasted = (j + 1 < len(b) and b[j + 1].text == "##") or (j > 0 and b[j - 1].text == "##")
                arg = arg if pasted else self.expand(arg, hide, depth + 1)
                body.extend(_Tok(a.text, at) for a in arg)
                j += 1
                continue
            body.append(_Tok(bt.text, at))
            j += 1
        body = self.paste(body, at)
        return self.expand(body, hide | {m.name}, depth + 1), k + 1

    @staticmethod
    def paste(body: list, at: int) -> list:
        """Apply ``##`` token pasting."""
        if not any(b.text == "##" for b in body):
            return body
        out: list = []
        j = 0
        while j < len(body):
            if body[j].text == "##" and out and j + 1 < len(body):
                out[-1] = _Tok(out[-1].text + body[j + 1].text, at)
                j += 2
                continue
            out.append(body[j])
            j += 1
        return out

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

    # -- structure --------------------------------------------------------------------------
    @staticmethod
    def match_brackets(toks: list) -> dict:
        match: dict = {}
        stack: list = []
        pairs = {")": "(", "]": "[", "}": "{"}
        for i, t in enumerate(toks):
            x = t.text
            if x in ("(", "[", "{"):
                stack.append(i)
            elif x in pairs:
                want = pairs[x]
                k = len(stack) - 1
                while k >= 0 and toks[stack[k]].text != want:
                    k -= 1
                if k < 0:
                    continue
                opener = stack[k]
                del stack[k:]
                match[opener] = i
                match[i] = opener
        return match

    def skip_attrs(self, i: int, end: int) -> int:
        toks = self.toks
        while i < end:
            x = toks[i].text
            if x == "[" and i + 1 < end and toks[i + 1].text == "[":
                i = self.match.get(i, end - 1) + 1
            elif x in ("__attribute__", "alignas") and i + 1 < end and toks[i + 1].text == "(":
                i = self.match.get(i + 1, end - 1) + 1
            else:
                return i
        return i

    def angle_close(self, i: int, end: int) -> int | None:
        """Index of the ``>`` matching the ``<`` at ``i`` (``>>`` closes two), or None."""
        toks = self.toks
        depth = 0
        j = i
        while j < end:
            x = toks[j].text
            if x == "<":
                depth += 1
            elif x == ">":
                depth -= 1
                if depth == 0:
                    return j
            elif x == ">>":
                depth -= 2
                if depth <= 0:
                    return j if depth == 0 else None
            elif x in ("(", "["):
                j = self.match.get(j, end)
            elif x in (";", "{", "}", ")", "]"):
                return None
            j += 1
        return None

    def split_commas(self, lo: int, hi: int, angles: bool) -> list:
        """Split ``toks[lo:hi]`` at top-level commas into (start, stop) ranges."""
        toks = self.toks
        parts = []
        start = lo
        j = lo
        depth = 0
        while j < hi:
            x = toks[j].text
            if x in ("(", "[", "{"):
                j = min(self.match.get(j, j), hi - 1) + 1
                continue
            if angles and x == "<":
                depth += 1
            elif angles and x == ">" and depth:
                depth -= 1
            elif angles and x == ">>" and depth:
                depth = max(0, depth - 2)
            elif x == "," and depth == 0:
                parts.append((start, j))
                start = j + 1
            j += 1
        if start < hi or parts:
            parts.append((start, hi))
        return parts

    def scan_scope(self, i: int, end: int, struct: str | None) -> None:
        """Scan a namespace (``struct is None``) or struct body for declarations."""
        toks = self.toks
        match = self.match
        stmt = i
        after_type: int | None = None  # index after a type body within this statement
        while i < end:
            t = toks[i]
            x = t.text
            if x == "{":
                close = match.get(i, end)
                kind = self.classify_brace(stmt, i)
                if kind == "namespace":
                    if toks[stmt].text in ("namespace", "inline"):
                        self.namespaces.update(t.text for t in toks[stmt:i] if t.kind == "id")
                    self.scan_scope(i + 1, close, None)
                    i = stmt = close + 1
                    after_type = None
                    continue
                if kind == "init":
                    i = close + 1
                    continue
                if kind == "function":
                    self.record_function(stmt, i, close, struct)
                    i = stmt = close + 1
                    after_type = None
                    continue
                if kind == "type":
                    name = self.type_name(stmt, i)
                    if name:
                        self.templates.discard(name)
                        if self.is_template_head(stmt, i):
                            self.templates.add(name)
                    members: list = []
                    self.scan_struct_members(i + 1, close, name, members)
                    if name:
                        is_union = any(t.text == "union" for t in toks[stmt:i])
                        self.types[name] = (
                            None if self.is_template_head(stmt, i) else self.layout(members, is_union)
                        )
                    i = close + 1
                    after_type = i
                    continue
                if kind == "enum":
                    self.parse_enum(stmt, i, close)
                    i = close + 1
                    after_type = i
                    continue
                i = stmt = close + 1
                after_type = None
                continue
            if x == ";":
                if after_type is not None:
                    self.type_declarators(stmt, after_type, i, struct)
                elif struct is None:
                    self.program_scope_statement(stmt, i)
                else:
                    self.struct_statement(stmt, i, struct)
                stmt = i + 1
                after_type = None
            elif x in ("(", "["):
                i = match.get(i, i)
            elif x == "}":
                stmt = i + 1
            elif (
                struct is not None
                and x in ("public", "private", "protected")
                and i + 1 < end
                and toks[i + 1].text == ":"
            ):
                i += 1
                stmt = i + 1
            i += 1

    def scan_struct_members(self, i: int, end: int, name: str | None, members: list) -> None:
        outer = self._members  # nested struct definitions
        self._members = members
        self.scan_scope(i, end, name or "<anonymous>")
        self._members = outer

    def strip_template_head(self, s: int, e: int) -> int:
        toks = self.toks
        s = self.skip_attrs(s, e)
        while s < e and toks[s].text == "template" and s + 1 < e and toks[s + 1].text == "<":
            c = self.angle_close(s + 1, e)
            if c is None:
                return s
            s = self.skip_attrs(c + 1, e)
        return s

    def is_template_head(self, s: int, e: int) -> bool:
        s = self.skip_attrs(s, e)
        return s + 1 < e and self.toks[s].text == "template" and self.toks[s + 1].text == "<"

    def classify_brace(self, s: int, e: int) -> str:
        toks = self.toks
        if s < e and (
            toks[s].text == "namespace"
            or (toks[s].text == "inline" and s + 1 < e and toks[s + 1].text == "namespace")
        ):
            return "namespace"
        if s + 1 < e and toks[s].text == "extern" and toks[s + 1].kind == "str":
            return "namespace"
        s = self.strip_template_head(s, e)
        has_paren = False
        keyword = None
        j = s
        while j < e:
            x = toks[j].text
            if x == "=":
                return "init"
            if x == "[" and j + 1 < e and toks[j + 1].text == "[":
                j = self.match.get(j, e) + 1
                continue
            if x == "(":
                if j > s and toks[j - 1].text not in ("alignas", "__attribute__"):
                    has_paren = True
                j = self.match.get(j, e) + 1
                continue
            if x in ("struct", "class", "union", "enum") and keyword is None and not has_paren:
                keyword = "enum" if x == "enum" else "type"
            j += 1
        if has_paren:
            return "function"
        if keyword is not None:
            return keyword
        return "other"

    def type_name(self, s: int, e: int) -> str | None:
        toks = self.toks
        s = self.strip_template_head(s, e)
        for j in range(s, e):
            if toks[j].text in ("struct", "class", "union", "enum"):
                k = self.skip_attrs(j + 1, e)
                if k < e and toks[k].text == "class":  # enum class
                    k += 1
                if k < e and toks[k].kind == "id" and toks[k].text not in ("final",):
                    return toks[k].text
                return None
        return None

    @staticmethod
    def layout(members: list, is_union: bool = False) -> tuple[int, int] | None:
        """(size, alignment) of a struct (or union) from its members' layouts; None if unknown."""
        size = 0
        align = 1
        for m in members:
            if m is None:
                return None
            msize, malign = m
            if is_union:
                size = max(size, msize)
            else:
                size = (size + malign - 1) // malign * malign + msize
            align = max(align, malign)
        size = (size + align - 1) // align * align
        return (size, align) if members else (1, 1)

    def parse_enum(self, s: int, open_: int, close: int) -> None:
        toks = self.toks
        ename = self.type_name(s, open_)
        value = -1
        for lo, hi in self.split_commas(open_ + 1, close, angles=False):
            if lo >= hi or toks[lo].kind != "id":
                continue
            name = toks[lo].text
            if hi - lo > 2 and toks[lo + 1].text == "=":
                state, v = self.evaluate(toks[lo + 2 : hi], self.global_lookup)
                if state != _CONST:
                    value = None
                    self.globals[name] = (_UNKNOWN, None)
                    continue
                value = v
            elif value is None:
                self.globals[name] = (_UNKNOWN, None)
                continue
            else:
                value += 1
            self.globals[name] = (_CONST, value)
            if ename:
                self.globals[f"{ename}::{name}"] = (_CONST, value)

    def type_declarators(self, s: int, after: int, e: int, struct: str | None) -> None:
        """``struct S {...} a, b;``: variables declared with a type definition."""
        toks = self.toks
        head = {t.text for t in toks[s:after]}
        names = [t for t in toks[after:e] if t.kind == "id"]
        if not names:
            return
        if "typedef" in head:
            name = self.type_name(s, after)
            for t in names:
                if t.text not in _DECL_QUALS and name:
                    self.types[t.text] = self.types.get(name)
            return
        if struct is None and "constant" not in head and not any(t.text == "constant" for t in names):
            decl_names = [t for t in names if t.text not in _DECL_QUALS]
            if decl_names:
                self.report_program_scope(decl_names[0])

    def report_program_scope(self, tok: _Tok) -> None:
        self.report(
            tok,
            "program-scope-variable",
            f"program-scope variable `{tok.text}` is not in the `constant` address "
            "space; Metal has no mutable globals: declare it `constant` (e.g. "
            "`constant constexpr int N = 16;`) or make it a kernel argument",
        )

    def program_scope_statement(self, s: int, e: int) -> None:
        toks = self.toks
        s = self.skip_attrs(s, e)
        if s >= e:
            return
        first = toks[s].text
        if first == "typedef":
            self.typedef(s + 1, e)
            return
        if first == "using":
            if s + 3 < e and toks[s + 1].kind == "id" and toks[s + 2].text == "=":
                self.alias(toks[s + 1].text, toks[s + 3 : e])
            return
        if first == "template":
            if s + 1 < e and toks[s + 1].text != "<":
                self.instantiation(s, e)
            return
        if first in ("static_assert", "namespace", "friend"):
            return
        if first in ("struct", "class", "union", "enum") and e - s <= 2:
            return  # forward declaration `struct S;`
        d = self.parse_decl(s, e, program=True)
        if d is None or not d.declarators:
            return
        name_tok, _indirect, extents, init = d.declarators[0]
        # `T f(params);` is a function declaration (or a macro invocation): not a variable.
        if init is not None and init[0] == "(":
            return
        if "constant" not in d.quals:
            self.report_program_scope(name_tok)
        if d.quals & {"constant", "constexpr", "const"}:
            for name_tok, indirect, extents, init in d.declarators:
                if not extents and not indirect and init is not None:
                    self.globals[name_tok.text] = self.evaluate(init[1], self.global_lookup)

    def struct_statement(self, s: int, e: int, struct: str) -> None:
        toks = self.toks
        s = self.skip_attrs(s, e)
        if s >= e:
            return
        first = toks[s].text
        if first in ("using", "typedef", "friend", "static_assert", "template"):
            return
        d = self.parse_decl(s, e, program=False)
        if d is None:
            if self._members is not None:
                self._members.append(None)
            return
        for name_tok, indirect, extents, init in d.declarators:
            if init is not None and init[0] == "(":
                continue  # member function declaration
            if "static" in d.quals or "constexpr" in d.quals:
                if d.quals & {"constexpr", "const", "constant"} and init is not None and not extents:
                    val = self.evaluate(init[1], self.global_lookup)
                    self.globals[name_tok.text] = val
                    self.globals[f"{struct}::{name_tok.text}"] = val
                continue
            if self._members is None:
                continue
            if indirect:
                self._members.append((8, 8) if indirect == "*" else None)
                continue
            lay = self.sizeof(d.type_toks, self.global_lookup)
            count = 1
            for ext in extents:
                st, v = self.evaluate(ext, self.global_lookup)
                if st != _CONST:
                    lay = None
                    break
                count *= v
            self._members.append(None if lay is None else (lay[0] * count, lay[1]))

    _members: list | None = None

    def typedef(self, s: int, e: int) -> None:
        toks = self.toks
        if e - s >= 2 and toks[e - 1].kind == "id":
            self.alias(toks[e - 1].text, toks[s : e - 1])

    def alias(self, name: str, type_toks: list) -> None:
        self.aliases[name] = list(type_toks)
        self.types[name] = self.sizeof(type_toks, self.global_lookup)

    # -- declarations ----------------------------------------------------------------------
    def is_type_name(self, name: str, tnames: dict | None = None) -> bool:
        return (
            name in self.types
            or name in self.aliases
            or name in self.templates
            or name in _MULTIWORD_TYPE
            or name == "auto"
            or (tnames is not None and name in tnames)
        )

    def parse_decl(self, i: int, end: int, program: bool, tnames: dict | None = None) -> _Decl | None:
        """Parse a simple declaration starting at ``i``; None if it is not one."""
        toks = self.toks
        match = self.match
        j = i
        quals: set = set()
        while j < end and toks[j].text in _DECL_QUALS:
            quals.add(toks[j].text)
            j += 1
        if j >= end:
            return None
        tstart = j
        if toks[j].text in ("struct", "class", "union", "enum"):
            j += 1
        if j < end and toks[j].text == "::":
            j += 1
        if j >= end or toks[j].kind != "id" or toks[j].text in _NOT_TYPE:
            return None
        known = False
        if toks[j].text in _MULTIWORD_TYPE:
            while j < end and toks[j].text in _MULTIWORD_TYPE:
                j += 1
            known = True
        else:
            known = self.is_type_name(toks[j].text, tnames)
            j += 1
            while j < end:
                x = toks[j].text
                if x == "<":
                    c = self.angle_close(j, end)
                    if c is None or c + 1 >= end:
                        return None
                    nx = toks[c + 1]
                    if not (nx.kind == "id" or nx.text in ("*", "&", "::")):
                        return None
                    j = c + 1
                    known = True
                    continue
                if x == "::" and j + 1 < end and toks[j + 1].kind == "id":
                    j += 2
                    continue
                break
        type_toks = toks[tstart:j]
        while j < end and toks[j].text in _DECL_QUALS:
            quals.add(toks[j].text)
            j += 1
        declarators = []
        first = True
        while j < end:
            indirect = ""
            while j < end and (toks[j].text in ("*", "&", "&&") or toks[j].text in _DECL_QUALS):
                if toks[j].text in ("*", "&", "&&"):
                    indirect = toks[j].text
                j += 1
            if j >= end:
                return None if first else _Decl(quals, type_toks, declarators, j)
            t = toks[j]
            if indirect and first and not (known or quals):
                return None  # `a * b` is an expression unless `a` is a type
            if t.text == "(":
                c = match.get(j)
                if c is None or not known or j + 1 >= end or toks[j + 1].text not in ("*", "&"):
                    return None
                inner = [x for x in toks[j + 1 : c] if x.kind == "id" and x.text not in _DECL_QUALS]
                if not inner:
                    return None
                name_tok = inner[-1]
                indirect = indirect or "(" + toks[j + 1].text
                j = c + 1
            elif t.kind == "id" and t.text not in _NOT_TYPE and t.text not in _DECL_QUALS:
                name_tok = t
                j += 1
            else:
                return None if first else _Decl(quals, type_toks, declarators, j)
            if j < end and toks[j].text == "[" and j + 1 < end and toks[j + 1].text == "[":
                j = self.skip_attrs(j, end)
            nx = toks[j].text if j < end else ";"
            if first and nx not in ("=", ";", ",", "[", "(", "{", ":", ")"):
                return None
            if first and nx == ")" and not program:
                return None
            extents = []
            while j < end and toks[j].text == "[":
                c = match.get(j)
                if c is None:
                    return None
                extents.append(toks[j + 1 : c])
                j = c + 1
            j = self.skip_attrs(j, end)
            init = None
            if j < end and toks[j].text == "=":
                k = j + 1
                while k < end and toks[k].text not in (",", ";", ")"):
                    if toks[k].text in ("(", "[", "{"):
                        k = match.get(k, end)
                    k += 1
                init = ("=", toks[j + 1 : k])
                j = k
            elif j < end and toks[j].text in ("(", "{"):
                c = match.get(j, end)
                init = (toks[j].text, toks[j + 1 : c])
                j = c + 1
            declarators.append((name_tok, indirect, extents, init))
            first = False
            if j < end and toks[j].text == ",":
                j += 1
                continue
            break
        return _Decl(quals, type_toks, declarators, j)

    # -- functions ----------------------------------------------------------------------------
    def param_group(self, s: int, e: int) -> int | None:
        """Index of the ``(`` of the parameter list in a function head ``toks[s:e]``."""
        toks = self.toks
        best = None
        j = s
        while j < e:
            x = toks[j].text
            if x == "[" and j + 1 < e and toks[j + 1].text == "[":
                j = self.match.get(j, e) + 1
                continue
            if x == "(":
                p = toks[j - 1] if j > s else None
                if j - 2 >= s and toks[j - 2].text == "operator" and p.kind == "op":
                    best = j  # `operator*(`, `operator==(`, ...
                elif (
                    p is not None
                    and (p.kind == "id" or p.text in (">", ">>"))
                    and p.text
                    not in ("decltype", "noexcept", "alignas", "__attribute__", "sizeof", "throw", "requires")
                ):
                    best = j
                j = self.match.get(j, e) + 1
                continue
            j += 1
        return best

    def name_before(self, k: int, s: int) -> tuple[_Tok | None, tuple[int, int] | None]:
        """Function name token before the ``(`` at ``k`` and the range of explicit template args."""
        toks = self.toks
        j = k - 1
        targs = None
        if j >= s and toks[j].text in (">", ">>"):
            depth = 0
            m = j
            while m >= s:
                x = toks[m].text
                if x == ">":
                    depth += 1
                elif x == ">>":
                    depth += 2
                elif x == "<":
                    depth -= 1
                    if depth == 0:
                        break
                elif x == ")":
                    m = self.match.get(m, m)
                m -= 1
            if m < s:
                return None, None
            targs = (m + 1, j)
            j = m - 1
        if j >= s and toks[j].kind == "id":
            return toks[j], targs
        if j - 1 >= s and toks[j - 1].text == "operator":
            return toks[j - 1], targs  # operator functions are nodes named `operator`
        return None, None

    def template_params(self, s: int, e: int) -> list | None:
        toks = self.toks
        s = self.skip_attrs(s, e)
        if not (s + 1 < e and toks[s].text == "template" and toks[s + 1].text == "<"):
            return None
        c = self.angle_close(s + 1, e)
        if c is None:
            return None
        params = []
        for lo, hi in self.split_commas(s + 2, c, angles=True):
            if lo >= hi:
                continue
            eq = next((k for k in range(lo, hi) if toks[k].text == "="), hi)
            default = toks[eq + 1 : hi] if eq < hi else None
            ids = [t for t in toks[lo:eq] if t.kind == "id"]
            if toks[lo].text in ("typename", "class"):
                name = ids[1].text if len(ids) > 1 else None
                params.append(("type", name, default))
            else:
                name = ids[-1].text if len(ids) > 1 else None
                params.append(("value", name, default))
        return params

    def record_function(self, s: int, open_: int, close: int, struct: str | None) -> None:
        toks = self.toks
        k = self.param_group(s, open_)
        if k is None:
            return
        name_tok, _targs = self.name_before(k, s)
        if name_tok is None:
            return
        f = _Func()
        f.name = name_tok.text
        f.tok = name_tok
        f.scope = struct
        f.body = (open_ + 1, close)
        f.tparams = self.template_params(s, k)
        if f.tparams:
            self.templates.add(f.name)
        head = toks[s:k]
        f.is_kernel = any(t.text == "kernel" for t in head)
        for j, t in enumerate(head):
            if t.text == "host_name" and j + 2 < len(head) and head[j + 2].kind == "str":
                f.host_name = head[j + 2].text.strip('"')
        self.parse_params(f, k)
        self.funcs.append(f)

    def parse_params(self, f: _Func, k: int) -> None:
        toks = self.toks
        c = self.match.get(k, k)
        parts = self.split_commas(k + 1, c, angles=True)
        if len(parts) == 1 and (
            parts[0][0] == parts[0][1]
            or (parts[0][1] - parts[0][0] == 1 and toks[parts[0][0]].text == "void")
        ):
            parts = []
        n_required = 0
        for lo, hi in parts:
            j = lo
            stop = hi
            k2 = lo
            while k2 < hi:
                x = toks[k2].text
                if x == "[" and k2 + 1 < hi and toks[k2 + 1].text == "[":
                    k2 = self.match.get(k2, hi) + 1
                    continue
                if x == "=":
                    stop = k2
                    break
                if x in ("(", "["):
                    k2 = self.match.get(k2, hi)
                k2 += 1
            if stop == hi:
                n_required += 1
            name = None
            while j < stop:
                t = toks[j]
                if t.text == "[" and j + 1 < stop and toks[j + 1].text == "[":
                    j = self.match.get(j, stop) + 1
                    continue
                if t.text == "[":
                    j = self.match.get(j, stop) + 1
                    continue
                if t.text == "(":
                    inner = [x for x in toks[j + 1 : self.match.get(j, stop)] if x.kind == "id"]
                    if inner:
                        name = inner[-1].text
                    j = self.match.get(j, stop) + 1
                    continue
                if t.text == "<":
                    c2 = self.angle_close(j, stop)
                    j = (c2 if c2 is not None else j) + 1
                    continue
                if t.kind == "id" and j > lo and t.text not in _DECL_QUALS:
                    name = t.text
                j += 1
            if name:
                f.params.append(name)
        f.max_arity = len(parts)
        f.min_arity = n_required

    def instantiation(self, s: int, e: int) -> None:
        toks = self.toks
        k = self.param_group(s, e)
        if k is None:
            return
        name_tok, targs = self.name_before(k, s)
        if name_tok is None:
            return
        host = None
        for j in range(s, k - 2):
            if toks[j].text == "host_name" and toks[j + 1].text == "(":
                parts = []
                m = j + 2
                while m < k and toks[m].kind == "str":
                    parts.append(toks[m].text[1:-1])
                    m += 1
                host = "".join(parts) or None
                break
        args = None
        if targs is not None:
            args = [toks[lo:hi] for lo, hi in self.split_commas(targs[0], targs[1], angles=True)]
            if args and toks[targs[1]].text == ">>":  # `f<T, Op<T>>(`: give back the inner `>`
                args[-1] = args[-1] + [_Tok(">", toks[targs[1]].pos)]
        self.insts.append((name_tok, host, args))

    # -- evaluation ------------------------------------------------------------------------
    def global_lookup(self, name: str) -> tuple:
        v = self.globals.get(name)
        if v is not None:
            return v
        m = self.macros.get(name)
        if m is not None and m.params is None:
            return self.evaluate(m.body, self.global_lookup)
        if "::" in name:
            return self.global_lookup(name.rsplit("::", 1)[1])
        return (_UNKNOWN, None)

    def evaluate(self, toks: list, lookup) -> tuple:
        """(_CONST, value) | (_RUNTIME, names) | (_UNKNOWN, None) for an expression."""
        runtime = []
        n = len(toks)
        j = 0
        while j < n:
            t = toks[j]
            c = t.text[0]
            if c.isalpha() or c == "_":
                if t.text in ("sizeof", "alignof", "static_cast"):
                    # skip the parenthesised type / template argument
                    depth = 0
                    j += 1
                    while j < n:
                        x = toks[j].text
                        if x in ("(", "<"):
                            depth += 1
                        elif x in (")", ">"):
                            depth -= 1
                            if depth == 0:
                                break
                        j += 1
                    j += 1
                    continue
                if j > 0 and toks[j - 1].text in (".", "->"):
                    j += 1
                    continue
                name, j2 = _qualified_tokens(toks, j)
                if lookup(name)[0] == _RUNTIME:
                    runtime.append(name)
                j = j2
                continue
            j += 1
        if runtime:
            return (_RUNTIME, runtime)
        try:
            return (_CONST, _Evaluator(toks, lookup, lambda tt: self.sizeof(tt, lookup)).run())
        except (_NotConstant, ValueError, KeyError, IndexError, RecursionError):
            return (_UNKNOWN, None)

    def sizeof(
        self, type_toks: list, lookup, bindings: dict | None = None, depth: int = 0
    ) -> tuple[int, int] | None:
        """(size, alignment) of the type spelled by ``type_toks``, or None if unknown."""
        if depth > 16:
            return None
        words = [
            t
            for t in type_toks
            if t.text not in _DECL_QUALS and t.text not in ("struct", "class", "union", "enum")
        ]
        while len(words) >= 2 and words[0].text in ("metal", "fast", "precise") and words[1].text == "::":
            words = words[2:]
        if not words:
            return None
        if words[-1].text in ("*", "&"):
            return (8, 8)
        if all(w.text in _MULTIWORD_TYPE for w in words):
            texts = [w.text for w in words]
            size = 1 if "char" in texts else 2 if "short" in texts else 8 if "long" in texts else 4
            return (size, size)
        head = words[0].text
        if len(words) == 1:
            if bindings is not None and head in bindings and bindings[head][0] == "type":
                return self.sizeof(bindings[head][1], lookup, None, depth + 1)
            if head in self.aliases:
                return self.sizeof(self.aliases[head], lookup, bindings, depth + 1)
            return self.types.get(head)
        if len(words) >= 4 and words[1].text == "<" and head in ("vec", "array", "atomic", "packed_vec"):
            inner = words[2:-1]
            if words[-1].text != ">":
                return None
            parts = [[]]
            level = 0
            for w in inner:
                if w.text == "<":
                    level += 1
                elif w.text == ">":
                    level -= 1
                if w.text == "," and level == 0:
                    parts.append([])
                else:
                    parts[-1].append(w)
            elem = self.sizeof(parts[0], lookup, bindings, depth + 1)
            if elem is None:
                return None
            if head == "atomic":
                return elem
            if len(parts) != 2:
                return None
            st, count = self.evaluate(parts[1], lookup)
            if st != _CONST:
                return None
            if head == "vec":
                size = elem[0] * (4 if count == 3 else count)
                return (size, size)
            return (elem[0] * count, elem[1])
        return None

    # -- function bodies -------------------------------------------------------------------
    def analyze_functions(self) -> None:
        by_name: dict[str, list] = {}
        for f in self.funcs:
            by_name.setdefault(f.name, []).append(f)
        self.by_name = by_name
        edges: dict[int, list] = {}
        index = {id(f): n for n, f in enumerate(self.funcs)}
        for n, f in enumerate(self.funcs):
            calls, tg = self.walk_body(f, None, collect=True)
            self.generic_tg[id(f)] = tg
            out = []
            for name_tok, argc, targs, qual in calls:
                cands = [g for g in by_name.get(name_tok.text, ()) if g.min_arity <= argc <= g.max_arity]
                if qual is not None:
                    # `X::f(...)`: only a member of struct X or a free function of namespace X (or
                    # of the global namespace for `::f`); `T::f` with T a template parameter or an
                    # unknown type resolves to nothing we can see.
                    cands = [
                        g
                        for g in cands
                        if g.scope == qual or (g.scope is None and (qual == "" or qual in self.namespaces))
                    ]
                if len(cands) != 1:
                    continue  # unresolved overload: cannot tell which function is called
                if targs is not None and any(
                    t.kind not in ("id",) and t.text not in ("::", "<", ">", ",") for t in targs
                ):
                    continue  # `f<N - 1>(...)`: compile-time recursion, terminated by the compiler
                out.append((index[id(cands[0])], name_tok))
            edges[n] = out
            if f.is_kernel and not f.tparams:
                self.check_threadgroup(f, tg, None, f.tok)
        self.check_recursion(edges)
        self.check_instantiations()

    def walk_body(self, f: _Func, bindings: dict | None, collect: bool):
        """Walk a function body: VLAs, local constants, calls and threadgroup variables.

        Returns ``(calls, threadgroup)`` where calls are ``(name token, argc, template args)``
        and threadgroup entries ``(name token, size or None)``.
        """
        toks = self.toks
        match = self.match
        lo, hi = f.body
        tnames: dict = {}
        for kind, pname, _default in f.tparams or ():
            if pname:
                tnames[pname] = kind
        scopes: list[dict] = [{p: (_RUNTIME, None) for p in f.params}]

        def lookup(name: str) -> tuple:
            for sc in reversed(scopes):
                v = sc.get(name)
                if v is not None:
                    if v[0] == _LAZY:  # a local constant, evaluated when first needed
                        sc[name] = (_UNKNOWN, None)  # guards `const int n = n;`
                        v = self.evaluate(v[1], lookup)
                        if v[0] == _RUNTIME:
                            v = (_RUNTIME, None)
                        sc[name] = v
                    return v
            if bindings is not None and name in bindings:
                b = bindings[name]
                return (b[1], b[2]) if b[0] == "value" else (_UNKNOWN, None)
            if name in tnames:
                return (_UNKNOWN, None)
            return self.global_lookup(name)

        calls: list = []
        tg: list = []
        at_stmt = True
        i = lo
        by_name = self.by_name
        texts = self.texts
        while i < hi:
            x = texts[i]
            if at_stmt:
                at_stmt = False
                if (
                    x not in _NOT_TYPE
                    and (x[0].isalpha() or x[0] == "_")
                    and i + 1 < hi
                    and (texts[i + 1] in _DECL_FOLLOW or texts[i + 1].isidentifier())
                ):
                    d = self.parse_decl(i, hi, program=False, tnames=tnames)
                    if d is not None:
                        self.local_decl(f, d, scopes, lookup, tg, collect, bindings)
            if x in _WALK_MARKS:
                if x == "{":
                    scopes.append({})
                    at_stmt = True
                elif x == "}":
                    if len(scopes) > 1:
                        scopes.pop()
                    at_stmt = True
                elif x == ";":
                    at_stmt = True
                elif i + 1 < hi and texts[i + 1] == "(":  # for (
                    i += 2
                    at_stmt = True
                    continue
            elif collect and x in by_name and i + 1 < hi:
                t = toks[i]
                nx = toks[i + 1].text
                targs = None
                k = i + 1
                if nx == "<" and x in self.templates:
                    c = self.angle_close(i + 1, hi)
                    if c is not None and c + 1 < hi and toks[c + 1].text == "(":
                        targs = toks[i + 2 : c]
                        k = c + 1
                if toks[k].text == "(":
                    prev = toks[i - 1] if i > lo else None
                    skip = False
                    if prev is not None:
                        if prev.text in (".", "->"):
                            skip = True
                        elif prev.text == "::" and i >= 2 and toks[i - 2].text in _QUALIFIED_SKIP:
                            skip = True
                        elif (
                            prev.kind == "id" and prev.text not in _EXPR_KEYWORDS and prev.text not in ("::",)
                        ):
                            skip = True  # `T name(args)` declares a variable
                    if not skip:
                        c = match.get(k, k)
                        parts = self.split_commas(k + 1, c, angles=False)
                        argc = 0 if (len(parts) == 1 and parts[0][0] == parts[0][1]) else len(parts)
                        qual = None
                        if prev is not None and prev.text == "::":
                            q = toks[i - 2] if i - 2 >= lo else None
                            qual = (
                                q.text
                                if q is not None
                                and q.kind == "id"
                                and q.text not in _NOT_TYPE
                                and q.text not in _EXPR_KEYWORDS
                                else ""
                            )
                        calls.append((t, argc, targs, qual))
            i += 1
        return calls, tg

    def local_decl(
        self, f: _Func, d: _Decl, scopes: list, lookup, tg: list, collect: bool, bindings: dict | None
    ) -> None:
        is_const = bool(d.quals & {"const", "constexpr", "constant"})
        for name_tok, indirect, extents, init in d.declarators:
            sizes = []
            vla = None
            for ext in extents:
                if not ext:
                    sizes.append(None)
                    continue
                st, v = self.evaluate(ext, lookup)
                if st == _RUNTIME and vla is None:
                    vla = (ext, v)
                sizes.append(v if st == _CONST else None)
            if vla is not None and collect and not indirect.startswith("("):
                ext, names = vla
                text = self.spelling(ext)
                self.report(
                    name_tok,
                    "vla",
                    f"variable-length array `{name_tok.text}[{text}]`: "
                    f"`{'`, `'.join(dict.fromkeys(names))}` is not a compile-time "
                    "constant; Metal needs constant array sizes (use a fixed maximum, "
                    "a template parameter or a `constant` constant)",
                )
            if "threadgroup" in d.quals and not indirect:
                lay = self.sizeof(d.type_toks, lookup, bindings)
                size = None
                if lay is not None and all(s is not None for s in sizes):
                    size = lay[0]
                    for s in sizes:
                        size *= s
                tg.append((name_tok, size))
            if is_const and not extents and not indirect and init is not None:
                value = (_LAZY, init[1])
            elif is_const:
                value = (_UNKNOWN, None)
            else:
                value = (_RUNTIME, None)
            scopes[-1][name_tok.text] = value

    def check_threadgroup(self, f: _Func, tg: list, host: str | None, at: _Tok) -> None:
        known = [(t, s) for t, s in tg if s is not None]
        total = sum(s for _t, s in known)
        if total <= THREADGROUP_MEMORY_LIMIT:
            return
        what = f"kernel `{f.name}`" + (f' (host_name "{host}")' if host else "")
        parts = ", ".join(f"`{t.text}` {s} B (line {self.linecol(t.pos)[0]})" for t, s in known)
        unknown = len(tg) - len(known)
        extra = f", plus {unknown} of unknown size" if unknown else ""
        self.report(
            at,
            "threadgroup-memory",
            f"{what} declares {total} bytes of threadgroup memory ({parts}{extra}); "
            f"the limit is {THREADGROUP_MEMORY_LIMIT} bytes (32 KiB)",
        )

    def check_instantiations(self) -> None:
        checked: set = set()
        for name_tok, host, args in self.insts:
            cands = [f for f in self.by_name.get(name_tok.text, ()) if f.is_kernel and f.tparams]
            if not cands or args is None:
                continue
            f = cands[0]
            bindings: dict = {}
            ok = True
            for idx, (kind, pname, default) in enumerate(f.tparams):
                arg = args[idx] if idx < len(args) else default
                if pname is None:
                    continue
                if arg is None:
                    ok = False
                    break
                if kind == "type":
                    bindings[pname] = ("type", arg)
                else:

                    def lk(name: str, _b=bindings) -> tuple:
                        b = _b.get(name)
                        if b is not None and b[0] == "value":
                            return (b[1], b[2])
                        return self.global_lookup(name)

                    st, v = self.evaluate(arg, lk)
                    bindings[pname] = ("value", st if st == _CONST else _UNKNOWN, v)
            if not ok:
                continue
            checked.add(id(f))
            tg = self.generic_tg.get(id(f), [])
            if any(size is None for _t, size in tg):
                # sizes depend on template arguments: walk the body again with them bound
                _calls, tg = self.walk_body(f, bindings, collect=False)
            self.check_threadgroup(f, tg, host, name_tok)
        for f in self.funcs:
            if f.is_kernel and f.tparams and id(f) not in checked:
                self.check_threadgroup(f, self.generic_tg.get(id(f), []), None, f.tok)

    def check_recursion(self, edges: dict) -> None:
        """Report each cycle (strongly connected component) of the call graph once."""
        n = len(self.funcs)
        index_of = [-1] * n
        low = [0] * n
        on_stack = [False] * n
        stack: list = []
        counter = [0]
        sccs: list = []
        for root in range(n):
            if index_of[root] != -1:
                continue
            work = [(root, 0)]
            while work:
                v, ei = work.pop()
                if ei == 0:
                    index_of[v] = low[v] = counter[0]
                    counter[0] += 1
                    stack.append(v)
                    on_stack[v] = True
                recurse = False
                out = edges.get(v, [])
                while ei < len(out):
                    w = out[ei][0]
                    ei += 1
                    if index_of[w] == -1:
                        work.append((v, ei))
                        work.append((w, 0))
                        recurse = True
                        break
                    if on_stack[w]:
                        low[v] = min(low[v], index_of[w])
                if recurse:
                    continue
                if low[v] == index_of[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        comp.append(w)
                        if w == v:
                            break
                    sccs.append(comp)
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
        for comp in sccs:
            members = set(comp)
            cyc = [(v, tok) for v in comp for (w, tok) in edges.get(v, []) if w in members]
            if not cyc:
                continue
            v, tok = min(cyc, key=lambda p: p[1].pos)
            names = sorted({self.funcs[c].name for c in comp})
            if len(comp) == 1:
                msg = f"`{names[0]}` calls itself"
            else:
                msg = "functions " + ", ".join(f"`{x}`" for x in names) + " call each other"
            self.report(
                tok,
                "recursion",
                f"recursion: {msg}; Metal functions cannot recurse (no call stack): "
                "rewrite as a loop with a fixed-size explicit stack",
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
