"""Subcommands of the ``hilbot`` command line, one module each."""
