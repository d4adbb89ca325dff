"""livefuse load generator and offline benchmark."""
