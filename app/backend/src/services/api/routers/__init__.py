"""One router per module; each module exposes ``router`` (registered by the app factory)."""
