"""The lint's preprocessor: includes, macro definitions and their expansion."""

from __future__ import annotations

import re

from ._frontend import _Directive, _Macro, _Tok
from ._lint_tables import (
    _METAL_HEADERS,
    _QUOTED_HEADER_RE,
    _SIMDGROUP_MATRIX_HEADERS,
    _UNSUPPORTED_HEADERS,
)


class _Preprocessor:
    """Mixin of :class:`lint._Linter`: directives and macros."""

    # -- preprocessor ------------------------------------------------------------------------
    def check_directives(self) -> list:
        """Check includes; record macro definitions as (token index, name, macro or None)."""
        events = []
        self.macros_ever: list[_Macro] = []
        # `#line N "file"` markers: (physical line of the marker, N, file)
        self.line_marks: list[tuple[int, int, str | None]] = self.lines.marks
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
            if header in _SIMDGROUP_MATRIX_HEADERS:
                self.matrix_header = True
                return  # (the family loader still allows only <metal_stdlib>, which suffices)
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
