"""``python -m hilbot`` runs the command line."""

from hilbot.driver.cli import main

raise SystemExit(main())
