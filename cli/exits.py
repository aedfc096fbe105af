"""The exit codes of ``mnemo``, and which library error maps to which."""

from mnemosyne import MnemoError, errors

OK = 0
PROBLEM = 1
"""The command ran and found a problem (merge conflicts, fsck problems)."""
INVALID = 2
NOT_FOUND = 3
REF_CONFLICT = 4
CORRUPT = 5
STORAGE_FULL = 6
ACCESS_DENIED = 7
"""A served store refused the token (missing, revoked, expired) or its role."""
INTERRUPTED = 130
"""Stopped by Ctrl-C (SIGINT), as shells report it (128 + 2)."""

EPILOG = (
    "Exit codes: 0 ok, 1 problem found, 2 invalid input or usage, 3 not found, "
    "4 ref moved (retry), 5 corrupt object or damaged store file, 6 storage full, "
    "7 access denied (a served store's token), 130 interrupted (Ctrl-C)."
)


def exit_code(error: MnemoError) -> int:
    """The exit code for a library error (the library keeps the table: ``mnemosyne.errors.EXIT_CODES``)."""
    return errors.exit_code(error)
