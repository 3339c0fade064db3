"""Remote execution: a stage task run on another machine, a Dask worker or an SSH board.

The executor seam (execute/executor.py) is kept as it is; this package adds what
running elsewhere takes. The router decorates the run's executor, and a remote stage
goes through one sequence whatever carries it (transport.py):

    scheduler ── task ──▶ DeviceRouter (router.py) ─┬─ device absent ─▶ answered (probe.py)
                                                    ├─ ssh board ─────▶ ship(SshTransport)
                                                    └─ otherwise ─────▶ the run's executor
                                                         DaskExecutor ──▶ ship(DaskTransport)

    ship: carry (carry.py) ─▶ send ─▶ run ─▶ the checked reply written back
          the far side (far_side.py): files checked by digest, the stage in its own process

The modules: `transport` (the protocol and `ship`), `carry` (what a stage reads, by
content), `far_side` (the worker's side), `returned` (a Dask worker's reply, checked),
`dask` and `ssh` (the two transports), `router` and `probe`.
"""
