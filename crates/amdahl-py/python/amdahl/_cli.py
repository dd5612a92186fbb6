"""The ``amdahl`` console command the wheel installs: the Rust CLI, in this process."""

import sys

from . import _native


def main() -> None:
    sys.exit(_native.main(["amdahl", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
