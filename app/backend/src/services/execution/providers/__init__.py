"""Provider adapters, one module per wire format: codex, gemini, claude, replay."""
