"""Storage backends behind one small key-value interface."""
