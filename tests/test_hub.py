"""Model.from_pretrained through huggingface_hub, without the network: repositories are placed in
a temporary Hugging Face cache laid out as huggingface_hub writes it (models--org--name/refs/main,
snapshots/<commit>/<file> symlinked to blobs/<sha256>), and loaded offline (local_files_only or
HF_HUB_OFFLINE=1). The online branch runs against a mocked hub API."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import hf_checkpoints as hc
import tiny_models as tm

COMMIT = "0123456789abcdef0123456789abcdef01234567"
SPEC = tm.family_spec("llama", "hub_tiny", hidden=64, head_dim=16, n_layers=1, ffn=128, seed=41)


def populate_cache(cache: Path, repo_id: str, files: dict[str, Path]) -> Path:
    """Put `files` (name in repo -> local file) into `cache` as huggingface_hub's cache would hold
    them after a download of revision main; returns the snapshot directory."""
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    for name, src in files.items():
        blob = repo / "blobs" / hashlib.sha256(Path(src).read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, blob)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    return snapshot


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory, tokenizer_dir):
    path, _ = hc.save_checkpoint(SPEC, tmp_path_factory.mktemp("hub_ckpt"), tokenizer_dir, "F16", max_shard_size="2MB")
    return path


@pytest.fixture(scope="module")
def gguf_file(tiny_gguf):
    return tiny_gguf("f16_tied")[0]


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "hf_cache" / "hub"


def test_safetensors_repo_offline(checkpoint_dir, cache, akunu_mod):
    files = {p.name: p for p in checkpoint_dir.iterdir() if p.is_file()}
    assert "model.safetensors.index.json" in files and "tokenizer.json" in files
    populate_cache(cache, "akunu-test/tiny-llama", files)
    m = akunu_mod.Model.from_pretrained("akunu-test/tiny-llama", cache_dir=cache, local_files_only=True,
                                        context_length=128)
    assert m.format == "safetensors" and m.context_length == 128
    assert Path(m.path).parent.name == "snapshots" or COMMIT in m.path
    direct = akunu_mod.Model(str(checkpoint_dir))
    ids = direct.tokenizer.encode("The lighthouse keeper climbed", add_special=True)
    np.testing.assert_array_equal(m.logits(ids), direct.logits(ids))
    assert m.generate("Hello", max_tokens=8) == direct.generate("Hello", max_tokens=8)


def test_hf_hub_offline_env(checkpoint_dir, cache, monkeypatch, akunu_mod):
    """HF_HUB_OFFLINE=1 and the default cache location: no arguments needed."""
    import huggingface_hub

    populate_cache(cache, "akunu-test/tiny-llama", {p.name: p for p in checkpoint_dir.iterdir() if p.is_file()})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    m = akunu_mod.Model.from_pretrained("akunu-test/tiny-llama")
    assert m.config["n_layers"] == SPEC.n_layers
    with pytest.raises(FileNotFoundError, match="akunu-test/not-there"):
        akunu_mod.Model.from_pretrained("akunu-test/not-there")


def test_gguf_repo_single_file(gguf_file, cache, akunu_mod):
    populate_cache(cache, "akunu-test/one-gguf", {"tiny.gguf": gguf_file, "README.md": gguf_file})
    m = akunu_mod.Model.from_pretrained("akunu-test/one-gguf", cache_dir=cache, local_files_only=True)
    assert m.format == "gguf" and os.path.basename(m.path) == "tiny.gguf"


def test_gguf_repo_several_files(gguf_file, cache, akunu_mod):
    names = ["tiny.Q8_0.gguf", "tiny.Q4_1.gguf", "tiny.F16.gguf", "tiny.Q4_0_4_4.gguf"]
    populate_cache(cache, "akunu-test/many-gguf", {n: gguf_file for n in names})
    m = akunu_mod.Model.from_pretrained("akunu-test/many-gguf", cache_dir=cache, local_files_only=True)
    assert os.path.basename(m.path) == "tiny.Q4_1.gguf"  # the default quantization
    m = akunu_mod.Model.from_pretrained("akunu-test/many-gguf", "tiny.F16.gguf", cache_dir=cache,
                                        local_files_only=True)
    assert os.path.basename(m.path) == "tiny.F16.gguf"
    with pytest.raises(FileNotFoundError, match="tiny.Q2_K.gguf"):
        akunu_mod.Model.from_pretrained("akunu-test/many-gguf", "tiny.Q2_K.gguf", cache_dir=cache,
                                        local_files_only=True)


def test_gguf_repo_ambiguous(gguf_file, cache, akunu_mod):
    populate_cache(cache, "akunu-test/odd-gguf", {"a-IQ2_XS.gguf": gguf_file, "b-Q5_K_M.gguf": gguf_file})
    with pytest.raises(ValueError) as info:
        akunu_mod.Model.from_pretrained("akunu-test/odd-gguf", cache_dir=cache, local_files_only=True)
    assert "a-IQ2_XS.gguf" in str(info.value) and "b-Q5_K_M.gguf" in str(info.value)


def test_choose_gguf_names():
    from akunu.hub import choose_gguf

    assert choose_gguf("r", ["x.BF16.gguf", "x.F16.gguf"]) == "x.F16.gguf"
    assert choose_gguf("r", ["m-q8_0.gguf", "m-q4_0.gguf", "mmproj-f16.gguf"]) == "m-q4_0.gguf"
    assert choose_gguf("r", ["model-Q8_0.gguf", "README.md"]) == "model-Q8_0.gguf"
    assert choose_gguf("r", ["big-Q8_0-00001-of-00002.gguf", "big-Q8_0-00002-of-00002.gguf", "small.Q8_0.gguf"]) \
        == "small.Q8_0.gguf"
    with pytest.raises(ValueError, match="several Q4_1"):
        choose_gguf("r", ["a.Q4_1.gguf", "b.Q4_1.gguf"])
    with pytest.raises(ValueError, match="split"):
        choose_gguf("r", ["big-00001-of-00002.gguf", "big-00002-of-00002.gguf"])


def test_not_a_model_repo(tmp_path, cache, akunu_mod):
    (tmp_path / "README.md").write_text("hello")
    populate_cache(cache, "akunu-test/readme-only", {"README.md": tmp_path / "README.md"})
    with pytest.raises(FileNotFoundError, match="neither .gguf"):
        akunu_mod.Model.from_pretrained("akunu-test/readme-only", cache_dir=cache, local_files_only=True)


def test_online_branch_with_mocked_hub(gguf_file, checkpoint_dir, monkeypatch, akunu_mod):
    """Online: the repository is listed through HfApi and only the chosen file is downloaded (both
    mocked here: no network in tests)."""
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    calls = []

    def list_repo_files(self, repo_id, revision=None, token=None, **kw):
        calls.append(("list", repo_id))
        return ["README.md", "x.Q8_0.gguf", "x.Q4_0.gguf"] if repo_id == "r/gguf" else \
            ["config.json", "model.safetensors", "tokenizer.json"]

    def hf_hub_download(repo_id, filename, **kw):
        calls.append(("download", repo_id, filename, kw.get("local_files_only")))
        return str(gguf_file)

    def snapshot_download(repo_id, **kw):
        calls.append(("snapshot", repo_id, tuple(kw.get("allow_patterns") or ())))
        return str(checkpoint_dir)

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", list_repo_files)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    akunu_mod.Model.from_pretrained("r/gguf")
    assert calls[:2] == [("list", "r/gguf"), ("download", "r/gguf", "x.Q4_0.gguf", False)]
    akunu_mod.Model.from_pretrained("r/st")
    assert calls[2][0] == "list" and calls[3][0] == "snapshot" and "*.safetensors" in calls[3][2]
