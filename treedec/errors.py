"""Errors meant for the user: the CLI prints their message on one line, no traceback."""


class UserError(Exception):
    """A mistake in the user's input (config, path, data); the message says what exists."""
