"""`python -m agentic_rag.cli`: the `agentic-rag` command."""
import sys

from ._main import main

sys.exit(main())
