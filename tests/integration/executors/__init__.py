"""Integration tests of the execution substrates: real subprocesses, the real Kubernetes client."""
