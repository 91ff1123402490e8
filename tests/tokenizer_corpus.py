"""A seeded corpus of mixed text for comparing tokenizers (tests/test_tokenizer_exactness.py and
benchmarks/tokenizer_exactness.py).

Each string joins random fragments: Latin with accents, Cyrillic, Greek, CJK, Korean, Arabic, Hindi,
emoji (modifiers, ZWJ sequences, flags), digits and long numbers, whitespace runs (spaces, tabs,
newlines, \\r), code, contractions in every case, punctuation runs and special-token text. Some
strings are random characters from the same pools. The same seed gives the same corpus on every
machine (only ``random.Random`` is used).
"""
from __future__ import annotations

import random

WORDS = {
    "latin": ["the", "quick", "brown", "fox", "Hello", "World", "naïve", "café", "résumé", "Ångström", "Straße",
              "façade", "œuvre", "Æsir", "jalapeño", "Zürich", "São", "Paulo", "élève", "ÉCOLE", "İstanbul",
              "Dvořák", "Łódź", "ﬁne", "mañana", "über", "NASA", "iPhone", "camelCase", "snake_case", "x"],
    "cyrillic": ["Привет", "мир", "Как", "дела", "Москва", "ёлка", "ЩУКА", "съезд", "Україна", "їжак"],
    "greek": ["Γειά", "σου", "κόσμε", "Ωμέγα", "αλφάβητο", "ΣΟΦΙΑ", "ϐ", "ἀρχή"],
    "cjk": ["日本語", "の", "テキスト", "です", "。", "中文", "也可以", "！", "漢字", "カタカナ", "ひらがな", "한국어",
            "안녕하세요", "세계", "「引用」", "、", "ｆｕｌｌｗｉｄｔｈ", "１２３"],
    "arabic": ["مرحبا", "بالعالم", "العربية", "٣٤٥", "،", "كتاب"],
    "hindi": ["हिन्दी", "नमस्ते", "दुनिया", "पाठ", "।", "१२३"],
    "emoji": ["🦙", "😀", "🔥", "👍🏽", "👨‍👩‍👧‍👦", "👩🏾‍💻", "🏳️‍🌈", "❤️", "🇯🇵", "✨", "🤖", "☕"],
    "code": ["def f(x):", "return x**2", "if (a != b) {", "}", "#include <stdio.h>", "x += 1;", "=>", "->",
             "::", "std::vector<int>", "printf(\"%d\\n\", 42);", "<div class=\"a\">", "</div>", "SELECT * FROM t;",
             "a[i] = b[j];", "/* comment */", "// note", "`code`", "$HOME", "@decorator", "lambda: None",
             "0x1F", "i++", "&&", "||", "!==", "{\"key\": [1, 2]}", "\\n", "'''", "~/.bashrc", "a_b-c.d"],
    "contraction": ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
                    "'Re", "'lL", "don't", "DON'T", "I'm", "I'M", "you're", "we've", "they'll", "he'd", "it's",
                    "IT'S", "o'clock", "'", "''"],
    "punct": ["!!!", "...", "?!", "—", "–", "«", "»", "“quoted”", "‘single’", "(", ")", "[", "]", "~~", "@#$%^&*",
              ",", ".", ";", ":", "?", "¿", "¡", "…", "•", "§", "©", "€", "£", "¥", "°", "±", "×", "÷", "½", "²",
              "Ⅻ", "→", "∑", "√", "∞", "≠", "%", "_", "__", "-", "--", "---", "===", "***", "|", "\\", "/"],
    "space": [" ", " ", " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n", "\n\n", "\r\n", "\r", " \n", "\n ",
              " \t ", "\u00a0", "\u3000", "\u2009", "\u200b", "\u2028", "\n\n\n", "        ", "\r\n\r\n"],
}
SPECIAL_TEXT = ["<|endoftext|>", "<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
                "<|eot_id|>", "<|end|>", "<|user|>", "<pad>", "<mask>", "[CLS]", "[SEP]", "<|fim_prefix|>"]


def _number(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.randrange(10))
    if kind == 1:
        return str(rng.randrange(10 ** rng.randint(2, 25)))
    if kind == 2:
        return f"{rng.uniform(-1e4, 1e4):.{rng.randint(1, 6)}f}"
    if kind == 3:
        return f"{rng.randrange(10 ** 9):,}"
    if kind == 4:
        return f"{rng.randrange(1, 13)}/{rng.randrange(1, 29)}/{rng.randrange(1900, 2100)}"
    return f"{rng.uniform(0, 10):.2e}"


def _random_chars(rng: random.Random, pool: str) -> str:
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 40)))


def _pool() -> str:
    chars = set()
    for words in WORDS.values():
        for w in words:
            chars.update(w)
    chars.update("0123456789abcdefxyzABCXYZ'\" \n\t\r")
    return "".join(sorted(chars))


def make_corpus(n: int, seed: int = 33, specials: list[str] | None = None) -> list[str]:
    """`n` strings; `specials` (the vocab's special-token texts) join the generic special-token texts."""
    rng = random.Random(seed)
    special = list(SPECIAL_TEXT) + sorted(set(specials or []) - set(SPECIAL_TEXT))
    pool = _pool()
    cats = list(WORDS) + ["number", "number", "special"]
    out = ["", " ", "  ", "\n", "\t", "Hello world", " Hello world", "Hello World!", "1234567890",
           "   leading", "trailing   ", "\n\n\nnewlines\n", "a" * 60, " " * 40, "\t\t\ttabs",
           "I'm you're we've they'll he'd it's DON'T I'M 'S 'll"]
    while len(out) < n:
        r = rng.random()
        if r < 0.1:
            out.append(_random_chars(rng, pool))
            continue
        if r < 0.2:  # one script, many words
            cat = rng.choice(list(WORDS))
            out.append(rng.choice(["", " "]).join(rng.choice(WORDS[cat]) for _ in range(rng.randint(1, 12))))
            continue
        parts = []
        for _ in range(rng.randint(1, 14)):
            cat = rng.choice(cats)
            if cat == "number":
                parts.append(_number(rng))
            elif cat == "special":
                parts.append(rng.choice(special))
            else:
                parts.append(rng.choice(WORDS[cat]))
            parts.append(rng.choice(["", " ", " ", " ", "", rng.choice(WORDS["space"])]))
        out.append("".join(parts))
    return out[:n]
