"""The lint's function pass: signatures, instantiations, constant evaluation, bodies (VLAs,
threadgroup memory, call graph and recursion)."""

from __future__ import annotations

from ._frontend import ADDRESS_SPACES, _Tok
from ._lint_eval import _CONST, _LAZY, _RUNTIME, _UNKNOWN, _Evaluator, _NotConstant
from ._lint_tables import (
    _DECL_FOLLOW,
    _DECL_QUALS,
    _EXPR_KEYWORDS,
    _MULTIWORD_TYPE,
    _NOT_TYPE,
    _QUALIFIED_SKIP,
    _WALK_MARKS,
    THREADGROUP_MEMORY_LIMIT,
    _Decl,
    _Func,
    _qualified_tokens,
)


class _Functions:
    """Mixin of :class:`lint._Linter`: functions and their bodies."""

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
            self.check_param_address_space(f, lo, stop)
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

    def check_param_address_space(self, f: _Func, lo: int, hi: int) -> None:
        """A pointer or reference parameter needs an address space (device, constant, threadgroup,
        thread): Apple's compiler rejects one without, and clang would read it as ``thread``.
        Parameters typed by a template parameter (which may carry the address space) are left
        alone."""
        toks = self.toks
        indirect = None
        words = []
        j = lo
        while j < hi:
            t = toks[j]
            if t.text == "[" and j + 1 < hi and toks[j + 1].text == "[":  # an attribute
                j = self.match.get(j, hi) + 1
                continue
            if t.text == "<":
                c2 = self.angle_close(j, hi)
                j = (c2 if c2 is not None else j) + 1
                continue
            if t.text in ("*", "&", "&&") and indirect is None:
                indirect = t
            elif t.kind == "id":
                words.append(t.text)
            j += 1
        if indirect is None or any(w in ADDRESS_SPACES for w in words):
            return
        tparams = {tp[1] for tp in f.tparams or ()}
        type_words = [w for w in words if w not in _DECL_QUALS]
        if not type_words or type_words[0] in tparams or type_words[0] == "auto":
            return
        self.report(
            indirect,
            "address-space",
            f"parameter `{self.spelling(toks[lo:hi])}` of `{f.name}` is a pointer or reference without an "
            "address space: Metal requires device, constant, threadgroup or thread",
        )

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
