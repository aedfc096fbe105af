"""The fixed choices arguments take, named once for the library and every face."""

from __future__ import annotations

from typing import Literal, get_args

ClaimPolicy = Literal["refuse", "replace", "keep"]
"""What a commit does with a claim that starts when another on its (subject,
predicate) does with another value: refuse it (``ClaimConflict``), replace the
others, or keep both."""

MergeStrategy = Literal["ours", "theirs"]
"""The side a merge takes for every conflict not resolved one by one."""

Choice = Literal["ours", "theirs", "base", "delete"]
"""How one merge conflict may be resolved (besides a supplied node)."""

SearchMode = Literal["hybrid", "lexical", "semantic"]
"""Which rankings a search uses."""

Kind = Literal["note", "claim"]
"""The kinds of node."""

CLAIM_POLICIES: tuple[str, ...] = get_args(ClaimPolicy)
MERGE_STRATEGIES: tuple[str, ...] = get_args(MergeStrategy)
CHOICES: tuple[str, ...] = get_args(Choice)
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
KINDS: tuple[str, ...] = get_args(Kind)
