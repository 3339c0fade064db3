"""`edgebuild cache`: list, verify and clean the artifact cache; make the signing key.

The handlers of the CLI's cache command, below `cli.py` (which declares its arguments and
dispatches to `cmd_cache`) and above `api`; like the CLI, it imports nothing heavy.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.errors import EdgebuildError, ExitCode

if TYPE_CHECKING:
    from edgebuild.cache.signing import Trust
    from edgebuild.cache.store import Store


def cmd_cache(args: argparse.Namespace) -> int:
    from edgebuild import api
    from edgebuild.cache.store import Store

    if args.action == "keygen":
        return cache_keygen(args.shared_cache_key)
    store = Store(args.cache_dir or api.default_cache_dir())
    if store.root.exists() and not store.root.is_dir():
        raise EdgebuildError(f"--cache-dir {store.root} is not a folder",
                             "point --cache-dir (or $EDGEBUILD_CACHE_DIR) at the cache folder")
    if args.action == "ls":
        total = 0
        for artifact in store.entries():
            total += artifact.size_bytes
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(artifact.created))
            print(f"{artifact.key[:16]}  {artifact.format:<10} {artifact.size_bytes / 1e6:8.2f} MB"
                  f"  {when}  {artifact.metadata.get('stage', '?')}")
        print(f"{store.root}: {total / 1e6:.1f} MB")
        return ExitCode.OK
    if args.action == "verify":
        return cache_verify(store, args.shared_cache_trust or [], args.shared_cache_key)
    from edgebuild.cache.memo import clean_memo
    from edgebuild.run.replay import clean_records

    cutoff = time.time() - args.older_than_days * 86400
    removed = store.clean_tmp() + clean_memo(store.root, cutoff) + clean_records(store.root,
                                                                                cutoff)
    for artifact in list(store.entries()):
        if artifact.created < cutoff:
            store.remove(artifact.key)
            removed += 1
    print(f"removed {removed} item(s) from {store.root}")
    return ExitCode.OK


def cache_keygen(path: Path | None) -> int:
    """Create the signing key (idempotent: an existing key is kept) and print its public
    half, the line other machines put in their trusted keys."""
    from edgebuild.cache import signing

    path = path or (Path(os.environ[signing.KEY_ENV]) if os.environ.get(signing.KEY_ENV)
                    else signing.default_key_path())
    if path.exists():
        signer = signing.load_signer(path)
        print(f"{path}: exists, kept")
    else:
        signer = signing.generate(path)
        print(f"{path}: created (mode 0600)")
    public = signing.public_path(path)
    if not public.exists():
        public.write_text(signer.public_line() + "\n")
    print(f"public key ({public}), for the readers' --shared-cache-trust files:")
    print(signer.public_line())
    return ExitCode.OK


def cache_verify(store: Store, trust_specs: list[str], key: Path | None) -> int:
    """Every entry's digests; for an entry fetched from a shared store, also its
    signature and whether its writer is trusted now. A failing entry is removed."""
    from edgebuild.cache.verify import verify_entry

    bad = count = 0
    trust = None
    for key_ in list(store.entry_keys()):
        count += 1
        manifest = store.manifest(key_)
        if manifest is not None and "origin" in manifest and trust is None:
            trust = _reader_trust(trust_specs, key)
        problem = verify_entry(store, key_, manifest, trust)
        if problem:
            bad += 1
            print(f"corrupt {key_}: {problem} (removed)")
            store.remove(key_)
    print(f"{count} entries checked, {bad} corrupt or untrusted")
    return ExitCode.STAGE_FAILED if bad else ExitCode.OK


def _reader_trust(specs: list[str], key: Path | None) -> Trust:
    from edgebuild.cache import signing

    key = key or (Path(os.environ[signing.KEY_ENV]) if os.environ.get(signing.KEY_ENV)
                  else None)
    own = key or signing.default_key_path()
    raw = signing.load_signer(own).raw_public if own.exists() else None
    return signing.Trust.configure(specs, raw)
