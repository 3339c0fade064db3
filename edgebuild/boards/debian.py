"""The ARM userland of an emulated board, from a Debian mirror, without root or dpkg.

A board needs an aarch64 Python and the C libraries ONNX Runtime links against; it
needs no package manager, no maintainer scripts and no init. So the few packages are
taken straight from the mirror and unpacked, each one checked the way apt checks it:

    InRelease ── gpgv + the machine's Debian keyring ──▶ SHA256 of Packages.xz
    Packages.xz ── that SHA256 ──▶ each package's version, file and SHA256
    pool/…/*.deb ── that SHA256 ──▶ ar ▸ data.tar.xz ▸ unpacked under ROOT

The mirror itself is plain HTTP and untrusted: nothing it sends is used before its
digest has been checked against a signed statement. Links inside a package that point
at an absolute path are made relative, so they resolve inside ROOT and never on this
machine's own /usr.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import re
import shutil
import subprocess
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from edgebuild.errors import BoardError

DEFAULT_MIRROR = "http://deb.debian.org/debian"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
MAX_INDEX = 64 * 1024**2  # Packages.xz of bookworm main arm64 is 8.7 MB
MAX_DEB = 256 * 1024**2
TIMEOUT_S = 120.0
# Needed only by maintainer scripts or a package manager, never by a Python process.
NOT_AT_RUN_TIME = frozenset({"debconf", "perl-base", "dpkg", "install-info", "tzdata",
                             "readline-common", "libc-bin", "base-files", "debianutils",
                             "sensible-utils", "usrmerge", "init-system-helpers"})


@dataclass(frozen=True)
class Deb:
    name: str
    version: str
    filename: str  # the pool path on the mirror
    sha256: str
    size: int
    depends: tuple[tuple[str, ...], ...]  # each a list of alternatives, names only


def _get(url: str, limit: int) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            data: bytes = response.read(limit + 1)
    except OSError as exc:
        raise BoardError(f"cannot download {url}: {exc}",
                             "check the network reaches the Debian mirror, or pass "
                             "another with --mirror") from exc
    if len(data) > limit:
        raise BoardError(f"{url} is larger than {limit} bytes: refusing it")
    return data


def _checked(data: bytes, sha256: str, what: str) -> bytes:
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise BoardError(f"{what} does not match the signed SHA256 ({actual[:16]}… ≠ "
                             f"{sha256[:16]}…): the mirror sent something else",
                             "try again, or another mirror (--mirror)")
    return data


def signed_release(mirror: str, suite: str) -> str:
    """The suite's InRelease, its signature checked by gpgv against the Debian keyring."""
    gpgv = shutil.which("gpgv")
    if gpgv is None or not KEYRING.is_file():
        raise BoardError(f"cannot check the mirror's signature: needs gpgv and {KEYRING}",
                             "install the packages gpgv and debian-archive-keyring")
    signed = _get(f"{mirror}/dists/{suite}/InRelease", 16 * 1024**2)
    done = subprocess.run([gpgv, "--keyring", str(KEYRING), "--output", "-", "-"],
                          input=signed, capture_output=True, timeout=60, check=False)
    if done.returncode != 0:
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        raise BoardError(f"the mirror's InRelease for {suite} is not signed by a Debian "
                             f"key: {last[0][:200]}", "use a Debian mirror (--mirror)")
    return done.stdout.decode()


def packages_index(mirror: str, suite: str, arch: str) -> dict[str, Deb]:
    """Every package of `suite`'s main component for `arch`, from its signed index."""
    release = signed_release(mirror, suite)
    name = f"main/binary-{arch}/Packages.xz"
    match = re.search(rf"^ ([0-9a-f]{{64}})\s+\d+\s+{re.escape(name)}$", release, re.MULTILINE)
    if match is None:
        raise BoardError(f"the signed InRelease of {suite} lists no {name}")
    data = _checked(_get(f"{mirror}/dists/{suite}/{name}", MAX_INDEX), match.group(1), name)
    return parse_packages(lzma.decompress(data).decode())


def parse_packages(text: str) -> dict[str, Deb]:
    """A Packages file's stanzas; a virtual name (Provides) maps to its first provider."""
    debs: dict[str, Deb] = {}
    provides: dict[str, str] = {}
    for stanza in text.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z0-9-]+): ?(.*)$", stanza, re.MULTILINE))
        if "Package" not in fields or "SHA256" not in fields:
            continue
        depends = ", ".join(f for f in (fields.get("Pre-Depends"), fields.get("Depends")) if f)
        deb = Deb(fields["Package"], fields["Version"], fields["Filename"], fields["SHA256"],
                  int(fields["Size"]), tuple(
                      tuple(_name(alt) for alt in clause.split("|"))
                      for clause in depends.split(",") if clause.strip()))
        debs.setdefault(deb.name, deb)
        for virtual in fields.get("Provides", "").split(","):
            if virtual.strip():
                provides.setdefault(_name(virtual), deb.name)
    for virtual, real in provides.items():
        debs.setdefault(virtual, debs[real])
    return debs


def _name(relation: str) -> str:
    """`libc6 (>= 2.34)` or `python3:any` → the package name."""
    return relation.strip().split(" ", 1)[0].split(":", 1)[0]


def closure(index: dict[str, Deb], roots: tuple[str, ...]) -> list[Deb]:
    """`roots` and everything they depend on (the first alternative the index has), but
    what only a package manager needs (NOT_AT_RUN_TIME); sorted by name."""
    chosen: dict[str, Deb] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in index:
            raise BoardError(f"the Debian index has no package {name!r}")
        deb = index[name]
        if deb.name in chosen or deb.name in NOT_AT_RUN_TIME:
            continue
        chosen[deb.name] = deb
        for clause in deb.depends:
            pick = next((alt for alt in clause if alt in index), None)
            if pick is not None:
                todo.append(pick)
    return sorted(chosen.values(), key=lambda d: d.name)


def install(mirror: str, debs: list[Deb], root: Path) -> None:
    """Download each package, check its SHA256 and unpack its files under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for merged in ("bin", "sbin", "lib"):  # the usr-merged layout base-files makes
        (root / "usr" / merged).mkdir(parents=True, exist_ok=True)
        if not (root / merged).exists():
            (root / merged).symlink_to(f"usr/{merged}")
    for deb in debs:
        data = _checked(_get(f"{mirror}/{deb.filename}", MAX_DEB), deb.sha256, deb.filename)
        unpack(data, root, deb.name)


def unpack(deb: bytes, root: Path, name: str) -> None:
    """The files of a .deb (an ar archive holding data.tar.xz) under `root`."""
    members = _ar_members(deb, name)
    data_name = next((m for m in members if m.startswith("data.tar")), None)
    if data_name is None or data_name not in ("data.tar.xz", "data.tar.gz", "data.tar"):
        raise BoardError(f"package {name} has no data.tar.xz (members: "
                             f"{', '.join(members)[:200]})")
    with tarfile.open(fileobj=io.BytesIO(members[data_name])) as tar:
        tar.extractall(root, filter=_relative_links)


def _ar_members(data: bytes, name: str) -> dict[str, bytes]:
    if not data.startswith(b"!<arch>\n"):
        raise BoardError(f"package {name} is not an ar archive")
    members: dict[str, bytes] = {}
    at = 8
    while at + 60 <= len(data):
        header = data[at:at + 60]
        member = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        members[member] = data[at + 60:at + 60 + size]
        at += 60 + size + (size % 2)
    return members


def _relative_links(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's `data` filter (nothing outside `dest`, no device files), after an
    absolute symlink target is rewritten relative to the link (it resolves in ROOT)."""
    if member.issym() and member.linkname.startswith("/"):
        where = PurePosixPath("/", member.name).parent
        member = member.replace(linkname=os.path.relpath(member.linkname, where),
                                deep=False)
    return tarfile.data_filter(member, dest)
