"""The Metal front end shared by the lint and the pre-pass: one tokenizer, one line map, the
MSL vocabulary and the kernel model."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from operator import itemgetter
from typing import NamedTuple

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
    | [0-9](?:[eEpP][+-]|'[\w]|[\w.])*
    | //[^\n]*
    | /\*.*?(?:\*/|\Z)
    | >>=|<<=|\.\.\.|->\*|::|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\#\#|\.\*
    | \.[0-9](?:[eEpP][+-]|'[\w]|[\w.])*
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


def tokenize(source: str, interesting: frozenset):
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
# Line map
# ---------------------------------------------------------------------------------------------
_LINEMARK = re.compile(r'[ \t]*#[ \t]*(?:line[ \t]+)?(\d+)[ \t]+"([^"]*)"')


class LineMap:
    """Source offsets as a compiler reports them: the physical (line, column), and the presumed
    (line, column, file) after ``#line N "file"`` markers (our loader inlines headers with them) or
    clang -E's ``# N "file"``.

    Parameters
    ----------
    source : str
        The text the offsets index.
    default_file : str, optional
        The file name before the first marker (None: unnamed).
    marks : list of (physical line of the marker, N, file), optional
        Markers found by the caller (the lint reads only active directives); default: every
        marker line of ``source``.
    """

    def __init__(self, source: str, default_file: str | None = None, marks: list | None = None) -> None:
        self.source = source
        self.default_file = default_file
        self._starts: list[int] | None = None
        if marks is None:
            marks = []
            for m in re.finditer(r"^[ \t]*#[^\n]*$", source, re.M):
                lm = _LINEMARK.match(m.group())
                if lm:
                    marks.append((source.count("\n", 0, m.start()) + 1, int(lm.group(1)), lm.group(2)))
        self.marks = marks

    def linecol(self, pos: int) -> tuple[int, int]:
        """1-based physical (line, column) of an offset (a tab is one column, as in clang)."""
        if self._starts is None:
            starts = [0]
            find = self.source.find
            k = find("\n")
            while k >= 0:
                starts.append(k + 1)
                k = find("\n", k + 1)
            self._starts = starts
        line = bisect_right(self._starts, pos)
        return line, pos - self._starts[line - 1] + 1

    def presumed(self, pos: int) -> tuple[int, int, str | None]:
        """(line, column, file) of an offset after the markers before it."""
        line, col = self.linecol(pos)
        k = bisect_right(self.marks, (line,)) - 1
        if k < 0:
            return line, col, self.default_file
        at, number, file = self.marks[k]
        return number + (line - at - 1), col, file

    def where(self, pos: int) -> str:
        """``file:line`` of an offset (for messages)."""
        line, _col, file = self.presumed(pos)
        return f"{file or self.default_file}:{line}"


# ---------------------------------------------------------------------------------------------
# MSL vocabulary and the kernel model
# ---------------------------------------------------------------------------------------------
class MetalSourceError(RuntimeError, ValueError):
    """The MSL source uses something the emulator rejects (with file:line)."""


_SCALARS = (
    "float",
    "half",
    "bfloat",
    "int",
    "uint",
    "short",
    "ushort",
    "char",
    "uchar",
    "long",
    "ulong",
    "bool",
)
VECTOR_TYPES = frozenset(f"{s}{n}" for s in _SCALARS for n in (2, 3, 4))

SYNC_NAMES = frozenset(
    {
        "threadgroup_barrier",
        "simdgroup_barrier",
        "simd_sum",
        "simd_product",
        "simd_min",
        "simd_max",
        "simd_and",
        "simd_or",
        "simd_xor",
        "simd_prefix_inclusive_sum",
        "simd_prefix_exclusive_sum",
        "simd_prefix_inclusive_product",
        "simd_prefix_exclusive_product",
        "simd_shuffle",
        "simd_shuffle_down",
        "simd_shuffle_up",
        "simd_shuffle_xor",
        "simd_shuffle_rotate_down",
        "simd_shuffle_rotate_up",
        "simd_broadcast",
        "simd_broadcast_first",
        "simd_ballot",
        "simd_any",
        "simd_all",
        "simdgroup_load",
        "simdgroup_store",
        "simdgroup_multiply",
        "simdgroup_multiply_accumulate",
    }
)

# Metal's thread-position attributes -> field of the runtime's per-thread record
THREAD_ATTRS = {
    "thread_position_in_grid": "tpig",
    "thread_position_in_threadgroup": "tpitg",
    "threadgroup_position_in_grid": "tgpig",
    "threads_per_threadgroup": "tptg",
    "dispatch_threads_per_threadgroup": "dtptg",
    "threadgroups_per_grid": "tgpg",
    "threads_per_grid": "tpg",
    "grid_size": "tpg",
    "grid_origin": "zero",
    "thread_index_in_threadgroup": "tiitg",
    "thread_index_in_simdgroup": "tiisg",
    "simdgroup_index_in_threadgroup": "sgiitg",
    "simdgroups_per_threadgroup": "sgptg",
    "dispatch_simdgroups_per_threadgroup": "dsgptg",
    "threads_per_simdgroup": "tpsg",
    "thread_execution_width": "tpsg",
    "thread_index_in_quadgroup": "tiiqg",
    "quadgroup_index_in_threadgroup": "qgiitg",
    "quadgroups_per_threadgroup": "qgptg",
}
SCALAR_ATTR_FIELDS = {"tiitg", "tiisg", "sgiitg", "sgptg", "dsgptg", "tpsg", "tiiqg", "qgiitg", "qgptg"}

ADDRESS_SPACES = ("device", "constant", "threadgroup", "thread", "threadgroup_imageblock")
_QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", *ADDRESS_SPACES}

@dataclass
class Tok:
    kind: str
    text: str
    start: int
    end: int


@dataclass
class Param:
    """One kernel parameter, as declared (types substituted for template instantiations)."""

    position: int
    type_text: str  # full declared type, without name and attributes
    name: str | None
    attr: str | None  # first attribute name, e.g. "buffer", "thread_position_in_grid"
    attr_args: str = ""
    address_space: str | None = None
    is_pointer: bool = False
    is_reference: bool = False
    is_const: bool = False
    base_type: str = ""  # pointee / referenced / value type without qualifiers
    buffer_index: int | None = None

    @property
    def kind(self) -> str:
        if self.attr in THREAD_ATTRS:
            return "thread_attr"
        if self.attr == "threadgroup" or self.address_space == "threadgroup":
            return "threadgroup"
        if self.buffer_index is not None:
            return "buffer"
        return "other"

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["kind"] = self.kind
        return d


@dataclass
class Kernel:
    """A callable kernel: a non-template kernel, or one ``host_name`` instantiation of a template."""

    name: str  # the name Python sees (host_name or the function name)
    call: str  # C++ expression naming the function, e.g. "ns::lu<float, 16>"
    params: list[Param]
    uses_sync: bool
    max_threads: int | None
    line: str  # "file:line" of the definition

    @classmethod
    def from_dict(cls, d: dict) -> Kernel:
        """The inverse of :meth:`to_dict` (kernel lists stored next to compiled artifacts)."""
        params = []
        for p in d["params"]:
            p = dict(p)
            p.pop("kind", None)
            params.append(Param(**p))
        return cls(d["name"], d["call"], params, d["uses_sync"], d["max_threads"], d["line"])

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "call": self.call,
            "params": [p.to_dict() for p in self.params],
            "uses_sync": self.uses_sync,
            "max_threads": self.max_threads,
            "line": self.line,
        }
