"""`python -m llm_eks.cli`: the `llm-eks` console script."""

import sys

from llm_eks.cli import main

sys.exit(main())
