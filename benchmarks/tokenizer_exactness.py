"""The whole tokenizer exactness corpus (issue 33): every llama.cpp vocab file akunu loads, N generated strings
each (default 2000), encoded by akunu and by llama.cpp (llama-cpp-python) with parse_special off and on; ids must
be identical and decode(encode(text)) must give the text back (WordPiece / Unigram, which normalize the text:
decode must equal llama.cpp's detokenize, and add_special's [CLS] / [SEP] / BOS / EOS must match). CI runs the first 200 strings of the same corpus
(tests/test_tokenizer_exactness.py); this is that test at full size, with a per-vocab table.

    python benchmarks/tokenizer_exactness.py [--n 2000] [--vocabs qwen2,falcon]

Exits 1 if any string differs (the first differences of each vocab are printed).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import akunu  # noqa: E402
from paths import llama_cpp_vocabs  # noqa: E402
from test_tokenizer_exactness import LOADED, compare, special_texts  # noqa: E402
from tokenizer_corpus import make_corpus  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="corpus strings per vocab")
    ap.add_argument("--vocabs", default=",".join(LOADED))
    args = ap.parse_args()
    import llama_cpp

    d = llama_cpp_vocabs()
    failed = 0
    print(f"llama-cpp-python {llama_cpp.__version__}, akunu {akunu.__version__}, {args.n} strings per vocab")
    print(f"{'vocab':<16}{'model':<7}{'pre':<16}{'differences':>12}{'seconds':>9}")
    for name in args.vocabs.split(","):
        path = d / f"ggml-vocab-{name}.gguf"
        tok = akunu.Tokenizer.from_file(str(path))
        ref = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        t0 = time.perf_counter()
        bad = compare(tok, ref, make_corpus(args.n, specials=special_texts(tok)))
        print(f"{name:<16}{tok.model:<7}{tok.pre:<16}{len(bad):>12}{time.perf_counter() - t0:>9.1f}")
        for b in bad[:3]:
            print("    " + b[:400])
        failed += bool(bad)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
