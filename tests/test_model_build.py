"""The model pipeline on the tiny model: manifests, idempotence, atomic failure, bad input, verify."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

import models.build as build_module
from inference.chat import render_chat
from inference.manifest import GENAI_CUDA_GRAPH, GENAI_GRAPH, read_manifest, sha256_file
from inference.paths import VARIANTS, models_dir
from models.build import BuildError, BuildRequest, build
from models.registry import list_models, verify
from models.source import SourceError, check_gguf
from models.tiny import TINY_NAME
from models.validate import MAX_NLL_GAP_FP16, MAX_NLL_GAP_FP32, MIN_AGREEMENT


def _cli(*args: str, home: Path, **more_env: str) -> subprocess.CompletedProcess[str]:
    env = {"FASTCOMPLETE_HOME": str(home), "PATH": "/usr/bin:/bin", **more_env}
    return subprocess.run(
        [sys.executable, "-m", "lsp_server.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )


def test_tiny_manifests_describe_both_models(tiny_model: Path) -> None:
    standard = read_manifest(tiny_model / "standard")
    fast = read_manifest(tiny_model / "fast")
    assert (standard.precision, fast.precision) == ("fp32", "int8-weight-only")
    assert fast.quantization == {
        "method": "MatMulNBits",
        "bits": 8,
        "block_size": 32,
        "symmetric": True,
        "accuracy_level": 4,
    }
    assert standard.quantization is None
    for m in (standard, fast):
        # The GGUF's facts, not transformers' conversion: no BOS, EOS <|im_end|>, plus end markers.
        assert m.bos_policy == "never" and m.bos_token_id is None
        assert {0, 2} <= set(m.eos_token_ids)
        assert m.fim is None
        assert m.family == "llama" and m.num_layers == 2 and m.head_dim == 16
        assert m.graph == GENAI_GRAPH  # both: the standard model is the same graph in FP32
        # The weights beside the graph: ORT maps them (faster, smaller than inline).
        assert set(m.files) == {"model.onnx", "model.onnx.data", "tokenizer.json"}
        assert m.validation["top1_agreement"] >= MIN_AGREEMENT
        assert m.validation["onnx_vs_torch_greedy"]["identical"] == 3
        assert abs(m.validation["nll_standard"] - m.validation["nll_torch"]) <= MAX_NLL_GAP_FP32
        assert {"onnxruntime-gpu", "torch"} & set(m.tools)
        assert m.tools["builder:onnxruntime-genai"] == "0.18.0"
        for name, entry in m.files.items():
            assert sha256_file(tiny_model / m.variant / name) == entry.sha256


@pytest.mark.model  # it builds the tiny model's CUDA graphs (on the CPU here)
def test_cuda_build_replaces_a_cpu_build_and_runs(home_with_tiny: Path) -> None:
    import numpy as np

    from inference.model import load_model_dir
    from models.validate import teacher_forced_logits

    result = build(BuildRequest(tiny=True, cuda=True, bits=8), quiet=True)
    assert result.built  # the CPU build there is not what was asked for
    standard, fast = result.manifests["standard"], result.manifests["fast"]
    assert standard.graph == fast.graph == GENAI_CUDA_GRAPH
    assert standard.precision == "fp16" and fast.precision == "int8-weight-only"
    assert fast.fast_choice == {"device": "cuda", "bits": 8, "basis": "asked (--bits)"}
    figures = standard.validation
    assert abs(figures["nll_standard"] - figures["nll_torch"]) <= MAX_NLL_GAP_FP16
    assert build(BuildRequest(tiny=True, cuda=True, bits=8), quiet=True).built is False
    ids = [100, 200, 300, 400]
    for variant in VARIANTS:  # the engine's shared FP16 KV buffers, on the CPU provider
        model = load_model_dir(result.path / variant)
        assert model.runner.spec.kv_dtype is np.float16
        slot, _ = model.pool.lease(ids)
        model.runner.forward(slot, ids[:2])
        got = model.runner.forward(slot, ids[2:])[-1]  # after a cached prefix
        model.pool.release(slot)
        want = teacher_forced_logits(result.path / variant / "model.onnx", np.array(ids))[-1]
        np.testing.assert_allclose(got, want, atol=1e-2, rtol=0)


def test_second_build_is_a_no_op_and_force_rebuilds(home_with_tiny: Path) -> None:
    before = sha256_file(models_dir() / TINY_NAME / "fast" / "manifest.json")
    assert build(BuildRequest(tiny=True), quiet=True).built is False
    rebuilt = build(BuildRequest(tiny=True, force=True), quiet=True)
    assert rebuilt.built is True
    assert sha256_file(rebuilt.path / "fast" / "manifest.json") != before  # new build time/date
    assert not list(models_dir().glob(".*")), "no temporary or old folders left behind"


def test_block_size_is_recorded_and_a_different_one_rebuilds(home_with_tiny: Path) -> None:
    import onnx

    out = _cli("models", "build", "--tiny", "--quiet", "--block-size", "64", home=home_with_tiny)
    assert out.returncode == 0, out.stderr
    fast = models_dir() / TINY_NAME / "fast"
    assert read_manifest(fast).quantization["block_size"] == 64  # rebuilt: it was 32
    graph = onnx.load(str(fast / "model.onnx"), load_external_data=False).graph
    blocks = {
        a.i
        for n in graph.node
        if n.op_type == "MatMulNBits"
        for a in n.attribute
        if a.name == "block_size"
    }
    assert blocks == {64}
    assert build(BuildRequest(tiny=True, block_size=64), quiet=True).built is False
    assert build(BuildRequest(tiny=True), quiet=True).built is True  # back to the default 32
    assert read_manifest(fast).quantization["block_size"] == 32


def test_failed_build_leaves_nothing_and_keeps_the_previous_model(
    home_with_tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = models_dir() / TINY_NAME
    before = {p: sha256_file(p) for p in target.rglob("*") if p.is_file()}

    def broken_validation(*args: object, **kwargs: object) -> dict:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(build_module, "validate", broken_validation)
    with pytest.raises(BuildError, match="disk full"):
        build(BuildRequest(tiny=True, force=True), quiet=True)
    assert {p: sha256_file(p) for p in target.rglob("*") if p.is_file()} == before
    assert not list(models_dir().glob(".*"))


@pytest.mark.model  # it builds the tiny model up to its quantization
def test_interrupted_build_leaves_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_build_graph = build_module.build_graph

    def interrupt(hf_dir: Path, out_dir: Path, scheme: object, python: Path, cuda: bool) -> Path:
        if scheme is not None:  # the fast model, after the standard one was built
            raise KeyboardInterrupt
        return real_build_graph(hf_dir, out_dir, scheme, python, cuda)

    monkeypatch.setattr(build_module, "build_graph", interrupt)
    with pytest.raises(KeyboardInterrupt):
        build(BuildRequest(tiny=True), quiet=True)
    assert list(models_dir().iterdir()) == []


def test_missing_gguf_is_a_one_line_error(home: Path) -> None:
    # The file is named before the build's tools are looked for (the builder is missing here).
    no_builder = str(home / "no-builder" / "python")
    result = _cli(
        "models",
        "build",
        "--from-gguf",
        str(home / "nope.gguf"),
        home=home,
        FASTCOMPLETE_BUILDER_PYTHON=no_builder,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == f"fastcomplete: error: GGUF file not found: {home}/nope.gguf"


def _small_gguf(path: Path) -> Path:
    """A small GGUF as llama.cpp lays one out: metadata (a token list among it), then tensors,
    the last a small norm."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(300)])
    writer.add_tensor("token_embd.weight", np.ones((300, 64), dtype=np.float32))
    writer.add_tensor("output_norm.weight", np.ones(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_gguf_cut_short_is_named_before_anything_is_built(tmp_path: Path) -> None:
    whole = _small_gguf(tmp_path / "whole.gguf")
    assert check_gguf(whole) == whole
    data = whole.read_bytes()
    cut = tmp_path / "cut.gguf"
    for size in (6, 30, 500, 4000, len(data) // 2, len(data) - 300):  # header, tokens, tensors
        cut.write_bytes(data[:size])
        with pytest.raises(SourceError, match="corrupt GGUF"):
            check_gguf(cut)


def test_corrupt_gguf_is_refused(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Refused from the file alone: the builder is missing here, and no build tool is looked for.
    monkeypatch.setenv("FASTCOMPLETE_BUILDER_PYTHON", str(tmp_path / "no-builder" / "python"))
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"PK\x03\x04" + b"\0" * 1000)
    with pytest.raises(SourceError, match="not a GGUF file"):
        build(BuildRequest(from_gguf=junk), quiet=True)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 64)
    with pytest.raises(SourceError, match="corrupt GGUF"):
        build(BuildRequest(from_gguf=truncated), quiet=True)
    assert not (home / "models").exists() or not any((home / "models").iterdir())


def test_unsupported_architecture_is_refused(home: Path, tiny_model: Path, tmp_path: Path) -> None:
    hf = tmp_path / "gpt2ish"
    hf.mkdir()
    config = json.loads((tiny_model / "hf" / "config.json").read_text())
    config["model_type"] = "gpt2"
    (hf / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "model.safetensors"):
        (hf / name).symlink_to(tiny_model / "hf" / name)
    result = _cli("models", "build", "--from-hf", str(hf), home=home)
    assert result.returncode == 1
    assert "architecture 'gpt2' is not supported" in result.stderr


def test_verify_finds_corruption(home_with_tiny: Path) -> None:
    assert all(not s.problems for s in verify(TINY_NAME))
    model = models_dir() / TINY_NAME / "fast" / "model.onnx"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    problems = {s.variant: s.problems for s in verify(TINY_NAME)}
    assert problems["standard"] == []
    assert "sha256 mismatch" in problems["fast"][0]
    result = _cli("models", "verify", TINY_NAME, home=home_with_tiny)
    assert result.returncode == 1 and "sha256 mismatch" in result.stdout


def test_list_json_shows_both_variants(home_with_tiny: Path) -> None:
    result = _cli("models", "list", "--json", home=home_with_tiny)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["name"], r["variant"]) for r in rows] == [(TINY_NAME, v) for v in VARIANTS]
    assert {r["precision"] for r in rows} == {"fp32", "int8-weight-only"}
    assert all(r["ok"] and r["validation"]["top1_agreement"] >= MIN_AGREEMENT for r in rows)
    assert len(list_models()) == 2


def test_from_hf_records_a_fim_template(home: Path, tiny_model: Path, tmp_path: Path) -> None:
    """A user's model whose tokenizer has StarCoder FIM tokens gets the template in its manifest."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = tmp_path / "coder"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model / "hf")
    tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<fim_prefix>", "<fim_suffix>", "<fim_middle>"]}
    )
    model = AutoModelForCausalLM.from_pretrained(tiny_model / "hf")
    model.resize_token_embeddings(len(tokenizer))
    model.save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    result = build(BuildRequest(from_hf=hf), quiet=True)
    assert result.name == "coder"
    fim = read_manifest(result.path / "fast").fim
    assert fim is not None and (fim.prefix, fim.suffix, fim.middle) == (
        "<fim_prefix>",
        "<fim_suffix>",
        "<fim_middle>",
    )


@pytest.mark.real_model
def test_real_models_are_built_and_valid(real_model: Path) -> None:
    fast = read_manifest(real_model / "fast")
    standard = read_manifest(real_model / "standard")
    assert fast.validation["top1_agreement"] >= MIN_AGREEMENT
    assert fast.validation["nll_fast"] < fast.validation["nll_standard"] + 0.1
    assert (standard.num_layers, standard.num_kv_heads, standard.head_dim) == (30, 3, 64)
    assert standard.eos_token_ids[:2] == [0, 2] and standard.bos_policy == "never"
    assert all(not s.problems for s in verify(real_model.name))
    # The GGUF's own chat template is recorded, and explain/refactor prompts render with it.
    assert standard.chat_template and "<|im_start|>" in standard.chat_template
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert render_chat(standard.chat_template, chat).endswith("<|im_start|>assistant\n")


CODE_SAMPLES = (
    "def f(x):\n    return x",
    "    if n == 0:\n        return 1",
    "# café ünïcode 日本\nx = {'a' : [1 , 2]}",
)


def _hf_tokenizer_agrees(hf: Path) -> None:
    """The folder's tokenizer reads the same through `tokenizers` and transformers (as vLLM
    and other consumers load it): same ids, exact round trips."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    config = json.loads((hf / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    raw = Tokenizer.from_file(str(hf / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(hf)
    # What a Llama's generate() takes, no more (`transformers serve` passes all of it on).
    assert set(auto("x = 1")) == {"input_ids", "attention_mask"}
    for text in CODE_SAMPLES:
        ids = raw.encode(text, add_special_tokens=False).ids
        assert auto(text, add_special_tokens=False)["input_ids"] == ids
        assert auto.decode(ids) == text
        assert raw.decode(ids) == text
    spm = hf / "tokenizer.model"
    assert not spm.exists() or spm.read_bytes()[:4] != b"GGUF"


def test_the_tiny_hf_folder_reads_the_same_everywhere(tiny_model: Path) -> None:
    _hf_tokenizer_agrees(tiny_model / "hf")


def test_the_real_hf_folder_reads_the_same_everywhere(real_model: Path) -> None:
    _hf_tokenizer_agrees(real_model / "hf")


@pytest.mark.model  # the tiny model's CUDA graphs with this device's default fast model
def test_cuda_default_fast_model_is_the_fp16_graph_loaded_once(home_with_tiny: Path) -> None:
    from inference.engine import Engine, EngineConfig
    from inference.loading import same_graph
    from inference.router import FAST, STANDARD

    result = build(BuildRequest(tiny=True, cuda=True), quiet=True)
    fast = result.manifests["fast"]
    assert fast.precision == "fp16" and fast.quantization is None
    assert fast.fast_choice["bits"] == 16 and fast.fast_choice["basis"].startswith("default")
    assert fast.validation["top1_agreement"] == 1.0
    assert same_graph(result.path / "fast", result.path / "standard")
    engine = Engine(EngineConfig(model_name=result.name, kv_store_dir=None))
    assert engine.router.model(FAST) is engine.router.model(STANDARD)
