import sys

from edgebuild.cli import main

if __name__ == "__main__":  # Dask and multiprocessing workers re-import __main__
    sys.exit(main())
