"""The exit codes of ``mnemo``, and which library error maps to which."""

from mnemosyne import (
    ClaimConflict,
    CorruptObject,
    InvalidInput,
    MergeConflict,
    MnemoError,
    NotFound,
    RefConflict,
    StorageFull,
)

OK = 0
PROBLEM = 1
"""The command ran and found a problem (merge conflicts, fsck problems)."""
INVALID = 2
NOT_FOUND = 3
REF_CONFLICT = 4
CORRUPT = 5
STORAGE_FULL = 6

_BY_ERROR: tuple[tuple[type[MnemoError], int], ...] = (
    (NotFound, NOT_FOUND),  # Redacted too: it subclasses NotFound
    (InvalidInput, INVALID),
    (ClaimConflict, INVALID),
    (MergeConflict, INVALID),
    (RefConflict, REF_CONFLICT),
    (CorruptObject, CORRUPT),
    (StorageFull, STORAGE_FULL),
)

EPILOG = (
    "Exit codes: 0 ok, 1 problem found, 2 invalid input or usage, 3 not found, "
    "4 ref moved (retry), 5 corrupt object or damaged store file, 6 storage full."
)


def exit_code(error: MnemoError) -> int:
    """The exit code for a library error."""
    for kind, code in _BY_ERROR:
        if isinstance(error, kind):
            return code
    return PROBLEM
