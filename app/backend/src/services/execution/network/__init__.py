"""Controlled network egress for sandboxed commands: the host allowlist (:mod:`.allowlist`), the
filtering proxy (:mod:`.proxy`) and the relay that carries a sandbox's connections to it
(:mod:`.relay`)."""
