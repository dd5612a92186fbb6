"""``python -m amdahl ...`` runs the ``amdahl`` command."""

from ._cli import main

main()
