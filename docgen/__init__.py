"""The documentation site's generated pages, filled from the code at build time (hooks.py): the configuration
reference from the typed config, the CLI reference from the parser, the compatibility table from the pinned
versions, the planner's accuracy tables from the published measurements; and the runner that executes the pages'
examples (examples.py, used by tests/test_docs.py)."""
