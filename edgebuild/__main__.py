import sys

from edgebuild.cli import main

sys.exit(main())
