"""The lint's structure pass: brackets, scopes, structs, enums, typedefs and declarations."""

from __future__ import annotations

from ._frontend import _Tok
from ._lint_eval import _CONST, _UNKNOWN
from ._lint_tables import _DECL_QUALS, _MULTIWORD_TYPE, _NOT_TYPE, _Decl


class _Structure:
    """Mixin of :class:`lint._Linter`: program structure and declarations."""

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
