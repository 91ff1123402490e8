"""The independent GBNF checker (tests/gbnf_reference.py) against llama.cpp's grammars/*.gbnf, against oracles
that share nothing with it (json.loads; regular expressions written by hand from reading the grammars), and
feature by feature against the GBNF definition (llama.cpp's grammars/README.md and llama-grammar.cpp,
including cases ported from llama.cpp's tests/test-grammar-integration.cpp and test-grammar-parser.cpp).
Wherever a verdict is checked, both back ends give it: the checker's own Earley recognizer (`accepts`) and
lark's Earley parser (`accepts_lark`).

Structured-output tests (issue 34) use GbnfLanguage to confirm that what the engine generates under a GBNF
grammar is in that grammar's language, so this file is what makes that confirmation worth anything.
"""
from __future__ import annotations

import functools
import json
import random
import re
import string
import time

import pytest

from gbnf_reference import GbnfLanguage, parse_gbnf
from paths import LLAMA_CPP_GRAMMARS, llama_cpp_grammars


@functools.lru_cache(maxsize=None)
def grammar_text(name: str) -> str:
    return (llama_cpp_grammars() / f"{name}.gbnf").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def language(name: str) -> GbnfLanguage:
    return GbnfLanguage(grammar_text(name))


def test_grammar_folder_is_the_expected_one():
    """A grammar added to llama.cpp's folder needs hand-written cases below; a missing one is an error."""
    found = sorted(p.stem for p in llama_cpp_grammars().glob("*.gbnf"))
    assert found == sorted(LLAMA_CPP_GRAMMARS)
    assert sorted(CASES) == sorted(LLAMA_CPP_GRAMMARS)


# ---------------------------------------------------------------------------------- llama.cpp grammars

# For each grammar: strings it must accept, strings it must reject, chosen by reading the grammar. Comments say
# which rule a case exercises where that is not obvious.
CASES: dict[str, tuple[list[str], list[str]]] = {
    # root ::= (expr "=" ws term "\n")+ ; ident and num swallow trailing [ \t\n]*
    "arithmetic": (
        ["1+2=3\n",
         "x = 42\n",
         "(a+b)*c = d_1\n",
         "1=1\n2*3=6\n( ( 1 ) )/x9=y\n",
         "1=1\n\n",                 # the num's ws may swallow the first newline
         "a\t-b\n=c\n"],            # ws includes tabs and newlines, inside an equation too
        ["",
         "1=1",                     # the final newline is required
         " 1=1\n",                  # a term cannot start with a blank
         "A=1\n",                   # identifiers are lowercase
         "x=-1\n",                  # no unary minus
         "a-\nb=c\n",               # no blank after an operator (only terms end in ws)
         "1+=2\n",
         "(1=1\n",
         "1=1\r\n",                 # \r is not whitespace here
         "1²=1\n"]),                # a Unicode digit is not [0-9]
    # declarations only, no whitespace between statements; ws ::= [ \t\n]+ after types
    "c": (
        ["",
         "int main(){}",
         "int main(){return 0;}",
         "int f(int x){x = x+1;return x;}",
         "float g(){if(a<b){x = 1;}else{}while(i!=0){i = i-1;}}",
         "char h(){for(i = 0; i<n; i = i+1){f (i, -2);}}",  # a call statement needs ws before "("
         "int k(){/* note * here */// line\n}",
         "int a(){}int\nb(){}"],
        ["int main() {}",           # nothing may come between ")" and "{"
         "intmain(){}",             # a type needs whitespace after it
         "int x = 1;",              # top level holds declarations only
         "int main(){return 0}",    # missing ";"
         "int m(){f(x);}",          # ... and this one has none (a call inside an expression needs none)
         "int main(){/* x **/}",    # the comment rule cannot end with "**/" ("*" [^/] eats the second star)
         "int café(){}",            # identifiers are ASCII
         "int main(){}\n",          # no whitespace after a declaration
         "double d(){}"]),
    "chess": (
        ["1. e4 e5\n2. Nf3 Nc6\n",
         "1. d4 d5\n2. c4 dxc4\n3. e4 O-O-O+\n",
         "1. e4 e5\n10. exd8=Q# Kxd8\n99. Rh1xh8 O-O\n",
         "1. Nbd2 R1e2+\n2. a1=N b8=B#\n"],
        ["",
         "1. e4 e5\n",              # at least one more numbered line
         "1. e4 e5\n2. Nf3 Nc6",    # each line ends with a newline
         "1. e9 e5\n2. Nf3 Nc6\n",  # ranks 1-8
         "1. e4 e5\n0. Nf3 Nc6\n",  # move numbers do not start with 0
         "1. e4 e5\n100. a3 a6\n",  # one or two digits
         "1. e4  e5\n2. a3 a6\n",   # one space
         "2. e4 e5\n3. a3 a6\n",    # the first line is "1. "
         "1. e4 e5\n2. Pe4 a6\n"]), # no P for pawns
    # root ::= en-char+ ([ \t\n] en-char+)* with ASCII letters, digits and punctuation
    "english": (
        ["Hello, world!",
         "a\tb\nc",
         string.punctuation,        # every ASCII punctuation character, including [ \ ] ^ - " and #
         "x",
         "C3PO's 2nd-best day (ever)."],
        ["",
         " leading",
         "trailing ",
         "double  space",
         "café",                    # ASCII only
         "a\r\nb",                  # \r is not a separator
         "a\u00a0b"]),              # a no-break space is not [ \t\n]
    # hiragana U+3041-309F, katakana U+30A1-30FF, punctuation U+3001-303E, CJK U+4E00-9FFF
    "japanese": (
        ["こんにちは",
         "日本語 カタカナ",
         "東京、大阪。",
         "ぁゟァヿ、〾一鿿",          # the ends of each range
         "ひらがな\tカタカナ\n漢字"],
        ["",
         "hello",
         "こんにちは!",              # ASCII "!" is not Japanese punctuation
         "゠",                      # U+30A0 lies between the hiragana and katakana ranges
         "\u3000",                  # the ideographic space is below U+3001
         "！",                      # full-width "!" (U+FF01)
         "𠀀",                      # U+20000, CJK extension B, outside [一-鿿]
         "日本 "]),
    "json": (
        ["{}",
         '{"a": 1}',
         '{"a":[1,2.5,-3e1,true,null,false],"b":{"c":"\\u00e9\\n"}}',
         '{\n  "a": 1,\n  "b": [\n    {}\n  ]\n}',
         '{"k": "日本🙂"} ',         # raw non-ASCII; one trailing blank
         '{"": -0.0}\n\t',
         '{"e": 1E+5, "f": 1e01}'],
        ["",
         "[]",                      # root is an object
         '{"a":1,}',
         "{'a':1}",
         '{"a": 01}',
         '{"a": "\x01"}',           # a raw control character
         " {}",
         '{"a": tru}',
         '{"a": 1}}']),
    "json_arr": (
        ["[\n]",
         "[\n1,\n2\n]",
         '[\n{"a": 1},\n{"b": [true, "x"]}\n]',
         '[\n "é",\n 1e10\n]',
         "[\n[]]"],
        ["",
         "[]",                      # the root array opens with "[\n"
         "[\n1, 2\n]",              # root items are separated by ",\n"
         "[\n1\n]\n",               # nothing after the root "]"
         "{}",
         "[\n1e0\n]",               # json_arr's exponent starts with [1-9]
         "[\n1,\n]"]),
    # root ::= item+ ; item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
    "list": (
        ["- a\n",
         "- milk\n- eggs 🥚\n",
         "- \t tab, [brackets] and \"quotes\"\n",
         "- -\n- - \n"],
        ["",
         "- a",
         "-a\n",
         "- \n",                    # an item needs at least one character
         "- a\u2028b\n",            # line separator
         "- a\x85\n",               # NEL
         "- a\r\n",
         "- a\n\n",
         "* a\n"]),
}


@pytest.mark.parametrize("name", LLAMA_CPP_GRAMMARS)
def test_llama_cpp_grammar(name):
    accept, reject = CASES[name]
    assert len(accept) >= 3 and len(reject) >= 3
    lang = language(name)
    assert "root" in lang.rules
    wrong = _wrong_verdicts(lang, accept, reject)
    assert not wrong, f"{name}.gbnf: wrong verdict for {wrong}"


def _wrong_verdicts(lang: GbnfLanguage, accept: list[str], reject: list[str]) -> list[tuple[str, str]]:
    """(string, back end) for each verdict of either back end that differs from the expected one."""
    wrong = []
    for back_end in (lang.accepts, lang.accepts_lark):
        wrong += [(s, back_end.__name__) for s in accept if not back_end(s)]
        wrong += [(s, back_end.__name__) for s in reject if back_end(s)]
    return wrong


@pytest.mark.parametrize("name", LLAMA_CPP_GRAMMARS)
def test_back_ends_agree(name):
    """The checker's Earley recognizer and lark's Earley parser give the same verdict on random strings of
    each language and on edits of them."""
    lang = language(name)
    rng = random.Random(f"agree-{name}")
    strings = []
    for _ in range(10):
        s = lang.sample(rng, 80)
        strings += [s] + _mutations(rng, s, _POOL, 6)
    differ = [(s, ours) for s in strings if (ours := lang.accepts(s)) != lang.accepts_lark(s)]
    assert not differ, f"{name}: (string, accepts) where accepts_lark differs: {differ[:5]}"


def _mutations(rng: random.Random, s: str, pool: str, n: int) -> list[str]:
    """`n` small edits of `s`: a deletion, an insertion or a replacement from `pool`, a truncation or a repeated
    slice; most leave the language, some do not."""
    out = []
    for _ in range(n):
        m = list(s)
        k = rng.randrange(len(m) + 1)
        op = rng.randrange(5)
        if op == 0 and m:
            del m[min(k, len(m) - 1)]
        elif op == 1:
            m.insert(k, rng.choice(pool))
        elif op == 2 and m:
            m[min(k, len(m) - 1)] = rng.choice(pool)
        elif op == 3:
            m = m[:k]
        else:
            j = rng.randrange(len(m) + 1)
            m[k:k] = m[min(j, k):max(j, k)]
        out.append("".join(m))
    return out


# ------------------------------------------------------------------------ oracle: regular expressions

def _arithmetic_regex(depth: int) -> str:
    """arithmetic.gbnf with parentheses nested at most `depth` deep (the language is not regular)."""
    ws, ident, num = r"[ \t\n]*", r"[a-z][a-z0-9_]*[ \t\n]*", r"[0-9]+[ \t\n]*"

    def term(d):
        return rf"(?:{ident}|{num})" if d == 0 else rf"(?:{ident}|{num}|\({ws}{expr(d - 1)}\){ws})"

    def expr(d):
        return rf"{term(d)}(?:[-+*/]{term(d)})*"

    return rf"(?:{expr(depth)}={ws}{term(depth)}\n)+"


_MOVE = r"(?:(?:[a-h]x)?[a-h][1-8](?:=[NBKQR])?|[NBKQR][a-h]?[1-8]?x?[a-h][1-8]|O-O(?:-O)?)[+#]?"
_EN = "[A-Za-z0-9" + "".join("\\" + c for c in string.punctuation) + "]"
_JP = "[\u3041-\u309f\u30a1-\u30ff\u3001-\u303e\u4e00-\u9fff]"
ARITHMETIC_DEPTH = 4
REGEX_ORACLES = {
    "arithmetic": _arithmetic_regex(ARITHMETIC_DEPTH),
    "chess": rf"1\. {_MOVE} {_MOVE}\n(?:[1-9][0-9]?\. {_MOVE} {_MOVE}\n)+",
    "english": rf"{_EN}+(?:[ \t\n]{_EN}+)*",
    "japanese": rf"{_JP}+(?:[ \t\n]{_JP}+)*",
    "list": "(?:- [^\r\n\x0b\x0c\x85\u2028\u2029]+\n)+",
}
_POOL = " \t\n\r-0a1Z.()+=/*_#\"\\[]^{}xéあァ、日😀\x85\u2028\u30a0"


def _paren_depth(s: str) -> int:
    d = m = 0
    for c in s:
        d += (c == "(") - (c == ")")
        m = max(m, d)
    return m


@pytest.mark.parametrize("name", sorted(REGEX_ORACLES))
def test_regular_grammars_agree_with_hand_written_regex(name):
    """Random strings of the language and edits of them: the checker and a regular expression written
    from the grammar by hand must give the same verdict on every one."""
    lang, oracle = language(name), re.compile(REGEX_ORACLES[name])
    rng = random.Random(f"regex-{name}")
    strings = []
    for _ in range(15):
        s = lang.sample(rng, 80)
        strings += [s] + _mutations(rng, s, _POOL, 8)
    if name == "arithmetic":
        strings = [s for s in strings if _paren_depth(s) <= ARITHMETIC_DEPTH]
    verdicts = [(s, lang.accepts(s), oracle.fullmatch(s) is not None) for s in strings]
    wrong = [(s, ours) for s, ours, theirs in verdicts if ours != theirs]
    assert not wrong, f"{name}: checker disagrees with the regex on (string, checker verdict) {wrong[:5]}"
    accepted = sum(ours for _, ours, _ in verdicts)
    assert 15 <= accepted < len(verdicts), "the edits should leave the language at times"


# ------------------------------------------------------------------------------ oracle: json.loads

def _json_loads_ok(s: str) -> bool:
    try:
        json.loads(s)
    except ValueError:
        return False
    return True


# JSON that json.loads takes and the grammars reject: the grammars are stricter than JSON here, on purpose
# (bounded whitespace and number sizes keep the model from running on). The checker must reject them too.
JSON_GBNF_STRICTER = [
    ("[1, 2]", "root is an object"),
    (' {"a": 1}', "no whitespace before the root"),
    ('{"a": 1}  ', "ws is at most one blank, or a newline and up to 20 blanks/tabs"),
    ('{"a":  1}', "two blanks"),
    ('{"a":\r\n1}', "\\r is not in ws"),
    ('{\n' + " " * 21 + '"a": 1}', "indentation deeper than 20"),
    ('{"a": 1e10}', "exponent: [0-9] then only [1-9] digits, so no 0 after its first digit"),
    ('{"a": 12345678901234567}', "integer part: at most 16 digits"),
    ('{"a": "\\/"}', "the \\/ escape is not in the grammar"),
    ('{"a": "\x7f"}', "raw DEL is excluded from strings"),
]
JSON_ARR_GBNF_STRICTER = [
    ("[1, 2]", 'the root array opens with "[\\n"'),
    ("[\n1, 2\n]", 'root items are separated by ",\\n"'),
    ("[\n1\n] ", "nothing after the root array"),
    ('{"a": 1}', "root is an array"),
    ("[\n1e0\n]", "exponent: [1-9] then [0-9]{0,15}"),
    ("[\n1e05\n]", "exponent: [1-9] then [0-9]{0,15}"),
    ('[\n"\\/"\n]', "the \\/ escape is not in the grammar"),
]


@pytest.mark.parametrize("name,cases", [("json", JSON_GBNF_STRICTER), ("json_arr", JSON_ARR_GBNF_STRICTER)])
def test_json_grammars_are_stricter_than_json_here(name, cases):
    lang = language(name)
    for s, why in cases:
        assert _json_loads_ok(s), s
        assert not lang.accepts(s), f"{name}.gbnf should reject {s!r} ({why})"


def _random_json_value(rng: random.Random, depth: int):
    kind = rng.randrange(8 if depth > 0 else 6)
    if kind == 0:
        return rng.choice([True, False, None])
    if kind == 1:
        return rng.randint(-10 ** 15, 10 ** 15)  # at most 16 digits
    if kind == 2:  # repr without an exponent: 1e-4 <= |x| < 1e16
        return round(rng.uniform(-1e6, 1e6), rng.randrange(1, 6)) or 0.5
    if kind in (3, 4, 5):
        return _random_json_string(rng)
    if kind == 6:
        return [_random_json_value(rng, depth - 1) for _ in range(rng.randrange(4))]
    return {_random_json_string(rng): _random_json_value(rng, depth - 1) for _ in range(rng.randrange(4))}


def _random_json_string(rng: random.Random) -> str:
    # every control character (json.dumps escapes them), quotes, backslashes, slashes, non-ASCII; no DEL (which
    # json.dumps leaves raw and json.gbnf excludes: see JSON_GBNF_STRICTER)
    pool = "".join(map(chr, range(0x20))) + 'ab "\\/é€日😀\u2028'
    return "".join(rng.choice(pool) for _ in range(rng.randrange(6)))


def _json_documents(rng: random.Random, n: int, root_type: type) -> list[str]:
    """json.dumps output in the layouts the grammars allow: compact, ", "/": " separators, or indented (2 for
    json.gbnf; 1 for json_arr.gbnf, whose root items may only be indented by one blank), with and without
    ensure_ascii."""
    docs = []
    while len(docs) < n:
        v = _random_json_value(rng, 3)
        if not isinstance(v, root_type) or (root_type is list and not v):
            continue
        ascii_ = rng.random() < 0.5
        if root_type is list:
            docs.append(json.dumps(v, indent=1, ensure_ascii=ascii_))
        else:
            layout = rng.randrange(3)
            kw = [{"separators": (",", ":")}, {}, {"indent": 2}][layout]
            docs.append(json.dumps(v, ensure_ascii=ascii_, **kw))
    return docs


@pytest.mark.parametrize("name,root_type", [("json", dict), ("json_arr", list)])
def test_json_grammars_accept_json_dumps_output(name, root_type):
    """Completeness against json.dumps: JSON laid out within the grammar's limits must be accepted."""
    lang = language(name)
    docs = _json_documents(random.Random(f"dumps-{name}"), 40, root_type)
    rejected = [d for d in docs if not lang.accepts(d)]
    assert not rejected, f"{name}.gbnf rejected valid JSON within its limits: {rejected[:3]}"


@pytest.mark.parametrize("name", ["json", "json_arr"])
def test_what_json_grammars_accept_is_json(name):
    """Soundness against json.loads: every string the checker accepts (random strings of the language and
    edits of them and of json.dumps output) is JSON."""
    lang = language(name)
    rng = random.Random(f"loads-{name}")
    strings = []
    seeds = [lang.sample(rng, 100) for _ in range(10)] + _json_documents(rng, 10, dict if name == "json" else list)
    for s in seeds:
        strings += [s] + _mutations(rng, s, ' \t\n\r,:[]{}"\\0123456789.eE+-abtrufnl\x7f\x01é😀', 8)
    accepted = [s for s in strings if lang.accepts(s)]
    not_json = [s for s in accepted if not _json_loads_ok(s)]
    assert not not_json, f"{name}.gbnf accepted strings json.loads rejects: {not_json[:3]}"
    assert len(seeds) <= len(accepted) < len(strings)


# ------------------------------------------------------------------------------------------- speed

def test_checking_fifty_outputs_per_grammar_is_fast():
    """Every random string of each language is accepted, and checking 50 strings of 150-250 characters per
    grammar (all eight grammars) takes under 10 s (about 0.6 s here; lark's parser would take about 6.5)."""
    timings = {}
    for name in LLAMA_CPP_GRAMMARS:
        lang = language(name)
        rng = random.Random(f"speed-{name}")
        samples = []
        while len(samples) < 50:
            s = lang.sample(rng, 150)  # this budget gives lengths in the window most often
            if 150 <= len(s) <= 250:
                samples.append(s)
        start = time.perf_counter()
        rejected = [s for s in samples if not lang.accepts(s)]
        timings[name] = (time.perf_counter() - start, sum(map(len, samples)) / len(samples))
        assert not rejected, f"{name}.gbnf: random strings of the language rejected: {rejected[:3]}"
    total = sum(t for t, _ in timings.values())
    report = ", ".join(f"{n} {t:.2f}s ({avg:.0f} chars avg)" for n, (t, avg) in timings.items())
    assert total < 10, f"checking took {total:.1f}s: {report}"


def test_long_input_is_checked():
    """A 2 KB output (the longest the structured-output tests generate) takes well under a second."""
    doc = "{" + ",".join(f'"k{i}": [{i}, "v{i}", {{"x": true}}]' for i in range(70)) + "}"
    assert len(doc) > 2000
    lang = language("json")
    start = time.perf_counter()
    assert lang.accepts(doc) and not lang.accepts(doc[:-1])
    assert time.perf_counter() - start < 2
    assert lang.accepts_lark(doc) and not lang.accepts_lark(doc[:-1])


# ------------------------------------------------------------------------------------ GBNF features

def accepts(grammar: str, *strings: str) -> list[bool]:
    lang = GbnfLanguage(grammar)
    verdicts = [lang.accepts(s) for s in strings]
    assert verdicts == [lang.accepts_lark(s) for s in strings]
    return verdicts


def check(grammar: str, accept: list[str], reject: list[str]) -> None:
    wrong = _wrong_verdicts(GbnfLanguage(grammar), accept, reject)
    assert not wrong, f"wrong verdict for {wrong} under:\n{grammar}"


def test_string_literal_and_sequence():
    check('root ::= "ab" "c"', ["abc"], ["", "ab", "abcc", "ABC", "a b c"])


def test_literal_escapes():
    check(r'root ::= "\n\t\r\\\"\[\]\-"', ['\n\t\r\\"[]-'], ["", '\\n\\t\\r\\\\\\"', '\n\t\r\\"[]'])


@pytest.mark.parametrize("escape,char", [(r"\x41", "A"), (r"\x85", "\x85"), (r"\u00e9", "é"), (r"\u2028", "\u2028"),
                                         (r"\U0001F600", "😀"), (r"\x00", "\x00")])
def test_hex_escapes_are_code_points(escape, char):
    """\\xHH is the code point U+00HH (llama.cpp), not a byte of UTF-8."""
    as_bytes = char.encode("utf-8").decode("latin-1")  # its UTF-8 bytes read as code points
    reject = ["<>", f"<{char}{char}>"] + ([f"<{as_bytes}>"] if as_bytes != char else [])
    check(f'root ::= "<{escape}>"', [f"<{char}>"], reject)


def test_raw_unicode_in_literals_and_classes():
    check('root ::= "é日😀" [α-ω]', ["é日😀β"], ["e日😀β", "é日😀", "é日😀a", "é日😀βγ"])


@pytest.mark.parametrize("bad", [r'root ::= "\q"', r'root ::= "\x4"', r'root ::= "\u12"', r'root ::= [\U0001F60]',
                                 r'root ::= "\b"'])
def test_bad_escapes(bad):
    with pytest.raises(ValueError, match="line 1"):
        GbnfLanguage(bad)


def test_character_class_ranges():
    check("root ::= [a-cx0-9]", ["a", "b", "c", "x", "5"], ["", "d", "w", "A", "ab", "-"])


def test_negated_class():
    check(r"root ::= [^a-c\n]", ["d", "A", " ", "😀", "\t", "]"], ["", "a", "c", "\n", "dd"])


def test_class_special_characters():
    # ']' and '\' escaped, '-' first or last, '^' not first, '[' and '"' and '#' raw
    check(r'root ::= [\]\\^[-] | [-a] | ["#] | [a\-c]',
          ["]", "\\", "^", "[", "-", "a", '"', "#", "c"],
          ["b", "x", "", "\\]"])
    check('root ::= [a-] "x"', ["ax", "-x"], ["bx", "]x", "x"])  # a '-' right before ']' is itself


def test_class_escapes():
    check(r"root ::= [\x41-\x43\u00e9\U0001F600\t\n]", ["A", "B", "C", "é", "😀", "\t", "\n"], ["D", "e", "😁", " "])


def test_every_ascii_character_in_literals_and_classes():
    """Each of the 128 ASCII characters (and a few others) by escape, in a literal, a class, a range and a
    negated class: the lark back end writes each one into its grammar its own way."""
    for cp in list(range(0x80)) + [0x85, 0xA0, 0x2028, 0xFFFF, 0x1F600, 0x10FFFF]:
        c, e = chr(cp), f"\\U{cp:08x}"
        other = "a" if c != "a" else "b"
        check(f'root ::= "{e}" [{e}] [{e}-{e}] [^{e}]', [c + c + c + other], [c + c + c + c, other * 4, c * 3])


def test_inverted_range_matches_nothing():
    """llama.cpp checks lo <= c <= hi, so [z-a] matches no character."""
    check('root ::= [z-a]? "q"', ["q"], ["a", "m", "zq", ""])


def test_empty_class_is_refused():
    for g in ("root ::= []", "root ::= [^]"):
        with pytest.raises(ValueError, match="empty character class"):
            GbnfLanguage(g)


def test_any_character():
    """'.' is one code point, any, newline included (multi-byte characters count once; llama.cpp's test)."""
    check("root ::= .", ["a", "\n", "😀", "\x00", "\u2028"], ["", "ab", "😀😀"])
    check('root ::= ... "abc" ...', ["abcabcabc", "aaaabcccc", "🔵🟠✅abc❌🟠🔵"],
          ["aaabcccc", "aaaaabcccc", "aaaabccc", "aaaabccccc", "🔵🟠✅❌abc❌✅🟠🔵", "🔵🟠abc🟠🔵"])


def test_alternation_and_grouping():
    check('root ::= "a" ("b" | "c" "d" | ) "e"', ["abe", "acde", "ae"], ["ace", "ade", "abde", "a", ""])
    check('root ::= ((("x")))', ["x"], ["", "xx"])


def test_empty_alternatives_and_empty_literal():
    check('root ::= "a" ws "b"\nws ::= | " " | "\\n" [ \\t]{0,2}', ["ab", "a b", "a\nb", "a\n \tb"],
          ["a  b", "a\n   b", "a\tb"])
    check('root ::= "" "a" ""', ["a"], ["", "aa"])


def test_star_plus_question():
    check('root ::= "a"*', ["", "a", "a" * 60], ["b", "ab", "ba", "a" * 60 + "b"])
    check('root ::= "a"+', ["a", "a" * 60], ["", "b", "aab"])
    check('root ::= "a"?', ["", "a"], ["aa", "b"])
    check("root ::= cons+ vowel* cons? (vowel cons)*\nvowel ::= [aeiouy]\ncons ::= [bcdfghjklmnpqrstvwxyz]",
          ["yes", "no", "noyes", "crwth", "four", "bryyyy"], ["yess", "yesno", "forty", "catyyy"])


def test_repetition_applies_to_the_whole_previous_item():
    check('root ::= "ab"+', ["ab", "abab"], ["a", "abb", "aba"])
    check('root ::= x{2}\nx ::= "p" | "qq"', ["pp", "pqq", "qqqq"], ["p", "q", "qqq", "ppp"])
    check('root ::= ("a" "b"?){2}', ["aa", "aba", "abab", "aab"], ["a", "abb", "aaa"])


def test_counted_repetition():
    check("root ::= [ab]{4}", ["aaaa", "bbbb", "abab"], ["a", "aaa", "aaaaa", ""])
    check("root ::= [ab]{4,}", ["aaaa", "aaaaab", "ababab"], ["", "aba"])
    check("root ::= [ab]{0,4}", ["", "a", "aaab"], ["aaaaa", "c"])
    check('root ::= ("0x" [A-F0-9]{2} " "?){3,5}', ["0xFF 0x12 0xAB", "0xFF 0x12 0xAB 0x00 0x00"],
          ["", "0xFF", "0xFF 0x12", "0xFF 0x12 0xAB 0x00 0x00 0x00"])
    check('root ::= "a"{0} "b"', ["b"], ["ab"])
    check('root ::= "a"{ 1 , 2 }', ["a", "aa"], ["", "aaa"])  # blanks inside the braces


def test_stacked_repetitions():
    check('root ::= "a"*+', ["", "a", "aaa"], ["b"])
    check('root ::= "a"?{2}', ["", "a", "aa"], ["aaa"])
    check("root ::= ( [x]* )*", ["", "x", "xx"], ["y", "yy"])  # llama.cpp's "segfault" case


def test_repetition_limits():
    """llama.cpp: a count above 2000 is an error, a maximum above 2000 means no maximum."""
    for g in ('root ::= "a"{5000}', 'root ::= "a"{5000,}', 'root ::= "a"{5000,6000}', 'root ::= "a"{3,2}',
              'root ::= "a"{,}', 'root ::= "a"{,10}', 'root ::= "a"{2'):
        with pytest.raises(ValueError):
            GbnfLanguage(g)
    assert accepts('root ::= "a"{0,2001}', "", "a" * 2002) == [True, True]


def test_repetition_needs_an_item():
    for g in ('root ::= *"a"', 'root ::= "a" | +"b"', 'root ::= ""*', 'root ::= ( ?)'):
        with pytest.raises(ValueError, match="expecting an item"):
            GbnfLanguage(g)


def test_comments():
    check('# leading comment\nroot ::= "a" # trailing comment\n  # indented\n\nb ::= "#" [#] # after\n',
          ["a"], ["#", "a#", ""])
    check('root ::= "a" (  # inside a group\n  "b" # more\n)', ["ab"], ["a"])


def test_multi_line_rules():
    check('root ::=\n  "a" |\n  "b"\n', ["a", "b"], ["", "ab"])
    check('root ::= (\n  "a"\n  "b"\n  | "c"\n)+', ["ab", "cab", "abab"], ["a", "ac"])
    check('root ::= "x" |\n\n   # a comment line\n   "y"', ["x", "y"], [""])
    check('root ::= "line1\nline2"', ["line1\nline2"], ["line1line2"])  # a raw newline inside a literal


def test_newline_ends_a_rule_outside_parentheses():
    """A continuation line needs a '|' at the end of the line before it (llama.cpp's parse_space)."""
    for g in ('root ::= "a"\n  "b"', 'root ::= "a"\n  | "b"'):
        with pytest.raises(ValueError, match="line 2"):
            GbnfLanguage(g)


def test_crlf_line_endings():
    check('root ::= a |\r\n  b\r\na ::= "a"\r\nb ::= "b"\r\n', ["a", "b"], ["ab", "\r"])


def test_rule_names():
    check('root ::= my-rule2 X-1\nmy-rule2 ::= "1" | "2" my-rule2\nX-1 ::= "!"', ["1!", "2221!"], ["22!", "1"])


def test_recursion():
    check('root ::= "(" root ")" | ""', ["", "()", "((()))"], ["(", "())", "(()"])


def test_left_recursion_is_accepted():
    """llama.cpp refuses left-recursive grammars when it builds a sampler; the language is still well
    defined, and Earley parsing handles it."""
    check('root ::= root "a" | "a"', ["a", "aaa"], ["", "b"])


def test_ported_llama_cpp_cases():
    """test-grammar-integration.cpp's "simple grammar" and "medium complexity grammar" cases."""
    check('root ::= expr\nexpr ::= term ("+" term)*\nterm ::= number\nnumber ::= [0-9]+',
          ["42", "1+2+3+4+5", "123+456"], ["+", "/ 3", "1+2+3+4+5+", "12a45"])
    medium = r'''
        root ::= expression
        expression ::= term ws (("+"|"-") ws term)*
        term ::= factor ws (("*"|"/") ws factor)*
        factor ::= number | variable | "(" expression ")" | function-call
        number ::= [0-9]+
        variable ::= [a-zA-Z_][a-zA-Z0-9_]*
        function-call ::= variable ws "(" (expression ("," ws expression)*)? ")"
        ws ::= [ \t\n\r]?'''
    check(medium,
          ["42", "1*2*3*4*5", "x", "x+10", "x1+y2", "(a+b)*(c-d)", "func()", "func(x,y+2)", "a*(b+c)-d/e",
           "f(g(x),h(y,z))", "x + 10", "x1 + y2", "(a + b) * (c - d)", "func(x, y + 2)", "a * (b + c) - d / e",
           "f(g(x), h(y, z))", "123+456", "123*456*789-123/456+789*123",
           "123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456"],
          ["+", "/ 3x", "x + + y", "a * / b", "func(,)", "func(x y)", "(a + b", "x + y)", "a + b * (c - d", "42 +",
           "x +", "x + 10 +", "(a + b) * (c - d", "func(", "func(x, y + 2", "a * (b + c) - d /", "f(g(x), h(y, z)",
           "123+456*789-123/456+789*123-456/789+123*456-789/123+456*789-123/456+789*123-456/"])


def test_root_and_references():
    with pytest.raises(ValueError, match="no 'root' rule"):
        GbnfLanguage('rot ::= "a"')
    with pytest.raises(ValueError, match="undefined rule 'numero'"):
        GbnfLanguage('root ::= expr\nexpr ::= numero\nnumber ::= [0-9]+')
    assert GbnfLanguage('foobar ::= "foobar"', start="foobar").accepts("foobar")
    # a second definition replaces the first, as in llama.cpp
    assert accepts('root ::= "x"\nroot ::= "y"', "x", "y") == [False, True]


def test_token_references_are_refused():
    """<[id]>, <text> and !<...> match tokenizer tokens; a string does not say which tokens made it."""
    for g in ('root ::= <[10]> "a"', "root ::= <think> .*", 'root ::= (!<[11]>)*'):
        with pytest.raises(ValueError, match="token reference"):
            GbnfLanguage(g)


@pytest.mark.parametrize("bad,where", [
    ('root ::= "abc', "unterminated string"), ("root ::= [abc", "unterminated character class"),
    ('root ::= ("a"', "expecting '\\)'"), ('root ::= "a")', "expecting newline or end"),
    ('root := "a"', "unexpected character ':'"), ('root\n::= "a"', "expecting ::="),
    ('root ::= "a" @', "unexpected character '@'"), ('x ::= "a"\n\n"b"', "line 3"),
    ('root ::= "\\U00110000"', "beyond U\\+10FFFF"),
])
def test_syntax_errors_name_the_line(bad, where):
    with pytest.raises(ValueError, match=where) as e:
        GbnfLanguage(bad)
    assert "line" in str(e.value)


def test_every_llama_cpp_grammar_parses_to_rules():
    """The parse of each file has the rules its text defines (names in order) and refers to no others."""
    for name in LLAMA_CPP_GRAMMARS:
        text = grammar_text(name)
        defined = re.findall(r"^([a-zA-Z0-9-]+)\s*::=", text, flags=re.M)
        assert list(parse_gbnf(text)) == defined, name


def test_prefixes_of_the_language():
    from gbnf_reference import GbnfLanguage
    from paths import llama_cpp_grammars

    json_language = GbnfLanguage((llama_cpp_grammars() / "json.gbnf").read_text(encoding="utf-8"))
    for text in ['', '{', '{"a": ', '{"a": [1, 2', '{"a": "unfinished', '{"a": 1}']:
        assert json_language.accepts_prefix(text), text
    for text in ['}', '{"a" }', '{"a": 1}}', '[1, 2]', '{"a": tru ']:
        assert not json_language.accepts_prefix(text), text
