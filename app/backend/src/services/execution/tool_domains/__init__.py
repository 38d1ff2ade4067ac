"""The deterministic tool domains (workspace, git, command) and the one dispatcher they share."""
