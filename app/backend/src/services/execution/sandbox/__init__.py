"""Command sandboxes: bubblewrap, Landlock or none, chosen once per process.

:mod:`~services.execution.sandbox.selection` chooses; :mod:`~services.execution.sandbox.layout`
lists what a command may see of the host; :mod:`~services.execution.sandbox.landlock` and
:mod:`~services.execution.sandbox.landlock_abi` confine with Landlock;
:mod:`~services.execution.sandbox.seccomp`, :mod:`~services.execution.sandbox.limits` and
:mod:`~services.execution.sandbox.cgroup` apply the system-call filter and resource limits.

May import :mod:`services.execution.ports`, :mod:`services.execution.errors` and
:mod:`services.settings`; never the providers or the tool domains (import-linter's independence
contract).
"""
