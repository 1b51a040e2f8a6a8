"""`python -m odradek` runs the same CLI as the `odradek` console script."""

from odradek.cli.main import main

raise SystemExit(main())
