"""The transports to devices that backends reach themselves, on the ground floor.

adb (Android phones: TFLite today, Snapdragon/QNN next) lives here, shared by the
backends and the fleet's push that reach a phone. It imports nothing of edgebuild
but `errors`, no backend and no heavy library. Running a stage elsewhere (ssh
boards, Dask workers) is the executor's business: execute/remote/.
"""
