"""Recall: lexical and semantic search that never brings back what should be gone.

Both indexes are derived and rebuildable, keyed by content, and every hit is
checked against the snapshot being read, so deleted, superseded, expired and
erased memories never come back.
"""
