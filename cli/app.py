"""Placeholder; replaced by the real CLI."""


def main() -> None:
    """Run the CLI."""
