"""Which public keys a device trusts to sign artifacts (see :mod:`edgekit.trust.signing`).

Keys come from three places, all of which count (their union is trusted):

1. an explicit list given by the caller (``edgekit.load(path, trusted_keys=[...])``): key
   files, folders of ``*.pub`` files, or :class:`~edgekit.trust.signing.PublicKey` objects;
2. the environment variable ``EDGEKIT_TRUSTED_KEYS``: paths (files or folders) separated by
   ``os.pathsep`` (``:`` on Linux);
3. the device's configuration folders, every ``*.pub`` file in
   ``/etc/edgekit/trusted_keys/`` (system-wide) and ``$XDG_CONFIG_HOME/edgekit/trusted_keys/``
   (default ``~/.config/edgekit/trusted_keys/``, per user).

When no key is configured anywhere, nothing is required and artifacts load as before
(hashes still catch corruption; nothing catches tampering). As soon as one key is
configured, unsigned artifacts and artifacts signed by other keys are refused.

Configuration fails closed: a path named explicitly or in the environment that is missing
or yields no key (an empty folder, one holding only other files), a device folder holding
files none of which is a key (``*.pub`` or ``*.pem``), and any key file that does not parse
(a private key among them), is a
:class:`~edgekit.errors.SigningKeyError`, never silently skipped, because skipping the only
configured key would turn verification off. A missing configuration folder is just "no keys
there". Stdlib only (no platformdirs on the device).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from edgekit.errors import SigningKeyError
from edgekit.trust.signing import PublicKey, load_public_key

ENV_TRUSTED_KEYS = "EDGEKIT_TRUSTED_KEYS"
SYSTEM_KEY_DIR = "/etc/edgekit/trusted_keys"
KEY_SUFFIX = ".pub"
KEY_SUFFIXES = (".pub", ".pem")  # keygen writes PEM; a key saved as .pem is read too
MAX_KEYS_PER_DIR = 1024  # a trust folder holds a handful; a huge one is a mistake

KeySpec = str | os.PathLike[str] | PublicKey


def user_key_dir(environ: Mapping[str, str] | None = None) -> str:
    """``$XDG_CONFIG_HOME/edgekit/trusted_keys``, default ``~/.config/edgekit/trusted_keys``."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "edgekit", "trusted_keys")


def default_key_dirs(environ: Mapping[str, str] | None = None) -> list[str]:
    return [SYSTEM_KEY_DIR, user_key_dir(environ)]


def keys_in_dir(folder: str | os.PathLike[str], origin: str = "",
                required: bool = True) -> list[PublicKey]:
    """Every key file (``*.pub``, ``*.pem``) in ``folder`` (not recursive), in name order.

    Fails closed: a folder named explicitly (``required``) that yields no key is an error
    naming it and what it holds, never "no keys" (which would turn verification off); so is
    any folder holding files of which none is a key."""
    folder = Path(folder)
    where = f"trusted key folder {str(folder)!r}" + (f" (from {origin})" if origin else "")
    try:
        visible = sorted(entry.name for entry in os.scandir(folder)
                         if not entry.name.startswith("."))
    except OSError as exc:
        raise SigningKeyError(f"{where}: cannot list it ({exc.strerror}); expected a "
                              "readable folder") from exc
    names = [name for name in visible if name.endswith(KEY_SUFFIXES)]
    if len(names) > MAX_KEYS_PER_DIR:
        raise SigningKeyError(f"{where}: expected at most {MAX_KEYS_PER_DIR} key files, got "
                              f"{len(names)}")
    if not names and (required or visible):
        held = ", ".join(visible[:5]) + (" ..." if len(visible) > 5 else "") or "nothing"
        raise SigningKeyError(
            f"{where} holds no public key: expected {' or '.join('*' + s for s in KEY_SUFFIXES)}"
            f" files (PEM or base64 Ed25519 public keys from edgekit keygen), got {held}; "
            "a configured trust source without keys would verify nothing")
    return [load_public_key(folder / name) for name in names]


def keys_at(path: str | os.PathLike[str], origin: str) -> list[PublicKey]:
    """The key in a file, or the keys in a folder; a missing path, or a folder without a
    key, is an error naming where it was configured (``origin``)."""
    name = os.fspath(path)
    if os.path.isdir(name):
        return keys_in_dir(name, origin, required=True)
    if not os.path.lexists(name):
        raise SigningKeyError(f"trusted key {name!r} (from {origin}) does not exist; expected "
                              f"a public key file or a folder of *{KEY_SUFFIX} files")
    return [load_public_key(name)]


def discover_trusted_keys(explicit: Iterable[KeySpec] | None = None, *,
                          environ: Mapping[str, str] | None = None,
                          config_dirs: Sequence[str | os.PathLike[str]] | None = None
                          ) -> tuple[PublicKey, ...]:
    """Every trusted public key: ``explicit``, then ``EDGEKIT_TRUSTED_KEYS`` in ``environ``
    (default ``os.environ``), then the ``*.pub`` files of ``config_dirs`` (default
    :func:`default_key_dirs`; pass ``[]`` to ignore the device's folders). Duplicates (the
    same key in two places) are kept once, with the first place as their source."""
    environ = os.environ if environ is None else environ
    found: list[PublicKey] = []
    if isinstance(explicit, str | os.PathLike | PublicKey):
        explicit = [explicit]  # one key given bare, not a string iterated char by char
    for spec in explicit or ():
        if isinstance(spec, PublicKey):
            found.append(spec)
        elif isinstance(spec, str | os.PathLike):
            found.extend(keys_at(spec, "trusted_keys"))
        else:
            raise SigningKeyError(f"trusted_keys: expected paths or PublicKey objects, got "
                                  f"{type(spec).__name__}")
    for part in environ.get(ENV_TRUSTED_KEYS, "").split(os.pathsep):
        if part.strip():
            found.extend(keys_at(part.strip(), f"${ENV_TRUSTED_KEYS}"))
    folders = default_key_dirs(environ) if config_dirs is None else config_dirs
    for folder in folders:
        if os.path.isdir(folder):  # an empty device folder: nothing configured there
            found.extend(keys_in_dir(folder, "the device's trusted-key folder", required=False))
    unique: dict[bytes, PublicKey] = {}
    for key in found:
        unique.setdefault(key.raw, key)
    return tuple(unique.values())
