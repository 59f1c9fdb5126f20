"""`python -m sessionstore` runs the CLI."""

from cli.app import main

main()
