"""Who wrote a shared-cache entry: Ed25519 signatures and the keys a reader trusts.

Digests say an entry is whole; only a signature says who made it. Every entry a
machine uploads carries its writer's signature over one canonical statement:

    {"statement": "edgebuild-shared-cache-entry/1", "key": <stage key>,
     "format": ..., "files": {name: sha256}, "sizes": {name: bytes},
     "metadata": sha256(canonical metadata), "writer": sha256(raw public key)}

and a reader accepts an entry only when the signature verifies *and* the writer's
public key is one it was configured to trust (its own key, `--shared-cache-trust
FILE`, $EDGEBUILD_SHARED_CACHE_TRUST, the trusted-keys file in the config dir).
As in TUF, the trust root lives on the reader; the store never says whom to trust.
The statement names the stage key, so a signed entry cannot be replayed under
another key, and the metadata digest covers `main`, `notes` and every figure.

Keys: a PKCS#8 PEM private key (0600) and a one-line OpenSSH public key
(`ssh-ed25519 AAAA… comment`) beside it; `edgebuild cache keygen` makes them.
`cryptography` is imported only here, and only when a shared store is used.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from edgebuild.core.digest import canonical_json, digest_json
from edgebuild.errors import EdgebuildError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

STATEMENT = "edgebuild-shared-cache-entry/1"
KEY_ENV = "EDGEBUILD_SHARED_CACHE_KEY"
TRUST_ENV = "EDGEBUILD_SHARED_CACHE_TRUST"
ANY = "any"  # trust every writer: a private store only this user can write
HEX64 = r"^[0-9a-f]{64}$"
_INSTALL = "pip install 'edgebuild[distributed]' (it brings `cryptography`)"


def config_dir() -> Path:
    """$XDG_CONFIG_HOME/edgebuild, else ~/.config/edgebuild."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "edgebuild"


def default_key_path() -> Path:
    return config_dir() / "shared-cache-key.pem"


def trusted_keys_file() -> Path:
    """One public key a line, like ssh's authorized_keys; read when it exists."""
    return config_dir() / "shared-cache-trusted.pub"


def public_path(private: Path) -> Path:
    return private.with_name(private.name.removesuffix(".pem") + ".pub")


class Signature(BaseModel):
    """What an uploaded manifest carries under "signature"."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    writer: str = Field(pattern=HEX64, description="sha256 of the raw 32-byte public key")
    public_key: str = Field(max_length=64, description="base64 of the raw public key")
    signature: str = Field(max_length=128, description="base64 Ed25519 signature")


def statement(key: str, fmt: str, files: dict[str, str], sizes: dict[str, int],
              metadata: dict[str, Any], writer: str) -> bytes:
    """The bytes a writer signs: everything a reader will use, and who wrote it."""
    return canonical_json({
        "statement": STATEMENT, "key": key, "format": fmt, "files": files, "sizes": sizes,
        "metadata": digest_json(metadata), "writer": writer,
    }).encode("utf-8")


def writer_id(raw_public: bytes) -> str:
    return hashlib.sha256(raw_public).hexdigest()


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise EdgebuildError("signing shared-cache entries needs `cryptography`",
                             _INSTALL) from None
    return ed25519


def _raw_public(private: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return private.public_key().public_bytes(serialization.Encoding.Raw,
                                             serialization.PublicFormat.Raw)


@dataclass(frozen=True)
class Signer:
    """A writer's private key: signs the statements of the entries it uploads."""

    private: Ed25519PrivateKey
    path: Path

    @property
    def raw_public(self) -> bytes:
        return _raw_public(self.private)

    @property
    def writer(self) -> str:
        return writer_id(self.raw_public)

    def sign(self, key: str, fmt: str, files: dict[str, str], sizes: dict[str, int],
             metadata: dict[str, Any]) -> Signature:
        signed = self.private.sign(statement(key, fmt, files, sizes, metadata, self.writer))
        return Signature(writer=self.writer,
                         public_key=base64.b64encode(self.raw_public).decode(),
                         signature=base64.b64encode(signed).decode())

    def public_line(self) -> str:
        from cryptography.hazmat.primitives import serialization

        line = self.private.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
        return f"{line} edgebuild@{socket.gethostname()}"


def load_signer(path: Path) -> Signer:
    """The private key at `path` (PKCS#8 PEM or an OpenSSH ed25519 key)."""
    ed25519 = _crypto()
    from cryptography.hazmat.primitives import serialization

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EdgebuildError(f"cannot read the shared-cache signing key {path}: "
                             f"{exc.strerror or exc}",
                             "create one with `edgebuild cache keygen`") from None
    private: Any
    try:
        if b"OPENSSH PRIVATE KEY" in data:
            private = serialization.load_ssh_private_key(data, password=None)
        else:
            private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise EdgebuildError(f"{path} is not an unencrypted private key ({exc})",
                             "create one with `edgebuild cache keygen`") from None
    if not isinstance(private, ed25519.Ed25519PrivateKey):
        raise EdgebuildError(f"{path} is not an Ed25519 key",
                             "create one with `edgebuild cache keygen`")
    return Signer(private, path)


def generate(path: Path) -> Signer:
    """A new key pair at `path` (0600, its folder 0700) and `<name>.pub` beside it.

    Written to a temporary name and linked into place, so two runs creating the
    default key at once end with one key, never a half-written one."""
    ed25519 = _crypto()
    from cryptography.hazmat.primitives import serialization

    private = ed25519.Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    try:
        os.link(tmp, path)  # fails if another process made the key first: use theirs
    except FileExistsError:
        return load_signer(path)
    finally:
        tmp.unlink()
    signer = Signer(private, path)
    public_path(path).write_text(signer.public_line() + "\n")
    return signer


def signer_for(path: Path | None) -> Signer:
    """The writer key: `path` (--shared-cache-key / $EDGEBUILD_SHARED_CACHE_KEY), else the
    default key in the config dir, generated on first use."""
    if path is not None:
        return load_signer(path)
    default = default_key_path()
    return load_signer(default) if default.exists() else generate(default)


def parse_public(text: str, where: str) -> bytes:
    """A raw 32-byte Ed25519 public key from one line: OpenSSH (`ssh-ed25519 AAAA…`),
    or the base64 of the raw key."""
    ed25519 = _crypto()
    from cryptography.hazmat.primitives import serialization

    line = text.strip()
    try:
        if line.startswith("ssh-ed25519 "):
            key = serialization.load_ssh_public_key(" ".join(line.split()[:2]).encode())
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise ValueError("not an Ed25519 key")
            return _raw_public_of(key)
        raw = base64.b64decode(line.split()[0], validate=True)
        if len(raw) != 32:
            raise ValueError("not 32 bytes")
        return raw
    except (ValueError, IndexError) as exc:
        raise EdgebuildError(f"{where}: not an Ed25519 public key ({exc})",
                             "one `ssh-ed25519 AAAA…` line a key, as `edgebuild cache "
                             "keygen` prints") from None


def _raw_public_of(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    raw: bytes = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw


def read_public_keys(path: Path) -> list[bytes]:
    """Every key in a file of public keys (blank lines and # comments skipped)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise EdgebuildError(f"cannot read trusted key file {path}: {exc.strerror or exc}",
                             "--shared-cache-trust takes files of public keys, or `any`") \
            from None
    return [parse_public(line, f"{path}:{n}") for n, line in enumerate(lines, 1)
            if line.strip() and not line.lstrip().startswith("#")]


@dataclass(frozen=True)
class Trust:
    """Whom a reader believes: the writers whose public keys it holds, or anyone."""

    keys: dict[str, bytes] = field(default_factory=dict)  # writer id -> raw public key
    anyone: bool = False  # `any`: unsigned entries too (never measurements/references)

    @classmethod
    def configure(cls, specs: list[str], own: bytes | None) -> Trust:
        """`specs` from --shared-cache-trust (else $EDGEBUILD_SHARED_CACHE_TRUST,
        os.pathsep-separated): key files or `any`; plus the reader's own key and the
        trusted-keys file in the config dir when it exists."""
        if not specs:
            specs = [s for s in os.environ.get(TRUST_ENV, "").split(os.pathsep) if s]
        keys: list[bytes] = [own] if own is not None else []
        anyone = False
        for spec in specs:
            if spec.strip().lower() == ANY:
                anyone = True
            else:
                keys += read_public_keys(Path(spec).expanduser())
        if trusted_keys_file().is_file():
            keys += read_public_keys(trusted_keys_file())
        return cls({writer_id(k): k for k in keys}, anyone)

    def verify(self, signature: Signature | None, signed: bytes | None) -> str:
        """'' when a trusted writer signed exactly `signed`, else why not."""
        if signature is None or signed is None:
            return "it is unsigned"
        try:
            raw = base64.b64decode(signature.public_key, validate=True)
            sig = base64.b64decode(signature.signature, validate=True)
        except ValueError:
            return "its signature is malformed"
        if writer_id(raw) != signature.writer:
            return "its signature names another writer than its key"
        if signature.writer not in self.keys:
            return f"its writer {signature.writer[:16]}… is not a trusted key"
        ed25519 = _crypto()
        from cryptography.exceptions import InvalidSignature

        try:
            ed25519.Ed25519PublicKey.from_public_bytes(self.keys[signature.writer]).verify(
                sig, signed)
        except (InvalidSignature, ValueError):
            return "its signature does not verify"
        return ""
