"""`python -m shardcat` runs the command line."""

from .cluster.cli import main

raise SystemExit(main())
