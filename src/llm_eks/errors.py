"""The one error type for bad input. Its message is a single line naming the field, the value and what is
allowed; app.py and the CLI print it and exit non-zero instead of showing a traceback."""


class ConfigError(ValueError):
    """Bad input: configuration, plan request or construct props."""
