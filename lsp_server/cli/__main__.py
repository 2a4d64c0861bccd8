"""`python -m lsp_server.cli`: the `fastcomplete` command without its console script."""

import sys

from lsp_server.cli.main import main

sys.exit(main())
