"""Faces for agent frameworks: LangGraph's store and checkpointer, and an MCP server.

Each lives behind an optional extra (``mnemosyne[langgraph]``, ``mnemosyne[mcp]``)
and, like the command line, uses only the public API of :mod:`mnemosyne`.
"""
