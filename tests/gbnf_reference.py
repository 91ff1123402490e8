"""An independent checker for llama.cpp GBNF grammars: is a string in the language of a grammar's root?

Written from llama.cpp's grammars/README.md and the parser in src/llama-grammar.cpp (llama-cpp-python
0.3.36's vendor/llama.cpp), not from llguidance, whose GBNF support is the engine under test. The steps:

1. ``_tokenize``: the GBNF text as tokens (names, ``::=``, string literals and character classes with their
   escapes decoded, operators, newlines; blanks and ``#`` comments dropped).
2. ``_Parser``: recursive descent from the tokens to an AST of ``Chars`` / ``Literal`` / ``Ref`` / ``Seq`` /
   ``Alt`` / ``Repeat`` nodes per rule (``parse_gbnf``).
3. Two back ends for the same AST, which the tests require to agree:

   * ``_Earley``: a plain Earley recognizer over code points (Aycock and Horspool's handling of empty
     rules), which ``GbnfLanguage.accepts`` uses. Any context-free grammar works, ambiguous or
     left-recursive ones included.
   * ``_LarkEmitter``: the AST as a lark grammar for lark's Earley parser with the dynamic lexer
     (``GbnfLanguage.accepts_lark``). Every terminal matches one code point (a class, ``.``) or one fixed
     string (a literal), so no terminal can match more than one length and the dynamic lexer, which tries
     only the longest match of each terminal, never has to guess. The parse stops at the shared packed
     parse forest (``ambiguity='forest'``): only acceptance is wanted.

   Why both: lark is the library-backed implementation, but it is about ten times slower on these grammars
   (it builds a parse forest and a Token per character): checking 50 strings of about 200 characters for
   each of llama.cpp's 8 grammars takes about 6.5 s with lark, 0.6 s with ``_Earley`` (one AMD EPYC core).
   No llama.cpp grammar is beyond lark, nor too slow for it: the slowest are c.gbnf and arithmetic.gbnf
   (about 25 ms per 200 characters), and a 2 KB string takes lark at most 0.5 s (c.gbnf; ``_Earley``
   under 0.1 s for every grammar).

GBNF semantics, as llama-grammar.cpp has them:

* Terminals are Unicode code points. ``"..."`` is a sequence of code points; ``[...]`` one code point in
  the listed characters and ranges (``a-z``; a ``-`` right before ``]`` is literal), ``[^...]`` one not
  in them; ``.`` any one code point (newline included). Escapes, the same in literals and classes:
  ``\\n \\t \\r \\\\ \\" \\[ \\] \\-`` and ``\\xHH \\uHHHH \\UHHHHHHHH`` (exactly that many hex digits; the value
  is a code point, so ``\\x85`` is U+0085, not a byte); any other escape is an error. Raw characters,
  newlines included, stand for themselves inside literals and classes.
* Rule names are ``[a-zA-Z0-9-]+``. A rule is ``name ::= alternatives`` and ends at a newline, except
  that newlines are blanks after ``::=``, after ``|`` and anywhere inside parentheses. ``#`` starts a
  comment up to the end of the line.
* ``*`` ``+`` ``?`` ``{m}`` ``{m,}`` ``{m,n}`` apply to the item before them (a whole string literal, a
  class, a rule reference or a parenthesised group), and stack: ``a*+`` is ``(a*)+``. A repetition with
  nothing before it is an error. ``m`` above 2000 is an error; ``n`` above 2000 means no upper bound
  (llama.cpp's MAX_REPETITION_THRESHOLD).
* ``root`` is the start rule; a missing root or an undefined rule is an error. A rule defined twice keeps
  its last definition (llama.cpp overwrites it).

Where this checker departs from llama.cpp, on purpose:

* Token references (``<[id]>``, ``<text>``, ``!<...>``) match tokenizer tokens, not characters: a string
  cannot say which tokens produced it, so a grammar with them raises ValueError. (None of llama.cpp's
  grammars/*.gbnf use them.)
* An empty class (``[]``, ``[^]``) raises ValueError: llama.cpp quietly emits nothing for it, so it matches
  the empty string, which is surely not what its writer meant.
* ``{m,n}`` with n < m raises ValueError (llama.cpp's rewrite underflows).
* llama.cpp refuses left-recursive grammars when it builds the sampler, and limits how far nested
  repetitions may multiply out; this checker has neither limit: the language is still well defined.
"""

from __future__ import annotations

import random
import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Optional, Union

from lark import Lark
from lark.exceptions import UnexpectedInput

MAX_CODE_POINT = 0x10FFFF
MAX_REPETITION_THRESHOLD = 2000  # llama-grammar.cpp


# ----------------------------------------------------------------------------------------------- AST


@dataclass(frozen=True)
class Chars:
    """One code point in `ranges`: sorted, disjoint, non-adjacent inclusive (lo, hi) pairs. Negated
    classes and ``.`` are stored as their complement within 0..0x10FFFF."""
    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Literal:
    text: str  # may be empty ("")


@dataclass(frozen=True)
class Ref:
    name: str
    line: int


@dataclass(frozen=True)
class TokenRef:
    text: str  # as written, e.g. "<[1000]>" or "!<think>"
    line: int


@dataclass(frozen=True)
class Seq:
    items: tuple["Node", ...]


@dataclass(frozen=True)
class Alt:
    options: tuple["Node", ...]


@dataclass(frozen=True)
class Repeat:
    item: "Node"
    lo: int
    hi: Optional[int]  # None: no upper bound


Node = Union[Chars, Literal, Ref, TokenRef, Seq, Alt, Repeat]


def normalize_ranges(ranges, negated: bool = False) -> tuple[tuple[int, int], ...]:
    """Sorted, merged ranges clipped to valid code points (an inverted range like z-a matches nothing, as
    in llama.cpp), complemented if `negated`."""
    rs = sorted((lo, min(hi, MAX_CODE_POINT)) for lo, hi in ranges if lo <= hi and lo <= MAX_CODE_POINT)
    merged: list[list[int]] = []
    for lo, hi in rs:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    if negated:
        comp, nxt = [], 0
        for lo, hi in merged:
            if lo > nxt:
                comp.append([nxt, lo - 1])
            nxt = hi + 1
        if nxt <= MAX_CODE_POINT:
            comp.append([nxt, MAX_CODE_POINT])
        merged = comp
    return tuple((lo, hi) for lo, hi in merged)


ANY_CHAR = Chars(((0, MAX_CODE_POINT),))


# ----------------------------------------------------------------------------------------- tokenizer


@dataclass(frozen=True)
class _Tok:
    kind: str  # NAME DEFINE STRING CLASS DOT LPAREN RPAREN BAR STAR PLUS QMARK LBRACE RBRACE COMMA TOKEN NL EOF
    value: object
    line: int  # 1-based line where the token starts
    col: int  # 1-based column


_SIMPLE = {"(": "LPAREN", ")": "RPAREN", "|": "BAR", "*": "STAR", "+": "PLUS", "?": "QMARK", ".": "DOT",
           "{": "LBRACE", "}": "RBRACE", ",": "COMMA"}
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}
_NAME_RE = re.compile(r"[a-zA-Z0-9-]+")
_TOKEN_RE = re.compile(r"!?<(\[[0-9]+\]|[^>]*)>")  # <[id]>, <text>, !<...> (llama.cpp parse_token)


class _Source:
    """The grammar text with a cursor, for error messages that show the line."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.lines = text.split("\n")
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(self, pos: int) -> tuple[int, int]:
        """1-based line and column of `pos`."""
        line = bisect_right(self.line_starts, pos)
        return line, pos - self.line_starts[line - 1] + 1

    def error(self, msg: str, pos: Optional[int] = None, line: Optional[int] = None, col: Optional[int] = None):
        if line is None:
            line, col = self.where(self.pos if pos is None else pos)
        return ValueError(f"GBNF syntax error at line {line}, column {col}: {msg}\n    {self.lines[line - 1].rstrip()}")


def _char(src: _Source) -> int:
    """One character or escape inside a literal or class (llama.cpp parse_char); advances the cursor."""
    t, p = src.text, src.pos
    if p >= len(t):
        raise src.error("unexpected end of input")
    if t[p] != "\\":
        src.pos = p + 1
        return ord(t[p])
    e = t[p + 1] if p + 1 < len(t) else ""
    if e in _SIMPLE_ESCAPES:
        src.pos = p + 2
        return ord(_SIMPLE_ESCAPES[e])
    if e in _HEX_DIGITS:
        n = _HEX_DIGITS[e]
        digits = t[p + 2:p + 2 + n]
        if len(digits) != n or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise src.error(f"expecting {n} hex chars after \\{e}", p)
        src.pos = p + 2 + n
        return int(digits, 16)
    raise src.error(f"unknown escape \\{e}", p)


def _tokenize(src: _Source) -> list[_Tok]:
    t = src.text
    toks: list[_Tok] = []
    while src.pos < len(t):
        p, c = src.pos, t[src.pos]
        line, col = src.where(p)
        if c in " \t":
            src.pos += 1
        elif c == "#":
            while src.pos < len(t) and t[src.pos] not in "\r\n":
                src.pos += 1
        elif c in "\r\n":
            src.pos += 2 if t.startswith("\r\n", p) else 1
            toks.append(_Tok("NL", None, line, col))
        elif t.startswith("::=", p):
            src.pos += 3
            toks.append(_Tok("DEFINE", None, line, col))
        elif c == '"':
            src.pos += 1
            chars = []
            while True:
                if src.pos >= len(t):
                    raise src.error("unterminated string literal", p)
                if t[src.pos] == '"':
                    break
                at = src.pos
                cp = _char(src)
                if cp > MAX_CODE_POINT:
                    raise src.error(f"code point {cp:#x} is beyond U+10FFFF", at)
                chars.append(chr(cp))
            src.pos += 1
            toks.append(_Tok("STRING", "".join(chars), line, col))
        elif c == "[":
            src.pos += 1
            negated = t.startswith("^", src.pos)
            src.pos += negated
            ranges = []
            while True:
                if src.pos >= len(t):
                    raise src.error("unterminated character class", p)
                if t[src.pos] == "]":
                    break
                lo = _char(src)
                hi = lo
                # llama.cpp: '-' starts a range unless the class ends right after it
                if t.startswith("-", src.pos) and src.pos + 1 < len(t) and t[src.pos + 1] != "]":
                    src.pos += 1
                    hi = _char(src)
                ranges.append((lo, hi))
            src.pos += 1
            if not ranges:
                raise src.error("empty character class (llama.cpp would silently match the empty string)", p)
            toks.append(_Tok("CLASS", normalize_ranges(ranges, negated), line, col))
        elif c in "<!":
            m = _TOKEN_RE.match(t, p)
            if not m:
                raise src.error("malformed token reference", p)
            src.pos = m.end()
            toks.append(_Tok("TOKEN", m.group(0), line, col))
        elif c in _SIMPLE:
            src.pos += 1
            toks.append(_Tok(_SIMPLE[c], c, line, col))
        else:
            m = _NAME_RE.match(t, p)
            if not m:
                raise src.error(f"unexpected character {c!r}", p)
            src.pos = m.end()
            toks.append(_Tok("NAME", m.group(0), line, col))
    toks.append(_Tok("EOF", None, *src.where(len(t))))
    return toks


# -------------------------------------------------------------------------------------------- parser


class _Parser:
    """Recursive descent over the tokens, mirroring llama.cpp's parse_rule / parse_alternates /
    parse_sequence. `nested` is true inside parentheses, where newlines are blanks."""

    def __init__(self, src: _Source):
        self.src = src
        self.toks = _tokenize(src)
        self.i = 0

    def peek(self, nested: bool = False) -> _Tok:
        if nested:
            while self.toks[self.i].kind == "NL":
                self.i += 1
        return self.toks[self.i]

    def take(self, nested: bool = False) -> _Tok:
        tok = self.peek(nested)
        self.i += 1
        return tok

    def skip_newlines(self) -> None:
        self.peek(nested=True)

    def error(self, msg: str, tok: _Tok) -> ValueError:
        return self.src.error(msg, line=tok.line, col=tok.col)

    def grammar(self) -> dict[str, Node]:
        rules: dict[str, Node] = {}
        self.skip_newlines()
        while self.peek().kind != "EOF":
            name, body = self.rule()
            rules[name] = body  # a second definition replaces the first, as in llama.cpp
            self.skip_newlines()
        return rules

    def rule(self) -> tuple[str, Node]:
        tok = self.take()
        if tok.kind != "NAME":
            raise self.error("expecting a rule name", tok)
        if self.peek().kind != "DEFINE":
            raise self.error("expecting ::=", self.peek())
        self.take()
        self.skip_newlines()
        body = self.alternates(nested=False)
        end = self.peek()
        if end.kind not in ("NL", "EOF"):
            raise self.error(f"expecting newline or end, found {end.kind.lower()} {end.value!r}", end)
        return tok.value, body

    def alternates(self, nested: bool) -> Node:
        options = [self.sequence(nested)]
        while self.peek(nested).kind == "BAR":
            self.take(nested)
            self.skip_newlines()
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def sequence(self, nested: bool) -> Node:
        items: list[Node] = []
        while True:
            tok = self.peek(nested)
            k = tok.kind
            if k == "STRING":
                items.append(Literal(tok.value))
            elif k == "CLASS":
                items.append(Chars(tok.value))
            elif k == "DOT":
                items.append(ANY_CHAR)
            elif k == "NAME":
                items.append(Ref(tok.value, tok.line))
            elif k == "TOKEN":
                items.append(TokenRef(tok.value, tok.line))
            elif k == "LPAREN":
                self.take()
                self.skip_newlines()
                inner = self.alternates(nested=True)
                close = self.peek(nested=True)
                if close.kind != "RPAREN":
                    raise self.error("expecting ')'", close)
                items.append(inner)
            elif k in ("STAR", "PLUS", "QMARK", "LBRACE"):
                if not items or items[-1] == Literal(""):
                    raise self.error(f"expecting an item before {tok.value!r}", tok)
                self.take(nested)
                if k == "LBRACE":
                    lo, hi = self.braces(nested)
                else:
                    lo, hi = {"STAR": (0, None), "PLUS": (1, None), "QMARK": (0, 1)}[k]
                items[-1] = Repeat(items[-1], lo, hi)
                continue
            else:
                break
            self.take(nested)
        return items[0] if len(items) == 1 else Seq(tuple(items))

    def braces(self, nested: bool) -> tuple[int, Optional[int]]:
        lo_tok = self.take(nested)
        lo = self.integer(lo_tok)
        tok = self.take(nested)
        if tok.kind == "RBRACE":
            hi: Optional[int] = lo
        elif tok.kind == "COMMA":
            hi = None
            if self.peek(nested).kind == "NAME":
                hi = self.integer(self.take(nested))
            close = self.take(nested)
            if close.kind != "RBRACE":
                raise self.error("expecting '}'", close)
        else:
            raise self.error("expecting ',' or '}'", tok)
        if lo > MAX_REPETITION_THRESHOLD:
            raise self.error(f"repetition count {lo} exceeds {MAX_REPETITION_THRESHOLD}", lo_tok)
        if hi is not None and hi > MAX_REPETITION_THRESHOLD:
            hi = None  # llama.cpp: a maximum above the threshold means no maximum
        if hi is not None and hi < lo:
            raise self.error(f"repetition {{{lo},{hi}}} has its maximum below its minimum", lo_tok)
        return lo, hi

    def integer(self, tok: _Tok) -> int:
        if tok.kind != "NAME" or not tok.value.isdigit():
            raise self.error("expecting an integer", tok)
        return int(tok.value)


def parse_gbnf(text: str) -> dict[str, Node]:
    """GBNF text -> {rule name: AST}, in definition order. Raises ValueError on bad syntax or a reference to
    an undefined rule."""
    rules = _Parser(_Source(text)).grammar()
    for node in _walk(list(rules.values())):
        if isinstance(node, Ref) and node.name not in rules:
            raise ValueError(f"GBNF grammar refers to undefined rule {node.name!r} (line {node.line})")
    return rules


def _walk(nodes: list[Node]):
    while nodes:
        node = nodes.pop()
        yield node
        if isinstance(node, Seq):
            nodes.extend(node.items)
        elif isinstance(node, Alt):
            nodes.extend(node.options)
        elif isinstance(node, Repeat):
            nodes.append(node.item)


# ------------------------------------------------------------------------------------ Earley recognizer


class _Earley:
    """The AST as plain BNF, recognized by Earley's algorithm over code points.

    Symbols are ints: a nonterminal is >= 0, terminal k is -(k + 1), and terminal k matches a code point
    inside one of its sorted (lo, hi) ranges. Repetitions are rewritten as llama.cpp rewrites them:
    x{m,n} -> x (m times) x'(n-m) with x'(k) ::= x x'(k-1) | (empty); x{m,} -> x (m times) x*, x* ::= x x* |."""

    def __init__(self, rules: dict[str, Node], start: str):
        self.alts: list[tuple[int, tuple[int, ...]]] = []  # alternative id -> (lhs, symbols)
        self.by_lhs: list[list[int]] = []  # nonterminal -> its alternative ids
        self.terminals: list[tuple[list[int], list[int]]] = []  # terminal k -> (range starts, range ends)
        self._terminal_ids: dict[tuple, int] = {}
        ids = {name: self._nonterminal() for name in rules}
        self._ids = ids
        for name, body in rules.items():
            self._define(ids[name], body)
        self.start = ids[start]
        self.nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, syms in self.alts:
                if lhs not in self.nullable and all(s in self.nullable for s in syms):
                    self.nullable.add(lhs)
                    changed = True

    def _nonterminal(self) -> int:
        self.by_lhs.append([])
        return len(self.by_lhs) - 1

    def _add(self, lhs: int, syms: list[int]) -> None:
        self.by_lhs[lhs].append(len(self.alts))
        self.alts.append((lhs, tuple(syms)))

    def _terminal(self, ranges: tuple[tuple[int, int], ...]) -> int:
        if ranges not in self._terminal_ids:
            self.terminals.append(([lo for lo, _ in ranges], [hi for _, hi in ranges]))
            self._terminal_ids[ranges] = -len(self.terminals)
        return self._terminal_ids[ranges]

    def _symbols(self, node: Node) -> list[int]:
        """`node` as a sequence of symbols (a fresh nonterminal for alternations and repetitions)."""
        if isinstance(node, Chars):
            return [self._terminal(node.ranges)]
        if isinstance(node, Literal):
            return [self._terminal(((ord(c), ord(c)),)) for c in node.text]
        if isinstance(node, Ref):
            return [self._ids[node.name]]
        if isinstance(node, Seq):
            return [sym for item in node.items for sym in self._symbols(item)]
        if isinstance(node, TokenRef):
            raise ValueError(f"GBNF token reference {node.text} (line {node.line}) matches a tokenizer token, "
                             "which a character-level checker cannot see")
        fresh = self._nonterminal()
        self._define(fresh, node)
        return [fresh]

    def _define(self, lhs: int, node: Node) -> None:
        if isinstance(node, Alt):
            for option in node.options:
                self._add(lhs, self._symbols(option))
        elif isinstance(node, Repeat):
            item = self._symbols(node.item)
            tail: list[int] = []
            if node.hi is None:
                star = self._nonterminal()
                self._add(star, [])
                self._add(star, item + [star])
                tail = [star]
            else:
                for _ in range(node.hi - node.lo):
                    opt = self._nonterminal()
                    self._add(opt, [])
                    self._add(opt, item + tail)
                    tail = [opt]
            self._add(lhs, item * node.lo + tail)
        else:
            self._add(lhs, self._symbols(node))

    def accepts(self, text: str, prefix: bool = False) -> bool:
        alts, by_lhs, nullable, terminals = self.alts, self.by_lhs, self.nullable, self.terminals
        # Earley set i: items (alternative, dot, origin); waiting[i]: nonterminal -> items of set i whose dot
        # stands before it, which advance when that nonterminal completes from origin i
        items = {(a, 0, 0) for a in by_lhs[self.start]}
        waiting: list[dict[int, list[tuple[int, int, int]]]] = []
        for i in range(len(text) + 1):
            code = ord(text[i]) if i < len(text) else -1
            agenda = list(items)
            waits: dict[int, list[tuple[int, int, int]]] = {}
            waiting.append(waits)
            scanned: set[tuple[int, int, int]] = set()
            while agenda:
                item = agenda.pop()
                a, dot, origin = item
                lhs, syms = alts[a]
                if dot == len(syms):  # complete
                    if origin == i:
                        continue  # an empty derivation: its waiters advanced when it was predicted
                    for a2, dot2, origin2 in waiting[origin].get(lhs, ()):
                        new = (a2, dot2 + 1, origin2)
                        if new not in items:
                            items.add(new)
                            agenda.append(new)
                    continue
                sym = syms[dot]
                if sym >= 0:  # predict
                    if sym not in waits:
                        waits[sym] = []
                        for a2 in by_lhs[sym]:
                            new = (a2, 0, i)
                            if new not in items:
                                items.add(new)
                                agenda.append(new)
                    waits[sym].append(item)
                    if sym in nullable:  # Aycock-Horspool: step over a nonterminal that can be empty
                        new = (a, dot + 1, origin)
                        if new not in items:
                            items.add(new)
                            agenda.append(new)
                elif code >= 0:  # scan
                    los, his = terminals[-sym - 1]
                    k = bisect_right(los, code) - 1
                    if k >= 0 and code <= his[k]:
                        scanned.add((a, dot + 1, origin))
            if i == len(text):
                if prefix:  # every item is reachable from the start with this prefix scanned
                    return True
                return any(origin == 0 and alts[a][0] == self.start and dot == len(alts[a][1])
                           for a, dot, origin in items)
            if not scanned:
                return False
            items = scanned
        raise AssertionError("unreachable")


# ------------------------------------------------------------------------------------ lark emitter


def _regex_char(cp: int) -> str:
    """One code point as lark regex-literal text. Lark first evaluates the /.../ body as a Python string
    literal (\\U0001f600 becomes the character; a backslash before a punctuation character is kept) and then
    hands it to `re`. So ASCII letters and digits go as they are; other printable ASCII as backslash and
    character, an escaped literal to `re` inside or outside a class (and '/' cannot end lark's /.../);
    everything else as \\U followed by 8 hex digits, which `re` then gets as the raw character (none of those
    is a regex metacharacter)."""
    c = chr(cp)
    if c.isascii() and c.isalnum():
        return c
    if 0x21 <= cp <= 0x7E:
        return "\\" + c
    return f"\\U{cp:08x}"


def _regex_class(ranges: tuple[tuple[int, int], ...]) -> str:
    if not ranges:
        # a class that matches nothing (a negated class of everything); still one character wide
        return "[^\\U00000000-\\U0010ffff]"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _regex_char(ranges[0][0])
    parts = []
    for lo, hi in ranges:
        parts.append(_regex_char(lo) if lo == hi else f"{_regex_char(lo)}-{_regex_char(hi)}")
    return "[" + "".join(parts) + "]"


class _LarkEmitter:
    def __init__(self, rules: dict[str, Node]):
        self.rules = rules
        self.rule_ids = {name: f"r{i}" for i, name in enumerate(rules)}
        self.terminals: dict[str, str] = {}  # regex -> terminal name
        self.helpers: dict[str, str] = {}  # expansion -> helper rule name

    def helper(self, expansion: str) -> str:
        """A rule of its own for `expansion` (shared between identical ones)."""
        if expansion not in self.helpers:
            self.helpers[expansion] = f"h{len(self.helpers)}"
        return self.helpers[expansion]

    def terminal(self, regex: str) -> str:
        if regex not in self.terminals:
            self.terminals[regex] = f"T{len(self.terminals)}"
        return self.terminals[regex]

    def expr(self, node: Node) -> str:
        """`node` as a lark expansion; '' is the empty sequence."""
        if isinstance(node, Chars):
            return self.terminal(_regex_class(node.ranges))
        if isinstance(node, Literal):
            return self.terminal("".join(_regex_char(ord(c)) for c in node.text)) if node.text else ""
        if isinstance(node, Ref):
            return self.rule_ids[node.name]
        if isinstance(node, Seq):
            return " ".join(e for e in (self.expr(i) for i in node.items) if e)
        if isinstance(node, Alt):
            return "(" + " | ".join(self.expr(o) for o in node.options) + ")"
        if isinstance(node, Repeat):
            inner = self.expr(node.item)
            if not inner:
                return ""
            inner = f"({inner})"
            lo, hi = node.lo, node.hi
            if hi is None:
                return {0: f"{inner}*", 1: f"{inner}+"}.get(lo, " ".join([inner] * lo) + f" {inner}*")
            if (lo, hi) == (0, 1):
                return f"{inner}?"
            # x{lo,hi} = x (lo times) then x'(hi-lo), x'(k) ::= (x x'(k-1))? -- llama.cpp's own rewrite: linear
            # in hi, where lark's `x ~ lo..hi` lists every length as an alternative (slow to build and parse)
            tail = ""
            for k in range(hi - lo):
                tail = self.helper(f"({inner} {tail})?" if tail else f"{inner}?")
            return " ".join([inner] * lo + ([tail] if tail else []))
        raise TypeError(node)

    def grammar(self) -> str:
        lines = []
        for name, body in self.rules.items():
            lines.append(f"// {name}")
            lines.append(f"{self.rule_ids[name]}: {self.expr(body)}")
        for expansion, helper in self.helpers.items():
            lines.append(f"{helper}: {expansion}")
        for regex, term in self.terminals.items():
            lines.append(f"{term}: /{regex}/")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- language


class GbnfLanguage:
    """The language of a GBNF grammar's start rule (``root`` unless told otherwise).

    >>> GbnfLanguage('root ::= "a"+ [0-9]?').accepts("aa7")
    True
    """

    def __init__(self, text: str, start: str = "root"):
        self.rules = parse_gbnf(text)
        if start not in self.rules:
            raise ValueError(f"GBNF grammar has no {start!r} rule (rules: {', '.join(self.rules) or 'none'})")
        self.start = start
        self._earley = _Earley(self.rules, start)
        self._lark: Optional[Lark] = None

    def accepts(self, text: str) -> bool:
        """Whether the whole of `text` (code points) derives from the start rule."""
        return self._earley.accepts(text)

    @property
    def lark_grammar(self) -> str:
        return _LarkEmitter(self.rules).grammar()

    def accepts_prefix(self, text: str) -> bool:
        """Whether `text` begins some string of the language (every rule of the grammar derives a
        finite string, as in llama.cpp's files, so any text the recognizer can scan to its end is one)."""
        return self._earley.accepts(text, prefix=True)

    def accepts_lark(self, text: str) -> bool:
        """The same verdict as `accepts`, from lark's Earley parser (about ten times slower)."""
        if self._lark is None:
            emitter = _LarkEmitter(self.rules)
            self._lark = Lark(emitter.grammar(), start=emitter.rule_ids[self.start], parser="earley",
                              lexer="dynamic", ambiguity="forest")
        try:
            self._lark.parse(text)
        except UnexpectedInput:
            return False
        return True

    def sample(self, rng: random.Random, length: int = 200) -> str:
        """A random string of the language, roughly `length` code points long or less (test data: every sample
        must be accepted). Below `length` the derivation chooses freely; past it, every choice takes the
        shortest way out (fewest nested rule expansions), so it always ends."""
        return _Sampler(self.rules, rng, length).run(self.start)


# ----------------------------------------------------------------------------------------- sampler


class _Sampler:
    def __init__(self, rules: dict[str, Node], rng: random.Random, length: int):
        self.rules, self.rng, self.length = rules, rng, length
        self.out: list[str] = []
        self.size = 0
        self.depth = 0  # nested rule references: a guard for rules that recurse without emitting anything
        # height[rule]: fewest nested rule expansions that finish it (a fixpoint; inf for rules that never end)
        self.height = {name: float("inf") for name in rules}
        changed = True
        while changed:
            changed = False
            for name, body in rules.items():
                h = 1 + self._height(body)
                if h < self.height[name]:
                    self.height[name], changed = h, True

    def _height(self, node: Node) -> float:
        if isinstance(node, (Chars, Literal)):
            return 0 if not isinstance(node, Chars) or node.ranges else float("inf")
        if isinstance(node, Ref):
            return self.height[node.name]
        if isinstance(node, Seq):
            return max((self._height(i) for i in node.items), default=0)
        if isinstance(node, Alt):
            return min(self._height(o) for o in node.options)
        if isinstance(node, Repeat):
            return 0 if node.lo == 0 else self._height(node.item)
        raise ValueError(f"cannot sample {node}")

    def run(self, start: str) -> str:
        if self.height[start] == float("inf"):
            raise ValueError(f"no string derives from {start!r}")
        self.emit(self.rules[start])
        return "".join(self.out)

    def char(self, ranges) -> str:
        # ranges often end in a huge block (a negated class): favour the small ones, skip surrogates
        while True:
            lo, hi = self.rng.choice(ranges)
            if hi - lo > 0x7F and self.rng.random() < 0.7:
                hi = min(hi, lo + 0x7F)
            cp = self.rng.randint(lo, hi)
            if not 0xD800 <= cp <= 0xDFFF:
                return chr(cp)

    def emit(self, node: Node) -> None:
        free = self.size < self.length and self.depth < 100
        if isinstance(node, Chars):
            self.out.append(self.char(node.ranges))
            self.size += 1
        elif isinstance(node, Literal):
            self.out.append(node.text)
            self.size += len(node.text)
        elif isinstance(node, Ref):
            self.depth += 1
            self.emit(self.rules[node.name])
            self.depth -= 1
        elif isinstance(node, Seq):
            for item in node.items:
                self.emit(item)
        elif isinstance(node, Alt):
            finite = [o for o in node.options if self._height(o) < float("inf")]
            if free:
                self.emit(self.rng.choice(finite))
            else:
                self.emit(min(finite, key=self._height))
        elif isinstance(node, Repeat):
            n = node.lo
            while free and (node.hi is None or n < node.hi) and self.rng.random() < 0.9:
                n += 1
            for _ in range(n):
                self.emit(node.item)
        else:
            raise ValueError(f"cannot sample {node}")
