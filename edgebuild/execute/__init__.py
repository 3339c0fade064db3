"""Running a plan: local worker processes now, a Dask cluster later."""
