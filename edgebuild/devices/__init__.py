"""Where a runner executes when it is not this host: the transports to devices.

adb (Android phones: TFLite today, Snapdragon/QNN next) lives here, shared by the
backends that reach a phone; ssh hosts and Dask device workers (execute/cluster.py)
are the others. Nothing here imports a backend or a heavy library.
"""
