"""``python -m services.cli`` runs the ``studio`` command line."""

from services.cli.main import main

main()
