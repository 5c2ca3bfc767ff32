"""Bounded reading of an artifact's zip: nothing is decompressed before it is known to be
listed, unique and of a sane size, and every read is streamed and capped.

An artifact is untrusted input (it arrives over the network, from a USB stick). The zip's
central directory declares each member's name and sizes; those are checked first, against
fixed ceilings here and against the manifest's figures in :mod:`edgekit.artifact.archive`, so a
zip bomb (a small file declaring gigabytes) is refused while still a few kilobytes of
directory. ``zipfile`` never returns more than a member's declared size (it truncates the
inflated stream there and then checks the CRC), so a member that lies about its size fails
its CRC instead of filling the memory. Every failure of the zip layer (BadZipFile,
zlib.error, EOFError, struct.error, an unsupported compression...) becomes an
``ArtifactError`` naming the member.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from edgekit.errors import ArtifactError

MAX_MEMBERS = 32  # a manifest, a model per format and the test vectors: a handful
MAX_MANIFEST_BYTES = 4 << 20  # the manifest holds a profile and stage records: ~100 kB
MAX_MEMBER_BYTES = 1 << 30  # no model a small board runs is near 1 GiB
MAX_TOTAL_BYTES = 2 << 30
MAX_RATIO = 200  # int8 weights inflate ~1.1-10x; a zip bomb ~1000x
RATIO_FREE_BYTES = 1 << 20  # small members may compress as well as they like
CHUNK = 1 << 20
ALLOWED_COMPRESSION = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
# What a broken or hostile zip makes zipfile, zlib and struct raise.
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
              struct.error, ValueError, NotImplementedError, RuntimeError, OverflowError,
              UnicodeDecodeError, KeyError, IndexError, TypeError)


@contextmanager
def zip_errors(origin: str, what: str) -> Iterator[None]:
    """Turn what the zip layer raises into an ArtifactError naming ``what``."""
    try:
        yield
    except ArtifactError:
        raise
    except ZIP_ERRORS as exc:
        raise ArtifactError(f"{origin}: not a readable .edgekit artifact ({what}: corrupt or "
                            f"truncated zip: {type(exc).__name__}: {exc})") from exc


def open_regular(path: str) -> BinaryIO:
    """The artifact file opened for reading: a regular file, else a typed error (opened
    non-blocking and checked with fstat, so a FIFO in its place cannot hang the loader)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{path}: no such artifact file (expected a .edgekit file; "
                            f"{exc})") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ArtifactError(f"{path}: expected a regular .edgekit file, got a folder or "
                                "special file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def safe_member_name(name: str) -> bool:
    """A plain file name: no folders, no ``..``, no absolute or Windows paths, no controls."""
    return (0 < len(name) <= 128 and name not in (".", "..") and not name.startswith(".")
            and all(c.isprintable() and c not in '/\\:"*?<>|' for c in name))


def directory(archive: zipfile.ZipFile, origin: str) -> dict[str, zipfile.ZipInfo]:
    """The members by name, checked from the central directory alone (nothing inflated):
    at most MAX_MEMBERS, unique plain names, stored or deflated, unencrypted, within the
    size and compression-ratio ceilings."""
    infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        raise ArtifactError(f"{origin}: expected at most {MAX_MEMBERS} zip members, got "
                            f"{len(infos)}")
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        name = info.orig_filename
        if not safe_member_name(name) or name != info.filename:
            raise ArtifactError(f"{origin}: zip member {name[:80]!r}: expected a plain file "
                                "name (no folders, '..', absolute paths or control characters)")
        if name in members:
            raise ArtifactError(f"{origin}: zip member {name!r} appears twice (expected unique "
                                "names: which copy counts would be ambiguous)")
        if info.flag_bits & 0x1:
            raise ArtifactError(f"{origin}: zip member {name!r} is encrypted (expected plain "
                                "members)")
        if info.compress_type not in ALLOWED_COMPRESSION:
            raise ArtifactError(f"{origin}: zip member {name!r} uses compression method "
                                f"{info.compress_type}; expected stored or deflated")
        check_size(origin, name, info, MAX_MEMBER_BYTES)
        total += info.file_size
        members[name] = info
    if total > MAX_TOTAL_BYTES:
        raise ArtifactError(f"{origin}: members declare {total} bytes in all; expected at most "
                            f"{MAX_TOTAL_BYTES}")
    return members


def check_size(origin: str, name: str, info: zipfile.ZipInfo, limit: int,
               ratio_free: int = RATIO_FREE_BYTES) -> None:
    """The declared size within ``limit`` and, above ``ratio_free`` bytes, a plausible
    compression ratio."""
    if info.file_size > limit:
        raise ArtifactError(f"{origin}: zip member {name!r} declares {info.file_size} bytes; "
                            f"expected at most {limit}")
    if (info.file_size > ratio_free
            and info.file_size > MAX_RATIO * max(1, info.compress_size)):
        raise ArtifactError(f"{origin}: zip member {name!r} declares {info.file_size} bytes "
                            f"from {info.compress_size} compressed (expected a ratio of at "
                            f"most {MAX_RATIO}: a zip bomb?)")


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, origin: str,
                limit: int, ratio_free: int = RATIO_FREE_BYTES) -> tuple[bytes, str]:
    """A member's bytes and sha256, inflated in chunks and never past ``limit`` bytes or its
    declared size (the CRC is checked by zipfile at the end)."""
    name = info.orig_filename
    check_size(origin, name, info, limit, ratio_free)
    digest = hashlib.sha256()
    # one copy of the member in memory: BytesIO grows its own bytes object in place and
    # getvalue() hands that object out without copying (a list of chunks then b"".join held
    # every member twice at its peak: 3.1 GiB for two 1 GiB members)
    buffer = io.BytesIO()
    got = 0
    with zip_errors(origin, f"member {name!r}"), archive.open(info) as stream:
        while chunk := stream.read(CHUNK):
            got += len(chunk)
            if got > min(limit, info.file_size):
                raise ArtifactError(f"{origin}: zip member {name!r} inflates past its "
                                    f"declared {info.file_size} bytes (limit {limit})")
            digest.update(chunk)
            buffer.write(chunk)
    if got != info.file_size:
        raise ArtifactError(f"{origin}: zip member {name!r}: expected {info.file_size} bytes, "
                            f"got {got} (truncated)")
    return buffer.getvalue(), digest.hexdigest()
