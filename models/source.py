"""Where model weights come from: a catalogue entry (models/catalogue.py) or a file/dir the user
names. Nothing is fetched from a model hub."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)  # what the gguf package's reader (models/convert.py) reads
# The GGUF metadata value types of a fixed size (bytes), and the two of variable length.
GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
GGUF_STRING, GGUF_ARRAY = 8, 9
GGUF_UINT32 = 4
GGUF_MAX_DIMS = 4  # a tensor's dimensions at most (GGML_MAX_DIMS)
GGUF_ALIGNMENT = 32  # where the tensor data starts, unless general.alignment says otherwise


class SourceError(Exception):
    """The weights to build from are missing, corrupt, or of an unsupported kind."""


@dataclass(frozen=True)
class Source:
    kind: str  # "gguf" or "hf"
    path: Path  # the .gguf file, or the HF model directory
    origin: str  # human-readable provenance for the manifest


def check_gguf(path: Path) -> Path:
    """`path`, when it is a whole GGUF file; else a SourceError naming it (missing, unreadable, not
    a GGUF, or cut short). The standard library reads its header, so this runs before anything
    looks for the build's tools (which an installed server lacks: models/build_env.py)."""
    if not path.is_file():
        raise SourceError(f"GGUF file not found: {path}")
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
            if magic != GGUF_MAGIC:
                raise SourceError(
                    f"{path} is not a GGUF file (bad magic {magic!r}): re-download it"
                )
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                problem = _header_problem(data)
    except OSError as exc:
        raise SourceError(f"cannot read GGUF file {path}: {exc.strerror or exc}") from exc
    if problem:
        raise SourceError(f"{path}: corrupt GGUF file ({problem}): re-download it")
    return path


class _Corrupt(Exception):
    pass


class _Header:
    """A cursor over a GGUF file's header: the metadata, then one entry per tensor."""

    def __init__(self, data: mmap.mmap, order: str) -> None:
        self.data, self.order, self.at = data, order, 8  # after the magic and the version

    def skip(self, size: int) -> int:
        if size > len(self.data) - self.at:
            raise _Corrupt(f"it ends at byte {len(self.data)}, inside its header")
        self.at += size
        return self.at - size

    def uint(self, size: int) -> int:
        start = self.skip(size)
        return int.from_bytes(self.data[start : start + size], self.order)

    def string(self) -> bytes:
        size = self.uint(8)
        start = self.skip(size)
        return self.data[start : start + size]

    def value(self, kind: int) -> None:
        if kind in GGUF_SIZES:
            self.skip(GGUF_SIZES[kind])
        elif kind == GGUF_STRING:
            self.skip(self.uint(8))
        elif kind == GGUF_ARRAY:
            item, count = self.uint(4), self.uint(8)
            if item in GGUF_SIZES:
                self.skip(count * GGUF_SIZES[item])
                return
            self.fits(count, 8)
            for _ in range(count):
                self.value(item)
        else:
            raise _Corrupt(f"unknown metadata type {kind} at byte {self.at - 4}")

    def fits(self, count: int, least: int) -> None:
        """`count` entries of at least `least` bytes each fit in what is left."""
        if count * least > len(self.data) - self.at:
            raise _Corrupt(f"{count} entries do not fit in its {len(self.data)} bytes")


def _header_problem(data: mmap.mmap) -> str | None:
    """What is wrong with a GGUF file's header (its tensor data starting within the file
    included), or None."""
    version = int.from_bytes(data[4:8], "little")
    order = "big" if version & 0xFFFF == 0 else "little"  # a file written on a big-endian machine
    version = int.from_bytes(data[4:8], order)
    if version not in GGUF_VERSIONS:
        return f"version {version}; readable: {', '.join(map(str, GGUF_VERSIONS))}"
    header = _Header(data, order)
    alignment, offsets = GGUF_ALIGNMENT, []
    try:
        tensors, entries = header.uint(8), header.uint(8)
        header.fits(entries, 12)  # a key's length and a value's type, at least
        for _ in range(entries):
            key, kind = header.string(), header.uint(4)
            if key == b"general.alignment" and kind == GGUF_UINT32:
                alignment = header.uint(4) or GGUF_ALIGNMENT
            else:
                header.value(kind)
        header.fits(tensors, 24)  # a name's length, dimensions, type and offset, at least
        for _ in range(tensors):
            header.skip(header.uint(8))
            dims = header.uint(4)
            if dims > GGUF_MAX_DIMS:
                return f"a tensor of {dims} dimensions at byte {header.at - 4}"
            header.skip(8 * dims + 4)
            offsets.append(header.uint(8))
    except _Corrupt as exc:
        return str(exc)
    start = -(-header.at // alignment) * alignment
    if offsets and start + max(offsets) >= len(data):
        return f"its tensor data is cut short at byte {len(data)}"
    return None


def check_named_source(gguf: Path | None, hf: Path | None) -> None:
    """The file or folder the person named (`--from-gguf`, `--from-hf`), checked before anything
    looks for the build's tools: a missing or damaged file is said first."""
    if gguf is not None:
        check_gguf(gguf)
    if hf is not None:
        check_hf_dir(hf)


def check_hf_dir(path: Path) -> Path:
    if not path.is_dir():
        raise SourceError(f"model directory not found: {path}")
    for name in ("config.json", "tokenizer.json"):
        if not (path / name).is_file():
            raise SourceError(f"{path} has no {name}: pass a Hugging Face model directory")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise SourceError(f"{path} has no weights (*.safetensors or *.bin)")
    return path
