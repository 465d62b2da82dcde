"""Errors a user can fix. The CLI prints their message as one line and exits with code 2."""


class UsageError(Exception):
    """Bad input from the user (a path, a suite name, an operator, a config value).

    The message is one line that says what to fix, e.g.
    `kernels dir 'kk' does not exist: pass an existing folder to --kernels-dir.`
    """
