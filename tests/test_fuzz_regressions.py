"""Every input the fuzzers (fuzz/README.md) turned up, replayed through the public API: each file
under tests/data/fuzz/<target>/regressions/ must raise the clear error listed for it below, and
every seed of tests/data/fuzz/<target>/corpus/ must load or raise akunu's own errors, never
crash, hang or raise anything else."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

import akunu
from akunu import chat_template, template_sandbox
from akunu.hf_checkpoint import quantization_config, read_config
from akunu.safetensors_index import list_tensors, read_json, read_safetensors_header

REPO = Path(__file__).resolve().parent.parent
FUZZ_DATA = REPO / "tests" / "data" / "fuzz"
TEXT_MARKER = b"\nAKUNU_FUZZ_TEXT\n"  # fuzz/fuzz_tokenizer.cpp: the text to encode follows it

# target -> {regression file: (exception class, part of its message)}
REGRESSIONS = {
    "fuzz_model_config": {
        # Found by fuzz_model_config: raw file bytes in a message became a UnicodeDecodeError in Python.
        "not_utf8_in_message_found": (akunu.ModelFormatError, "missing tensor"),
        "rope_scaling_type_not_utf8": (akunu.UnsupportedError, r"rope scaling type 'line\xff\xff'"),
        "architecture_not_utf8": (akunu.UnsupportedError, r"unsupported architecture 'll\xc3ma'"),
        # block_count 2**32 - 1: a 4 GiB per-layer table (libFuzzer: malloc(4294967295)) before any check.
        "block_count_huge": (akunu.ModelFormatError, "block_count 4294967295 exceeds the 12 tensors"),
        # key_length 2**31: 8 GiB of RoPE frequencies before the Q/K shapes were checked.
        "rope_dim_huge": (akunu.ModelFormatError, "has shape [32, 32], expected [32, 2147483646]"),
    },
    "fuzz_safetensors_header": {
        "json_nested_too_deep": (akunu.ModelFormatError, "header is not valid JSON (maximum recursion depth"),
    },
    "fuzz_safetensors_index": {
        "shard_names_of_mixed_types": (akunu.ModelFormatError, "bad shard file name 1 for 'b'"),
        "shard_name_unhashable": (akunu.ModelFormatError, "bad shard file name ['a.safetensors'] for 'a'"),
    },
    "fuzz_hf_config": {
        "layer_count_huge": (akunu.ModelFormatError, "'num_hidden_layers' 2147483647 is over 65536"),
        "head_dim_huge": (akunu.UnsupportedError, "head_dim 2147483648 is not supported (at most 1024)"),
        "hidden_size_over_32_bits": (akunu.ModelFormatError, "'hidden_size' must be a positive 32-bit integer"),
        "rotary_factor_huge": (akunu.ModelFormatError, "'partial_rotary_factor' must be at most 1"),
        "rope_theta_too_large_for_float": (akunu.ModelFormatError, "'rope_theta' must be a positive number"),
        "json_nested_too_deep": (akunu.ModelFormatError, "config.json is not valid JSON (maximum recursion depth"),
    },
    "fuzz_chat_template": {
        # Found by fuzz_chat_template: errors of the template's own code escaped as TypeError & co.
        "unary_plus_on_a_string": (ValueError, "TypeError: bad operand type for unary +"),
        "division_by_zero": (ValueError, "ZeroDivisionError"),
        "macro_recursion": (ValueError, "RecursionError"),
        "expression_nested_too_deep": (ValueError, "cannot be compiled: RecursionError"),
        # Memory: each would build gigabytes before failing, or run until killed.
        "string_repeated_past_memory": (ValueError, "builds a value of 50000000000 characters with '*'"),
        "integer_power_huge": (ValueError, "computes 9 ** 999999999"),
        "concat_doubling": (ValueError, "with '~', over 16777216"),
        "values_kept_in_a_list": (ValueError, "builds more than 67108864 characters in one render"),
        "padding_width_huge": (ValueError, "passes 10000000000 to the 'center' filter"),
        "format_width_huge": (ValueError, "with str.format"),
        # Time: 10**10 empty iterations.
        "nested_loops_forever": (ValueError, "the template ran longer than"),
    },
}
CPP_TARGETS = ("fuzz_gguf_reader", "fuzz_model_config", "fuzz_tokenizer")
MESSAGES = [{"role": "user", "content": "Hello"}]


def _harness(target: str):
    """fuzz/python/<target>.py, whose fuzz_one_input is what the fuzzer runs."""
    spec = importlib.util.spec_from_file_location(target, REPO / "fuzz" / "python" / f"{target}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files(target: str, kind: str) -> list[Path]:
    return sorted((FUZZ_DATA / target / kind).iterdir()) if (FUZZ_DATA / target / kind).is_dir() else []


def _replay(target: str, path: Path, tmp_path: Path) -> None:
    """The API call the regression's target fuzzes, on the file's bytes."""
    data = path.read_bytes()
    if target in ("fuzz_gguf_reader", "fuzz_model_config"):
        akunu.Model(str(path), context_length=64)
    elif target == "fuzz_safetensors_header":
        read_safetensors_header(str(path))
    elif target == "fuzz_safetensors_index":
        harness = _harness(target)  # its folder holds the shards the index names
        folder = tmp_path / "checkpoint"
        shutil.copytree(harness.FOLDER, folder)
        (folder / "model.safetensors.index.json").write_bytes(data)
        list_tensors(str(folder))
    elif target == "fuzz_hf_config":
        (tmp_path / "config.json").write_bytes(data)
        cfg = read_json(str(tmp_path / "config.json"), "config.json")
        read_config(cfg, str(tmp_path))
        quantization_config(cfg, str(tmp_path))
    elif target == "fuzz_chat_template":
        chat_template.render_chat(data.decode(), MESSAGES, "<s>", "</s>")
    else:
        raise AssertionError(f"no replay for {target}")


REGRESSION_CASES = [(t, name) for t, files in REGRESSIONS.items() for name in files]


@pytest.mark.parametrize("target,name", REGRESSION_CASES, ids=[f"{t}/{n}" for t, n in REGRESSION_CASES])
def test_regression_raises_clear_error(target, name, tmp_path, monkeypatch):
    monkeypatch.setattr(template_sandbox, "RENDER_SECONDS", 1.0)  # the hang case: fail in 1 s, not 5
    error, message = REGRESSIONS[target][name]
    with pytest.raises(error) as info:
        _replay(target, FUZZ_DATA / target / "regressions" / name, tmp_path)
    assert message in str(info.value), str(info.value)


def test_every_regression_file_is_listed():
    on_disk = {(p.parent.parent.name, p.name) for p in FUZZ_DATA.glob("*/regressions/*")}
    assert on_disk == set(REGRESSION_CASES)


def _tokenizer_text(data: bytes) -> str:
    at = data.rfind(TEXT_MARKER)
    return data[at + len(TEXT_MARKER):].decode("utf-8", errors="replace") if at >= 0 else "Hello world"


@pytest.mark.parametrize("target", sorted(p.name for p in FUZZ_DATA.iterdir()))
def test_corpus_replays_without_crash(target, tmp_path):
    """The seeds (and anything a long run added and was committed) go through the same API: they
    load or raise akunu's errors (ValueError for chat templates), nothing else."""
    files = _files(target, "corpus")
    assert files, f"{target} has no corpus"
    for path in files:
        if target == "fuzz_tokenizer":
            data = path.read_bytes()
            try:
                tok = akunu.Tokenizer.from_file(str(path))
            except akunu.AkunuError:
                continue
            for special in (False, True):
                ids = tok.encode(_tokenizer_text(data), add_special=special, parse_special=special)
                assert all(0 <= i < tok.vocab_size for i in ids)
                tok.decode(ids, skip_special=special)
        elif target in CPP_TARGETS:
            try:
                akunu.Model(str(path), context_length=64).close()
            except akunu.AkunuError:
                pass
        else:
            _harness(target).fuzz_one_input(path.read_bytes())  # raises only what the fuzzer calls a finding


def test_model_seeds_are_real_models():
    """fuzz_model_config's seeds reach the whole loader: each one loads and generates."""
    for path in _files("fuzz_model_config", "corpus"):
        model = akunu.Model(str(path), context_length=64)
        assert len(model.generate_tokens("Hello", max_tokens=2)) == 2
        model.close()


def test_sandbox_leaves_real_templates_alone():
    """The limits of akunu.template_sandbox do not touch what real templates do: every template
    seed renders a conversation (with tools too) as Jinja's plain sandbox renders it."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello " * 2000},
                {"role": "assistant", "content": "Hi!"}, {"role": "user", "content": "Weather?"}]
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    plain.globals["raise_exception"] = chat_template._raise_exception
    plain.globals["strftime_now"] = chat_template._strftime_now
    plain.filters["tojson"] = chat_template._tojson
    compared = 0
    for path in _files("fuzz_chat_template", "corpus"):
        template = path.read_text(errors="replace")
        for tools in (None, [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]):
            extra = {} if tools is None else {"tools": tools}
            try:  # a corpus may hold inputs a long run added that fail anywhere
                expected = plain.from_string(template).render(messages=messages, add_generation_prompt=True,
                                                              bos_token="<s>", eos_token="</s>", **extra)
            except Exception:
                continue
            assert chat_template.render_chat(template, messages, "<s>", "</s>", True, tools) == expected, path.name
            compared += 1
    assert compared >= 20  # the seeds: akunu's family templates and SmolLM2's, each without and with tools


def test_deadline_leaves_no_pending_interrupt(monkeypatch):
    """A render stopped by the deadline leaves nothing behind: the next Python code runs normally."""
    monkeypatch.setattr(template_sandbox, "RENDER_SECONDS", 0.2)
    with pytest.raises(ValueError, match="ran longer than"):
        chat_template.render_chat(
            (FUZZ_DATA / "fuzz_chat_template" / "regressions" / "nested_loops_forever").read_text(),
            MESSAGES, "<s>", "</s>")
    total = 0
    for i in range(3_000_000):  # ~0.3 s of bytecode after the deadline's timer would have fired
        total += i
    assert total == sum(range(3_000_000))
    assert json.loads("[1]") == [1] and os.getpid() > 0
