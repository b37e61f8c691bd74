"""``python -m ictus_zenoh``: ``python -m ictus.live`` under its former name."""

import sys

from ictus.live.__main__ import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m ictus_zenoh"))
