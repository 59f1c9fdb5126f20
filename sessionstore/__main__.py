"""`python -m sessionstore` runs the CLI."""

from sessionstore.cli.app import main

main()
