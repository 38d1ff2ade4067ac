"""The Landlock system calls, with the parts of the ABI the ``landlock`` package does not cover.

The ruleset made here handles, besides file access (the rights of :mod:`landlock`'s ``FSAccess``):

* TCP ``bind`` and ``connect`` (ABI 4): no rule grants any port, so a command reaches no TCP
  service at all, loopback included;
* scoping (ABI 6): no signal to a process outside the command's own Landlock domain (the
  harness, other commands), no connection to an abstract Unix socket made outside it.

:func:`confine_child` runs in the forked child before ``exec``: it applies the ruleset, sets
no-new-privileges, drops every capability (bounding set, ambient, effective, permitted and
inheritable: a root harness's child keeps none, and ``exec`` cannot give them back), then loads
the offline variant of the seccomp filter of :mod:`~services.execution.sandbox.seccomp` (no Unix
socket, no UDP, no socket family but TCP: Landlock does not cover them, and the command shares
the harness's network namespace).
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Sequence

from services.execution.sandbox.seccomp import host_program

MIN_ABI = 6  # network rules (4) and scoping (6) are required, not optional
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_ACCESS_NET_ALL = 0x1 | 0x2  # BIND_TCP | CONNECT_TCP
_SCOPE_ALL = 0x1 | 0x2  # ABSTRACT_UNIX_SOCKET | SIGNAL
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CAP_VERSION_3 = 0x20080522

Rule = tuple[str, int]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI (0 when Landlock is missing or disabled)."""
    result = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                             ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(result), 0)


@functools.cache
def cap_last_cap() -> int:
    """The highest capability number this kernel knows (read in the parent, once)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return 63


def _apply_ruleset(handled_fs: int, rules: Sequence[Rule]) -> None:
    attr = _RulesetAttr(handled_fs, _ACCESS_NET_ALL, _SCOPE_ALL)
    libc = _libc()
    ruleset = _check(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr),
                                  ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)),
                     "landlock_create_ruleset")
    try:
        for path, access in rules:
            try:
                parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # vanished since the parent looked: nothing to grant
            try:
                beneath = _PathBeneath(access, parent)
                _check(libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH,
                                    ctypes.byref(beneath), ctypes.c_uint32(0)), "landlock_add_rule")
            finally:
                os.close(parent)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _drop_capabilities(last_cap: int, machine: str) -> None:
    libc = _libc()
    for cap in range(last_cap + 1):
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "capbset_drop")
    _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "ambient_clear")
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.syscall(_SYS_CAPSET[machine], ctypes.byref(header), data), "capset")


def _load_seccomp() -> None:
    program = host_program(offline=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(_libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
           "seccomp")


def confine_child(handled_fs: int, rules: Sequence[Rule], last_cap: int, machine: str) -> None:
    """In the child before ``exec``: Landlock (files, TCP, scopes), no capabilities, seccomp."""
    _apply_ruleset(handled_fs, rules)
    _drop_capabilities(last_cap, machine)
    _load_seccomp()
