"""`python -m toolagent.cli`: the same as the `toolagent` command."""

from . import main

main()
