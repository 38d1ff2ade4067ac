"""The ``workspace`` tool domain: files and directories of the execution's workspace.

Every path argument goes through :func:`confinement.resolve_path` (``Access.WRITE`` for anything
that creates, changes or deletes; the link itself, not its target, for delete, move and stat),
with ``allow_workflows`` taken from the execution. Traversals (list_dir, glob, search, copy of a
directory) use :func:`confinement.walk` and report what they skipped. Results are JSON data with
workspace-relative paths. The operations live in ``workspace_files`` (single files),
``workspace_tree`` (traversals), ``workspace_moves`` (delete, move, copy) and
``workspace_patch`` (apply_patch); this module declares them.
"""

from __future__ import annotations

from services.execution.tool_domains.spec import ToolSpec
from services.execution.tool_domains.workspace.files import (
    EditFileArgs,
    PathArgs,
    ReadFileArgs,
    WriteFileArgs,
    edit_file,
    make_dir,
    read_file,
    stat_path,
    write_file,
)
from services.execution.tool_domains.workspace.moves import (
    DeleteArgs,
    TransferArgs,
    copy_path,
    delete_path,
    move_path,
)
from services.execution.tool_domains.workspace.patch import ApplyPatchArgs, apply_patch
from services.execution.tool_domains.workspace.tree import (
    GlobArgs,
    ListDirArgs,
    SearchArgs,
    glob,
    list_dir,
    search,
)

DOMAIN = "workspace"


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(DOMAIN, "read_file",
             "Read a text file as numbered lines (a window: offset is 1-based, limit lines). "
             "Reports total_lines and whether the window is truncated.",
             ReadFileArgs, read_file),
    ToolSpec(DOMAIN, "write_file",
             "Create or overwrite a file with the given content; missing parent directories "
             "are created.",
             WriteFileArgs, write_file, mutates=True),
    ToolSpec(DOMAIN, "edit_file",
             "Replace old_text with new_text in a file. old_text must occur exactly once "
             "unless replace_all is true.",
             EditFileArgs, edit_file, mutates=True),
    ToolSpec(DOMAIN, "apply_patch",
             "Apply a unified diff (git diff format accepted) to the workspace; all files or "
             "none.",
             ApplyPatchArgs, apply_patch, mutates=True),
    ToolSpec(DOMAIN, "list_dir",
             "List a directory (optionally recursive, optionally with hidden entries).",
             ListDirArgs, list_dir),
    ToolSpec(DOMAIN, "glob",
             "Find paths matching a relative glob pattern (*, ?, [abc], {a,b}, ** for any "
             "depth) under a directory.",
             GlobArgs, glob),
    ToolSpec(DOMAIN, "search",
             "Search file contents for a regular expression (or literal text with "
             "regex=false); returns path, line number and line text. Binary files are skipped.",
             SearchArgs, search),
    ToolSpec(DOMAIN, "delete_path",
             "Delete a file, a symlink (not its target) or a directory (recursive=true when "
             "not empty).",
             DeleteArgs, delete_path, mutates=True),
    ToolSpec(DOMAIN, "move_path",
             "Move or rename a file, symlink or directory.",
             TransferArgs, move_path, mutates=True),
    ToolSpec(DOMAIN, "copy_path",
             "Copy a file or a directory tree.",
             TransferArgs, copy_path, mutates=True),
    ToolSpec(DOMAIN, "make_dir",
             "Create a directory and its missing parents.",
             PathArgs, make_dir, mutates=True),
    ToolSpec(DOMAIN, "stat",
             "Describe a path: kind, size, mode, mtime, and where a symlink leads.",
             PathArgs, stat_path),
)
