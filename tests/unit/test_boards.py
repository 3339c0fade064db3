"""The emulated board's parts that need no emulator: the Debian index read and its
dependency closure, a package unpacked inside its root only, digests refused, the key,
`runs_on: {kind: emulated}` checked, and its latency never a figure (boards/,
core/target.py, execute/remote/probe.py)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from edgebuild.boards import debian, provision
from edgebuild.core.profile import TargetProfile
from edgebuild.core.target import Target
from edgebuild.errors import BoardError

PACKAGES = """\
Package: python3.11-minimal
Version: 3.11.2-6
Pre-Depends: libc6 (>= 2.35)
Depends: libpython3.11-minimal (= 3.11.2-6), zlib1g (>= 1:1.2.0)
Filename: pool/main/p/python3.11-minimal.deb
Size: 10
SHA256: {h}

Package: libpython3.11-minimal
Version: 3.11.2-6
Depends: libc6, debconf (>= 0.5) | debconf-2.0, media-types | mime-support
Filename: pool/main/p/libpython3.11-minimal.deb
Size: 10
SHA256: {h}

Package: libc6
Version: 2.36-9
Depends: libgcc-s1
Filename: pool/main/g/libc6.deb
Size: 10
SHA256: {h}

Package: libgcc-s1
Version: 12.2.0
Filename: pool/main/g/libgcc-s1.deb
Size: 10
SHA256: {h}

Package: zlib1g-real
Version: 1.2.13
Provides: zlib1g
Filename: pool/main/z/zlib1g.deb
Size: 10
SHA256: {h}

Package: mime-support
Version: 3.66
Filename: pool/main/m/mime-support.deb
Size: 10
SHA256: {h}

Package: debconf
Version: 1.5.82
Depends: perl-base
Filename: pool/main/d/debconf.deb
Size: 10
SHA256: {h}
""".format(h="0" * 64)


def test_the_closure_follows_depends_provides_and_alternatives_not_maintainer_tools() -> None:
    index = debian.parse_packages(PACKAGES)
    chosen = [d.name for d in debian.closure(index, ("python3.11-minimal",))]
    # Pre-Depends too; zlib1g through its provider; `media-types | mime-support`: the one
    # the index has; debconf (and so perl-base) only maintainer scripts need.
    assert chosen == ["libc6", "libgcc-s1", "libpython3.11-minimal", "mime-support",
                      "python3.11-minimal", "zlib1g-real"]
    with pytest.raises(BoardError, match=r"no package 'python3\.12'"):
        debian.closure(index, ("python3.12",))


def deb(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    """A .deb: an ar archive holding debian-binary and data.tar.xz of `members`."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                info = tarfile.TarInfo(member[0])
                info.size = len(member[1])
                tar.addfile(info, io.BytesIO(member[1]))
    out = bytearray(b"!<arch>\n")
    for name, content in ((b"debian-binary", b"2.0\n"), (b"data.tar.xz", data.getvalue())):
        out += (name + b"/").ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) \
            + b"100644".ljust(8) + str(len(content)).encode().ljust(10) + b"`\n"
        out += content + (b"\n" if len(content) % 2 else b"")
    return bytes(out)


def link(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info


def test_a_package_unpacks_inside_the_root_its_absolute_links_made_relative(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    debian.unpack(deb([("./usr/lib/aarch64-linux-gnu/libz.so.1.2.13", b"elf"),
                       link("./usr/lib/aarch64-linux-gnu/libz.so.1",
                            "/usr/lib/aarch64-linux-gnu/libz.so.1.2.13")]), root, "zlib1g")
    made = root / "usr/lib/aarch64-linux-gnu/libz.so.1"
    # Relative: it resolves in the root, never on this machine's own /usr.
    assert made.readlink() == Path("libz.so.1.2.13") and made.read_bytes() == b"elf"
    for bad in ([("../outside", b"x")], [link("./escape", "../../etc/passwd")]):
        with pytest.raises(tarfile.FilterError):
            debian.unpack(deb(bad), root, "hostile")  # type: ignore[arg-type]
    assert not (tmp_path / "outside").exists()


def test_a_file_whose_digest_differs_from_the_signed_one_is_refused() -> None:
    good = hashlib.sha256(b"package").hexdigest()
    assert debian._checked(b"package", good, "x.deb") == b"package"
    with pytest.raises(BoardError, match="does not match the signed SHA256"):
        debian._checked(b"another package", good, "x.deb")


def test_the_key_is_what_the_board_holds_and_no_board_is_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arch = provision.arch_of("aarch64")
    pins = {"numpy": "2.4.6", "onnxruntime": "1.32.0"}
    key = provision.board_key(arch, pins)
    assert len(key) == 64 and key == provision.board_key(arch, dict(reversed(pins.items())))
    assert key != provision.board_key(arch, {**pins, "onnxruntime": "1.31.0"})
    monkeypatch.setenv(provision.BOARDS_ENV, str(tmp_path))
    assert provision.find_board("aarch64") is None
    # A folder without its board.json (a board being made is under `.partial-…`) is none.
    (tmp_path / "aarch64" / provision.board_key(arch, provision.wheel_pins())).mkdir(
        parents=True)
    assert provision.find_board("aarch64") is None
    assert "onnxruntime" in provision.wheel_pins() and "torch" not in provision.wheel_pins()


def profile(**runs_on: object) -> TargetProfile:
    return TargetProfile.model_validate({
        "name": "pi", "description": "d", "backend": "onnxruntime",
        "device": {"kind": "cpu", "arch": "aarch64", "name": "Raspberry Pi 4"},
        "runs_on": runs_on})


def test_an_emulated_profile_names_the_device_arch() -> None:
    assert profile(kind="emulated", arch="aarch64", cpu="cortex-a72").runs_on.cpu == \
        "cortex-a72"
    for runs_on, why in (({"kind": "emulated"}, "needs `arch:`"),
                         ({"kind": "ssh", "host": "pi", "arch": "aarch64"}, "for `kind: emul"),
                         ({"kind": "emulated", "arch": "x86_64"}, "aarch64"),
                         ({"kind": "emulated", "arch": "aarch64", "cpu": "-x"}, "pattern")):
        with pytest.raises(ValidationError, match=why):
            profile(**runs_on)


def test_other_targets_keep_their_keys_and_older_boards_read_them() -> None:
    """`arch` and `cpu` are written only where set: a host or ssh target's dump (its
    stages' keys, the task an older SSH board validates) has no key it did not have."""
    for runs_on in ({}, {"kind": "ssh", "host": "pi"}):
        dumped = profile(**runs_on).runs_on.model_dump(mode="json")
        assert "arch" not in dumped and "cpu" not in dumped
    emulated = profile(kind="emulated", arch="aarch64").runs_on.model_dump(mode="json")
    assert emulated["arch"] == "aarch64" and "cpu" not in emulated
    assert TargetProfile.model_validate(profile(kind="emulated", arch="aarch64")
                                        .model_dump(mode="json")).runs_on.arch == "aarch64"


def test_an_emulated_board_never_times_the_device_but_runs_its_accuracy() -> None:
    target = Target(name="pi", profile=profile(kind="emulated", arch="aarch64",
                                               cpu="cortex-a72"))
    reason = target.emulated_reason("latency")
    assert reason.startswith("not measurable here: on emulated aarch64 (qemu-user -cpu "
                             "cortex-a72)") and "not the Raspberry Pi 4's" in reason
    assert target.emulated_reason("accuracy") == ""
    assert Target(name="h", profile=profile()).emulated_reason("latency") == ""
    assert not target.runs_here  # only the board's stage process holds its tag


def test_the_driver_answers_an_emulated_latency_and_leaves_accuracy_to_the_board(
        tmp_path: Path) -> None:
    from edgebuild.execute.remote.probe import absent_reason
    from edgebuild.execute.task import StageTask

    target = Target(name="pi", profile=profile(kind="emulated", arch="aarch64"))
    spec = {"target": target.model_dump(mode="json"), "params": {}}
    latency = StageTask("l", {**spec, "op": "measure-latency"}, tmp_path / "l.log")
    infer = StageTask("i", {**spec, "op": "infer"}, tmp_path / "i.log")
    assert (absent_reason(latency) or "").startswith("not measurable here: on emulated")
    assert absent_reason(infer) is None
