"""The lint's tables: Metal types and their layouts, headers, keywords and identifiers each rule
looks for, and the records of functions and declarations."""

from __future__ import annotations

import re

from ._frontend import SYNC_NAMES, _Tok

#: Threadgroup memory available to one threadgroup on Apple GPUs, in bytes.
THREADGROUP_MEMORY_LIMIT = 32 * 1024

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
    "metal_imageblocks",
    "metal_raytracing",
    "metal_graphics",
    "metal_quadgroup",
    "metal_visible_function_table",
}
#: What <metal_simdgroup_matrix> declares (emulated): accepted where that header or <metal_stdlib>
#: (which includes it on Apple's toolchain) is included.
_SIMDGROUP_MATRIX_HEADERS = {"metal_simdgroup_matrix", "metal_stdlib"}
_SIMDGROUP_MATRIX_NAMES = {
    "simdgroup_matrix",
    "simdgroup_float8x8",
    "simdgroup_half8x8",
    "simdgroup_bfloat8x8",
    "simdgroup_load",
    "simdgroup_store",
    "simdgroup_multiply",
    "simdgroup_multiply_accumulate",
    "make_filled_simdgroup_matrix",
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
    | _SIMDGROUP_MATRIX_NAMES
    | set(_UNSUPPORTED_ATTRS)
    | _VECTOR_TYPES
    | {"vec"}
    | SYNC_NAMES
)
_LONG_SUFFIX_RE = re.compile(r"[0-9.][lL]\b")  # cheap pre-filter for the one below
# a decimal floating literal with an L suffix (long double), e.g. 1.0L, .5l, 1e3L
_LONG_DOUBLE_RE = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?[lL]\b")
