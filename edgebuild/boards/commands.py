"""`edgebuild board setup ARCH` and `edgebuild board show ARCH`, registered by cli.py.

Only argparse here; the work (provision.py) is imported when the command runs.
Exit codes: 0 the board is there (made now or before; `show`: it is), 2 usage or no
board (`show`), 3 it could not be made (the mirror, pip or the board's own check).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from edgebuild.errors import EdgebuildError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("board", help="an emulated ARM board on this machine, for targets "
                       "with `runs_on: {kind: emulated}` (docs/targets.md)")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    setup = verbs.add_parser("setup", help="provision the board once per machine (an "
                             "aarch64 Python and its runtimes under qemu-user; ~300 MB)")
    setup.add_argument("arch", help="aarch64")
    setup.add_argument("--mirror", default=None, metavar="URL",
                       help="the Debian mirror (default http://deb.debian.org/debian; "
                            "every file is checked against Debian's signed index)")
    show = verbs.add_parser("show", help="where the board is and what it holds (JSON)")
    show.add_argument("arch", help="aarch64")


def cmd_board(args: argparse.Namespace) -> int:
    from edgebuild.boards import debian, provision

    if args.verb == "show":
        board = provision.find_board(args.arch)
        if board is None:
            raise EdgebuildError(f"no emulated {args.arch} board for this environment",
                                 f"run `edgebuild board setup {args.arch}`")
        print(json.dumps({"path": str(board.path), "python": str(board.python),
                          **board.info}, indent=1))
        return 0
    board, made = provision.setup_board(args.arch, args.mirror or debian.DEFAULT_MIRROR,
                                        say=lambda text: print(f"board: {text}", flush=True))
    size = int(str(board.info.get("bytes", 0))) / 1e6
    print(f"{'made' if made else 'already set up'}: {board.path} ({size:.0f} MB, set up in "
          f"{board.info.get('setup_seconds')} s); its Python: {board.python}")
    return 0


COMMANDS = {"board": cmd_board}
