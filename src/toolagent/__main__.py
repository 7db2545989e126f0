"""`python -m toolagent`: the same as the `toolagent` command (for an interpreter whose scripts
directory is not on PATH, or a container's `python -m toolagent serve`)."""

from .cli import main

main()
