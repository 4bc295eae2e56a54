"""The target-neutral pre-pass: read kernel signatures from MSL and rewrite what C++ spells differently.

Input is the source after ``clang -E`` (our own headers and macros expanded, ``# line`` markers kept
so diagnostics and barrier sites point at the ``.metal`` line). A token pass then

* collects every ``[[...]]`` attribute and blanks it out (columns and lines preserved);
* finds kernels (``kernel``/``[[kernel]]`` functions), their parameters with their attributes
  (``[[buffer(n)]]`` or the implicit buffer order, ``[[thread_position_in_grid]]``, ...) and
  ``template [[host_name("...")]]`` instantiations; ``kernel`` becomes ``static``;
* rewrites kernel-scope ``threadgroup T a[N];`` into a reference to a slot of the per-group arena
  (so it is shared by the group's threads, poisoned at every group start and metered);
* rewrites vector constructors ``float2(a, b)`` (not C++ for clang vectors) and
  ``static_cast<float2>(v)``; rejects C-style casts to vector types (bit casts in clang);
  turns ``1.0h`` literals into ``half`` casts;
* decides per kernel whether it needs fibers: it does when it (or anything it calls, judged by
  name) uses a barrier or a simdgroup collective.

The result is consumed by the target (``_cpu.py`` today, a cuda target later), which generates
the launchers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ._frontend import (
    _QUALIFIERS,
    ADDRESS_SPACES,
    SYNC_NAMES,
    VECTOR_TYPES,
    Kernel,
    LineMap,
    MetalSourceError,
    Param,
    Tok,
    tokenize,
)

__all__ = ["PrepassResult", "prepass"]


@dataclass
class Attr:
    name: str
    args: str  # raw text inside the parentheses ('' when none)
    start: int
    end: int


@dataclass
class PrepassResult:
    source: str  # rewritten C++ (same line structure as the input)
    kernels: list[Kernel] = field(default_factory=list)
    threadgroup_slots: int = 0


# ---------------------------------------------------------------------------------------------
# tokens: the front end's tokenizer, in the pass's records
# ---------------------------------------------------------------------------------------------
_KINDS = {"id": "ident", "num": "number", "str": "string", "chr": "string", "op": "punct"}


def _tokenize(src: str) -> list[Tok]:
    """Code tokens of ``src`` (comments and directives dropped) with ``[[`` as one token."""
    code, _cands, _directives = tokenize(src, frozenset())
    toks: list[Tok] = []
    for t in code:
        end = t.pos + len(t.text)
        if t.text == "[" and toks and toks[-1].text == "[" and toks[-1].end == t.pos:
            toks[-1] = Tok("punct", "[[", toks[-1].start, end)
            continue
        toks.append(Tok(_KINDS[t.kind], t.text, t.pos, end))
    return toks


# ---------------------------------------------------------------------------------------------
# the pass
# ---------------------------------------------------------------------------------------------
class _Pass:
    def __init__(self, src: str, filename: str):
        self.src = src
        self.loc = LineMap(src, filename).where
        all_toks = _tokenize(src)
        self.edits: list[tuple[int, int, str]] = []
        # significant tokens, with [[...]] folded into Attr records attached to the next token index
        self.toks: list[Tok] = []
        self.attrs_before: dict[int, list[Attr]] = {}
        pending: list[Attr] = []
        i = 0
        sig = all_toks
        while i < len(sig):
            t = sig[i]
            if t.text == "[[":
                j = i + 1
                depth = 0
                while j + 1 < len(sig) and not (
                    depth == 0
                    and sig[j].text == "]"
                    and sig[j + 1].text == "]"
                    and sig[j + 1].start == sig[j].end
                ):
                    if sig[j].text in ("(", "["):
                        depth += 1
                    elif sig[j].text in (")", "]"):
                        depth -= 1
                    j += 1
                if j + 1 >= len(sig):
                    raise MetalSourceError(f"{self.loc(t.start)}: unterminated [[ attribute")
                body = src[sig[i].end : sig[j].start]
                j += 1
                for name, args in _split_attrs(body):
                    pending.append(Attr(name, args, t.start, sig[j].end))
                self._blank(t.start, sig[j].end)
                i = j + 1
                continue
            if pending:
                self.attrs_before[len(self.toks)] = pending
                pending = []
            self.toks.append(t)
            i += 1
        if pending:
            self.attrs_before[len(self.toks)] = pending
        self.match = self._match_brackets()
        self.functions: dict[str, set[str]] = {}  # name -> identifiers called in its body
        self.kernel_defs: list[dict] = []
        self.instances: list[dict] = []
        self.slot = 0

    # -- helpers --------------------------------------------------------------------------------
    def _blank(self, start: int, end: int) -> None:
        text = self.src[start:end]
        self.edits.append((start, end, re.sub(r"[^\n]", " ", text)))

    def _match_brackets(self) -> dict[int, int]:
        match: dict[int, int] = {}
        stack: list[int] = []
        pairs = {")": "(", "]": "[", "}": "{"}
        for k, t in enumerate(self.toks):
            if t.text in ("(", "[", "{"):
                stack.append(k)
            elif t.text in pairs:
                if not stack or self.toks[stack[-1]].text != pairs[t.text]:
                    raise MetalSourceError(f"{self.loc(t.start)}: unbalanced '{t.text}'")
                o = stack.pop()
                match[o] = k
                match[k] = o
        if stack:
            raise MetalSourceError(
                f"{self.loc(self.toks[stack[-1]].start)}: unbalanced '{self.toks[stack[-1]].text}'"
            )
        return match

    def text(self, a: int, b: int) -> str:
        """Source text of significant tokens a..b-1 (attributes are already blanked in edits)."""
        return " ".join(t.text for t in self.toks[a:b])

    def err(self, k: int, msg: str) -> MetalSourceError:
        return MetalSourceError(f"{self.loc(self.toks[k].start)}: {msg}")

    # -- scope scan -------------------------------------------------------------------------------
    def run(self) -> None:
        self._scan_scope(0, len(self.toks), [])
        self._expressions()

    def _scan_scope(self, a: int, b: int, ns: list[str]) -> None:
        decl_start = a
        k = a
        while k < b:
            t = self.toks[k]
            if t.text == ";":
                self._declaration(decl_start, k, ns, body=None)
                decl_start = k + 1
            elif t.text == "{":
                end = self.match[k]
                head = self.toks[decl_start:k]
                texts = [h.text for h in head]
                prev = self.toks[k - 1].text if k > a else ""
                is_func = prev == ")" or (
                    prev in ("const", "noexcept", "override", "final")
                    and k - 2 >= a
                    and self.toks[k - 2].text == ")"
                )
                if is_func:
                    self._declaration(decl_start, k, ns, body=(k, end))
                    k = end + 1
                    if k < b and self.toks[k].text == ";":
                        k += 1
                    decl_start = k
                    continue
                if texts[:1] == ["namespace"] or (texts[:2] == ["inline", "namespace"]):
                    name = texts[-1] if len(texts) > 1 and texts[-1] != "namespace" else ""
                    self._scan_scope(k + 1, end, ns + ([name] if name else []))
                    k = end + 1
                    decl_start = k
                    continue
                if any(x in ("struct", "class", "union") for x in texts) and "=" not in texts:
                    self._scan_scope(k + 1, end, ns)  # methods count for the call graph
                    k = end + 1
                    continue  # the declaration continues to the ';' after '}'
                if texts[:2] == ["extern", '"C"'] or texts[:2] == ["extern", '"C++"']:
                    self._scan_scope(k + 1, end, ns)
                    k = end + 1
                    decl_start = k
                    continue
                k = end + 1  # initializer, enum body, ...
                continue
            k += 1

    def _func_name_index(self, a: int, close_paren: int) -> int:
        """Index of the function-name token before the parameter list ending at close_paren."""
        op = self.match[close_paren]
        j = op - 1
        if j >= a and self.toks[j].text == ">":  # explicit template args: foo<float>(...)
            depth = 0
            while j >= a:
                if self.toks[j].text == ">":
                    depth += 1
                elif self.toks[j].text == ">>":
                    depth += 2
                elif self.toks[j].text == "<":
                    depth -= 1
                    if depth == 0:
                        j -= 1
                        break
                j -= 1
        return j

    def _declaration(self, a: int, b: int, ns: list[str], body: tuple[int, int] | None) -> None:
        """A declaration spanning tokens a..b-1 (b is ';' or the body's '{')."""
        if a >= b:
            return
        texts = [t.text for t in self.toks[a:b]]
        attrs = [at for k in range(a, b + 1) for at in self.attrs_before.get(k, [])]
        attr_names = {at.name for at in attrs}
        is_kernel = "kernel" in texts or "kernel" in attr_names
        # find the parameter list: the last top-level (...) in the declaration
        close = None
        for k in range(b - 1, a - 1, -1):
            if self.toks[k].text == ")":
                close = k
                break
        if body is not None and close is not None:
            name_k = self._func_name_index(a, close)
            name = self.toks[name_k].text
            callees = set()
            for k in range(body[0], body[1]):
                t = self.toks[k]
                if t.kind == "ident" and k + 1 < len(self.toks) and self.toks[k + 1].text in ("(", "<"):
                    callees.add(t.text)
            self.functions.setdefault(name, set()).update(callees)
            self._threadgroup_decls(body[0], body[1])
        if not is_kernel:
            return
        if close is None:
            if texts[0] == "template" and (len(texts) < 2 or texts[1] != "<"):
                self._instance(a, b, attrs, ns, None)
                return
            raise self.err(a, "kernel declaration without a parameter list")
        # replace the `kernel` keyword (same width keeps columns)
        for k in range(a, b):
            if self.toks[k].text == "kernel":
                t = self.toks[k]
                self.edits.append((t.start, t.end, "static"))
        if texts[0] == "template" and (len(texts) < 2 or texts[1] != "<"):
            self._instance(a, b, attrs, ns, close)
            return
        if body is None:
            return  # a forward declaration
        tparams: list[tuple[str, str | None]] | None = None
        if texts[0] == "template":
            lt = a + 1
            tparams = _template_params(self.toks[lt + 1 : self._close_angle(lt, b)])
        name_k = self._func_name_index(a, close)
        name = self.toks[name_k].text
        host = next((_unquote(at.args) for at in attrs if at.name == "host_name"), None)
        mt = next((at.args for at in attrs if at.name == "max_total_threads_per_threadgroup"), None)
        params = self._params(self.match[close], close)
        self.kernel_defs.append(
            {
                "name": name,
                "qual": "::".join([*ns, name]),
                "tparams": tparams,
                "params": params,
                "host": host,
                "max_threads": int(mt) if mt and mt.strip().isdigit() else None,
                "line": self.loc(self.toks[name_k].start),
            }
        )

    def _close_angle(self, lt: int, b: int) -> int:
        """Index of the ``>`` (or ``>>``) closing the ``<`` at ``toks[lt]``, searching up to ``b``
        (``b`` if unclosed)."""
        depth, k = 0, lt
        while k < b:
            depth += {"<": 1, ">": -1, ">>": -2}.get(self.toks[k].text, 0)
            if depth <= 0:
                break
            k += 1
        return k

    def _instance(self, a: int, b: int, attrs: list[Attr], ns: list[str], close: int | None) -> None:
        host = next((_unquote(at.args) for at in attrs if at.name == "host_name"), None)
        # name<args>: the last identifier followed by '<' in the declaration
        k_name = None
        for k in range(a, b):
            if (
                self.toks[k].kind == "ident"
                and k + 1 < b
                and self.toks[k + 1].text == "<"
                and self.toks[k].text
                not in (
                    "decltype",
                    "template",
                )
            ):
                k_name = k
        if k_name is None:
            raise self.err(a, "cannot read the kernel name of this template instantiation")
        lt = k_name + 1
        args = _split_top(self.toks[lt + 1 : self._close_angle(lt, b)])
        self.instances.append(
            {
                "name": self.toks[k_name].text,
                "ns": list(ns),
                "args": [" ".join(t.text for t in arg) for arg in args],
                "host": host,
                "line": self.loc(self.toks[a].start),
            }
        )
        # an explicit instantiation of a `static` function is not valid C++: blank it out
        self._blank(self.toks[a].start, self.toks[b].end if b < len(self.toks) else self.toks[b - 1].end)

    def _params(self, op: int, cp: int) -> list[Param]:
        groups = _split_top(self.toks[op + 1 : cp], with_index=op + 1)
        params: list[Param] = []
        for pos, grp in enumerate(groups):
            if not grp:
                continue
            idxs = [k for k, _ in grp]
            toks = [t for _, t in grp]
            if len(toks) == 1 and toks[0].text == "void":
                continue
            attrs = [at for k in range(idxs[0], idxs[-1] + 2) for at in self.attrs_before.get(k, [])]
            # strip array declarator and name
            texts = [t.text for t in toks]
            name = None
            type_toks = texts
            if (
                len(texts) >= 2
                and toks[-1].kind == "ident"
                and any(x not in _QUALIFIERS and x not in ("*", "&") for x in texts[:-1])
                and texts[-2] != "::"
            ):
                name = texts[-1]
                type_toks = texts[:-1]
            p = Param(position=pos, type_text=" ".join(type_toks), name=name, attr=None)
            if attrs:
                p.attr = attrs[0].name
                p.attr_args = attrs[0].args
            _classify(p, type_toks)
            params.append(p)
        return params

    # -- threadgroup variables inside function bodies -------------------------------------------
    def _threadgroup_decls(self, a: int, b: int) -> None:
        k = a + 1
        while k < b:
            t = self.toks[k]
            if t.text == "threadgroup" and self.toks[k - 1].text in ("{", "}", ";"):
                e = k
                while e < b and self.toks[e].text != ";":
                    e += 1
                decl = self.toks[k:e]
                texts = [x.text for x in decl]
                head = texts[: texts.index("[")] if "[" in texts else texts  # dims may hold '*'
                if any(x in ("=", "*", "&", "(", ")", "&&") for x in head) or "=" in texts:
                    k = e
                    continue
                # declarator: NAME [dims]...
                j = len(decl) - 1
                while j > 0 and decl[j].text == "]":
                    j = self.match[k + j] - k - 1
                if j <= 1 or decl[j].kind != "ident":
                    raise self.err(k, "cannot parse this threadgroup declaration")
                name = decl[j].text
                ty = " ".join(texts[1:j])
                dims = "".join(texts[j + 1 :])
                depth = 0
                for x in texts[1:j]:
                    depth += {"<": 1, ">": -1, ">>": -2}.get(x, 0)
                    if x == "," and depth == 0:
                        raise self.err(k, "declare one threadgroup variable per statement")
                slot = self.slot
                self.slot += 1
                if dims:
                    new = (
                        f"threadgroup {ty} (&{name}){dims} = *(threadgroup {ty} (*){dims})"
                        f"mpsle_tg_slot({slot}, sizeof({ty}{dims}), alignof({ty}));"
                    )
                else:
                    new = (
                        f"threadgroup {ty} &{name} = *(threadgroup {ty} *)"
                        f"mpsle_tg_slot({slot}, sizeof({ty}), alignof({ty}));"
                    )
                start, end = t.start, self.toks[e].end
                new += "\n" * self.src.count("\n", start, end)
                self.edits.append((start, end, new))
                k = e
            k += 1

    # -- expression-level rewrites ---------------------------------------------------------------
    def _expressions(self) -> None:
        toks = self.toks
        n = len(toks)
        for k, t in enumerate(toks):
            if t.kind == "number" and re.fullmatch(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[hH]", t.text):
                self.edits.append((t.start, t.end, f"((half){t.text[:-1]}f)"))
                continue
            if t.kind != "ident":
                continue
            if t.text == "static_cast" and k + 3 < n and toks[k + 1].text == "<":
                j = k + 2
                if toks[j].text == "metal" and j + 2 < n and toks[j + 1].text == "::":
                    j += 2
                if toks[j].text in VECTOR_TYPES and toks[j + 1].text == ">":
                    self.edits.append((t.start, t.end, "__mpsle_cvt"))
                continue
            if t.text not in VECTOR_TYPES:
                continue
            nxt = toks[k + 1].text if k + 1 < n else ""
            prv = toks[k - 1].text if k > 0 else ""
            if nxt == "(":
                # declarations `float4 (&m)[4]`, `float4 (*)[4]` are not constructor calls
                if (
                    k + 3 < n
                    and toks[k + 2].text in ("&", "*", "&&")
                    and (
                        toks[k + 3].text == ")"
                        or (toks[k + 3].kind == "ident" and k + 4 < n and toks[k + 4].text == ")")
                    )
                ):
                    continue
                if prv == "::" and k >= 2 and toks[k - 2].text != "metal":
                    continue
                self.edits.append((t.start, t.end, f"__mpsle_vec<{t.text}>"))
            elif nxt == ")" and prv == "(" and k >= 2:
                before = toks[k - 2]
                after = toks[k + 2] if k + 2 < n else None
                call_or_decl = (
                    before.kind == "ident" and before.text not in ("return", "case")
                ) or before.text in (
                    ")",
                    "]",
                    ">",
                )
                if (
                    not call_or_decl
                    and after is not None
                    and (
                        after.kind in ("ident", "number") or after.text in ("(", "-", "+", "!", "~", "*", "&")
                    )
                ):
                    raise self.err(
                        k,
                        f"C-style cast to {t.text}: in Metal this converts element-wise, in clang it "
                        f"reinterprets bits; write {t.text}(x) or static_cast<{t.text}>(x) "
                        f"(or as_type<{t.text}>(x) for a bit cast)",
                    )

    # -- result ----------------------------------------------------------------------------------
    def kernels(self) -> list[Kernel]:
        # sync closure over the (name-based) call graph
        sync = {f for f, callees in self.functions.items() if callees & SYNC_NAMES}
        changed = True
        while changed:
            changed = False
            for f, callees in self.functions.items():
                if f not in sync and callees & sync:
                    sync.add(f)
                    changed = True
        out: list[Kernel] = []
        by_name = {}
        for d in self.kernel_defs:
            by_name.setdefault(d["name"], []).append(d)
            if d["tparams"] is None:
                params = [_copy_param(p, {}) for p in d["params"]]
                _assign_buffers(params, d["name"])
                out.append(
                    Kernel(
                        d["host"] or d["name"],
                        d["qual"],
                        params,
                        d["name"] in sync,
                        d["max_threads"],
                        d["line"],
                    )
                )
        for inst in self.instances:
            defs = [d for d in by_name.get(inst["name"], []) if d["tparams"] is not None]
            if not defs:
                raise MetalSourceError(
                    f"{inst['line']}: instantiation of unknown template kernel {inst['name']!r}"
                )
            d = defs[0]
            tparams = d["tparams"]
            args = list(inst["args"])
            if len(args) > len(tparams):
                raise MetalSourceError(f"{inst['line']}: too many template arguments for {inst['name']}")
            for pname, default in tparams[len(args) :]:
                if default is None:
                    raise MetalSourceError(
                        f"{inst['line']}: missing template argument {pname} for {inst['name']}"
                    )
                args.append(default)
            subst = {p: a for (p, _), a in zip(tparams, args)}
            params = [_copy_param(p, subst) for p in d["params"]]
            _assign_buffers(params, inst["name"])
            if inst["host"] is None:
                continue  # no host name: not reachable from torch either
            call = "::".join([*inst["ns"], inst["name"]]) if inst["ns"] else d["qual"]
            out.append(
                Kernel(
                    inst["host"],
                    f"{call}<{', '.join(args)}>",
                    params,
                    d["name"] in sync,
                    d["max_threads"],
                    d["line"],
                )
            )
        names = [k.name for k in out]
        dup = {x for x in names if names.count(x) > 1}
        if dup:
            raise MetalSourceError(f"duplicate kernel names: {', '.join(sorted(dup))}")
        return out

    def rewritten(self) -> str:
        out = []
        pos = 0
        for start, end, new in sorted(self.edits, key=lambda e: (e[0], -e[1])):
            if start < pos:
                continue  # nested in an edit already applied (e.g. inside a blanked instantiation)
            out.append(self.src[pos:start])
            out.append(new)
            pos = end
        out.append(self.src[pos:])
        return "".join(out)


def _unquote(s: str) -> str:
    """host_name("a" "b") -> 'ab' (adjacent literals concatenate, as after macro expansion)."""
    parts = re.findall(r'"((?:\\.|[^"\\])*)"', s)
    return "".join(parts) if parts else s.strip()


def _split_attrs(body: str) -> list[tuple[str, str]]:
    """'buffer(0), foo' -> [('buffer', '0'), ('foo', '')] (top-level commas only)."""
    out, depth, cur = [], 0, ""
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    res = []
    for item in out:
        item = item.strip()
        if not item:
            continue
        m = re.match(r"([A-Za-z_][\w:]*)\s*(?:\((.*)\))?\s*$", item, re.S)
        if m:
            res.append((m.group(1).split("::")[-1], (m.group(2) or "").strip()))
    return res


def _split_top(toks, with_index: int | None = None):
    """Split tokens at top-level commas (outside (), [], {}, <>)."""
    groups: list = [[]]
    depth = 0
    for k, t in enumerate(toks):
        x = t.text
        if x in ("(", "[", "{", "<"):
            depth += 1
        elif x in (")", "]", "}", ">"):
            depth -= 1
        elif x == ">>":
            depth -= 2
        if x == "," and depth == 0:
            groups.append([])
            continue
        groups[-1].append((with_index + k, t) if with_index is not None else t)
    return [g for g in groups if g] if any(groups) else []


def _template_params(toks) -> list[tuple[str, str | None]]:
    out = []
    for grp in _split_top(toks):
        texts = [t.text for t in grp]
        default = None
        if "=" in texts:
            i = texts.index("=")
            default = " ".join(texts[i + 1 :])
            texts = texts[:i]
        out.append((texts[-1], default))
    return out


def _classify(p: Param, type_toks: list[str]) -> None:
    p.address_space = next((x for x in type_toks if x in ADDRESS_SPACES), None)
    p.is_pointer = "*" in type_toks
    p.is_reference = "&" in type_toks
    p.is_const = "const" in type_toks
    base = [x for x in type_toks if x not in _QUALIFIERS and x not in ("*", "&")]
    text = " ".join(base)
    text = re.sub(r"\bmetal\s*::\s*", "", text)
    p.base_type = text.strip()


def _copy_param(p: Param, subst: dict[str, str]) -> Param:
    q = Param(**{k: v for k, v in p.__dict__.items()})
    if subst:
        q.type_text = _subst(p.type_text, subst)
        q.base_type = _subst(p.base_type, subst)
    return q


def _subst(text: str, subst: dict[str, str]) -> str:
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: subst.get(m.group(), m.group()), text)


def _assign_buffers(params: list[Param], kname: str) -> None:
    """[[buffer(n)]] explicit, else the implicit order (the next unused index)."""
    used = set()
    for p in params:
        if p.attr == "buffer":
            try:
                p.buffer_index = int(p.attr_args, 0)
            except ValueError as exc:
                raise MetalSourceError(
                    f"kernel {kname}: buffer index {p.attr_args!r} is not an integer"
                ) from exc
            if p.buffer_index in used:
                raise MetalSourceError(f"kernel {kname}: two parameters bound to buffer({p.buffer_index})")
            used.add(p.buffer_index)
    nxt = 0
    for p in params:
        if p.attr is None and p.address_space in ("device", "constant"):
            while nxt in used:
                nxt += 1
            p.buffer_index = nxt
            used.add(nxt)


def prepass(src: str, filename: str = "shader.metal") -> PrepassResult:
    """Run the pre-pass on pre-processed MSL ``src``."""
    ps = _Pass(src, filename)
    ps.run()
    kernels = ps.kernels()
    return PrepassResult(ps.rewritten(), kernels, ps.slot)
