"""Tiny random Llamas whose matrices are Q5_0 / Q5_1 / IQ4_NL / Q2_K .. Q6_K / IQ4_XS blocks (one
dtype per file, and mixed files in the style of llama.cpp's Q4_K_M, token embedding included):
akunu's teacher-forced logits against transformers on the same GGUF's weights (gguf-py dequantize,
tests/references.reference_from_gguf), with test_reference_logits.py's criterion
(argmax agreement >= 99%, mean KL <= 1e-3). The GGUFs are written by tests/gguf_kquants.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import gguf
from gguf import GGUFReader

import gguf_kquants as kq
import references as rf
from akunu import _testing



@pytest.fixture(scope="module")
def kq_case(gguf_dir):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = kq.build_case_gguf(kq.CASES[name], gguf_dir)
        return cache[name]

    return get


@pytest.mark.parametrize("name", ["mixed_q4_k_m", "mixed_b_tied_llama3"])
def test_mixed_file_has_the_dtypes_it_claims(name, kq_case):
    path, _ = kq_case(name)
    types = {t.name.removesuffix(".weight"): t.tensor_type for t in GGUFReader(str(path)).tensors}
    for tensor, qtype in kq.CASES[name].dtype.items():
        if tensor in types or tensor != "output":  # a tied file has no output tensor
            assert types[tensor] == qtype, (tensor, types[tensor], qtype)
    # every new dtype appears in each mixed file
    assert {gguf.GGMLQuantizationType[d] for d in kq.NEW_DTYPES} <= set(types.values())


@pytest.mark.parametrize("name", list(kq.CASES))
def test_logits_match_transformers(name, kq_case, varied_ids, akunu_mod):
    path, orig = kq_case(name)
    ref = rf.hf_logits(rf.reference_from_gguf(path, kq.CASES[name].spec), varied_ids)
    # The reference is meaningful: quantized, so not the float model, but close to it and not degenerate.
    c_orig = rf.compare_logits(rf.hf_logits(orig, varied_ids), ref)
    assert c_orig["max_abs"] > 0 and c_orig["agree"] > 0.05, c_orig  # (chance: 1 / 32000)
    assert len(set(ref.argmax(-1).tolist())) >= 30, "reference argmax is degenerate"

    model = akunu_mod.Model(str(path), backend="cpu")
    got = model.logits(varied_ids)
    assert got.shape == ref.shape and np.isfinite(got).all()
    c = rf.compare_logits(ref, got)
    assert c["agree"] >= rf.MIN_AGREE and c["kl_mean"] <= rf.MAX_KL, (name, c)


def test_mixed_model_greedy_decode_matches_logits(kq_case, akunu_mod, llama_spm_tokenizer_ref):
    """Decode path (GEMV, M = 1) agrees with the prefill path (GEMM) on the mixed file: the
    greedy continuation equals the argmax of teacher-forced logits over it."""
    path, _ = kq_case("mixed_q4_k_m")
    model = akunu_mod.Model(str(path), backend="cpu")
    ids = model.tokenizer.encode("The lighthouse keeper climbed the spiral stairs")
    model._engine.reset()
    first = model._engine.prefill(ids)
    out = [first] + list(model._engine.chain_decode(first, 15))
    logits = np.asarray(model.logits(ids + out[:-1]))[len(ids) - 1:]
    # Each decoded token is the argmax of the teacher-forced logits (up to float noise between the
    # M = 1 and M > 1 paths, should two logits nearly tie).
    chosen = logits[np.arange(len(out)), out]
    assert np.all(chosen >= logits.max(-1) - (1e-3 + 1e-4 * np.abs(logits).max(-1))), (out, logits.argmax(-1).tolist())


def test_inspect_names_new_dtypes(kq_case, akunu_mod):
    """Model.tensors and `akunu inspect` report the file's dtypes by their GGML names, and the
    dispatch table runs one kernel per dtype."""
    import subprocess
    import sys

    path, _ = kq_case("mixed_q4_k_m")
    model = akunu_mod.Model(str(path), backend="cpu")
    want = {t.name: t.tensor_type.name for t in GGUFReader(str(path)).tensors}
    got = {name: dtype for name, dtype, _dims, _nbytes in model.tensors}
    assert got == want
    kernels = {cmd["kernel"] for cmd in model.dispatch_table}
    # The dtypes this build repacks at load run their repacked kernels (r16 builds: all but Q2_K / Q3_K).
    repacked = {d.lower() for d in _testing.repacked_dtypes()}
    for d in ("q4_k", "q5_k", "q6_k", "q3_k", "q2_k", "iq4_xs", "q5_0", "q5_1", "iq4_nl"):
        assert f"gemm_{d}{'_repacked' if d in repacked else ''}" in kernels, (d, sorted(kernels))
    assert f"embedding_q4_k{'_repacked' if 'q4_k' in repacked else ''}" in kernels
    r = subprocess.run([sys.executable, "-m", "akunu.cli", "inspect", "--tensors", str(path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for d in kq.NEW_DTYPES:
        assert f" {d} " in r.stdout, d
