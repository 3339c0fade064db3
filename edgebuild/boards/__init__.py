"""Emulated boards: another instruction set's Python on this machine, under qemu-user,
for targets with `runs_on: {kind: emulated}` (docs/targets.md, "Emulated boards").

`debian`: the userland from a Debian mirror, checked against its signed index;
`provision`: `edgebuild board setup`, a board made once per machine and keyed by what it
holds; `commands`: the CLI's argparse. Imports only `errors` (the `layers` contract).
"""
