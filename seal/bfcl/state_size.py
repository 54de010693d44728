"""The size of bfcl-eval's simulated file system, measured as it is built and kept within a cap.

bfcl-eval's `cp` of a directory shares the copied contents (a shallow copy), so k rounds of ordinary
`cp`/`mkdir`/`mv` calls build a tree of 2^k paths out of a few objects, and anything that walks it (`find`,
`du`, the checker's comparison, a rendering of the state) costs 2^k. `FileSystemGuard` measures the tree
after every call with a walk that stops at the cap, and rolls back the call that would pass it, so no state
an episode keeps, and no state the checker rebuilds from its calls, is ever larger than the cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system import (
    Directory,
    GorillaFileSystem,
)


@dataclass(frozen=True)
class TreeSize:
    """Paths and characters (every full path and file content) of a tree; `over` when the walk stopped."""

    paths: int
    chars: int
    over: bool = False


def tree_size(root: Directory, max_paths: int, max_chars: int) -> TreeSize:
    """The size of the tree under `root` as the paths it shows (`find`'s view: shared contents count once per
    path); a cycle (bfcl-eval's `cp a a` makes one) or a count past its cap stops the walk as `over`. A plain
    walk, unless it meets a contents dict twice: then `shared_tree_size`."""
    seen: set[int] = set()
    paths = chars = 0
    stack: list[tuple[int, dict[str, Any]]] = [(0, root.contents)]
    while stack:
        prefix, contents = stack.pop()
        if id(contents) in seen:
            return shared_tree_size(root, max_paths, max_chars)
        seen.add(id(contents))
        for name, item in contents.items():
            length = prefix + 1 + len(name)
            paths += 1
            chars += length
            if type(item) is Directory:
                stack.append((length, item.contents))
            else:
                chars += len(str(getattr(item, "content", "")))
        if paths > max_paths or chars > max_chars:
            return TreeSize(paths, chars, over=True)
    return TreeSize(paths, chars)


def shared_tree_size(root: Directory, max_paths: int, max_chars: int) -> TreeSize:
    """`tree_size` computed once per distinct contents dict, so a tree of 2^k paths built from a few objects
    costs a few steps."""
    sizes: dict[int, tuple[int, int]] = {}
    """id of a contents dict -> (paths, characters) below it, its own path counted as empty."""
    open_ids: set[int] = set()
    stack: list[tuple[dict[str, Any], bool]] = [(root.contents, False)]
    while stack:
        contents, children_done = stack.pop()
        key = id(contents)
        if children_done:
            open_ids.discard(key)
            paths = chars = 0
            for name, item in contents.items():
                step = 1 + len(name)
                paths += 1
                chars += step
                if isinstance(item, Directory):
                    below, below_chars = sizes[id(item.contents)]
                    paths += below
                    chars += below_chars + step * below
                else:
                    chars += len(str(getattr(item, "content", "")))
            if paths > max_paths or chars > max_chars:
                return TreeSize(paths, chars, over=True)
            sizes[key] = (paths, chars)
        elif key in open_ids:
            return TreeSize(max_paths + 1, 0, over=True)
        elif key not in sizes:
            open_ids.add(key)
            stack.append((contents, True))
            stack.extend(
                (item.contents, False)
                for item in contents.values()
                if isinstance(item, Directory) and id(item.contents) not in sizes
            )
    return TreeSize(*sizes[id(root.contents)])


class _Snapshot:
    """The file system's mutable parts before a call: its own attributes, every node's attributes and
    every contents dict (shared ones once), copied shallowly; restoring puts them back in place."""

    def __init__(self, fs: GorillaFileSystem) -> None:
        self.fs = fs
        self.own = dict(fs.__dict__)
        self.nodes: list[tuple[Any, dict[str, Any]]] = []
        self.contents: list[tuple[dict[str, Any], dict[str, Any]]] = []
        seen: set[int] = set()
        stack: list[Any] = [fs.root, fs._current_dir]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            self.nodes.append((node, node.__dict__.copy()))
            if type(node) is Directory and id(node.contents) not in seen:
                seen.add(id(node.contents))
                self.contents.append((node.contents, node.contents.copy()))
                stack.extend(node.contents.values())

    def restore(self) -> None:
        for contents, saved in self.contents:
            contents.clear()
            contents.update(saved)
        for node, saved in self.nodes:
            node.__dict__.clear()
            node.__dict__.update(saved)
        self.fs.__dict__.clear()
        self.fs.__dict__.update(self.own)


class FileSystemGuard:
    """Keeps one `GorillaFileSystem` within `max_paths` paths and `max_chars` characters.

    A snapshot is taken before a call only when the call could pass a cap: `cp` and `mv` of a directory
    can change the size by as much as the whole tree, any other call by at most one path of its own
    arguments' length below the deepest path. The snapshot costs a walk of the (capped) tree.
    """

    GROWS_BY_A_TREE = frozenset({"cp", "mv"})
    READ_ONLY = frozenset({"pwd", "ls", "cd", "cat", "find", "wc", "sort", "grep", "du", "tail", "diff"})
    """Methods that leave the tree as it is in bfcl-eval 2026.3.23 (`cd` moves the current directory only):
    not measured again (tests/env/test_tool_budget.py checks each)."""

    def __init__(self, fs: GorillaFileSystem, max_paths: int, max_chars: int) -> None:
        self.fs = fs
        self.max_paths = max_paths
        self.max_chars = max_chars
        self.size = tree_size(fs.root, max_paths, max_chars)

    def changes(self, method: str) -> bool:
        """Whether a call of `method` can change the tree (and is to be measured)."""
        return method not in self.READ_ONLY

    def before(self, method: str, argument_chars: int) -> _Snapshot | None:
        """A snapshot when `method` called with `argument_chars` characters of arguments could pass a cap."""
        near = (
            self.size.paths + 1 > self.max_paths
            or self.size.chars + self.size.chars + argument_chars > self.max_chars
        )
        return _Snapshot(self.fs) if near or method in self.GROWS_BY_A_TREE else None

    def after(self, snapshot: _Snapshot | None) -> str | None:
        """Measure the tree again; past a cap, roll the call back and say why."""
        size = tree_size(self.fs.root, self.max_paths, self.max_chars)
        if not size.over:
            self.size = size
            return None
        if snapshot is not None:
            snapshot.restore()
        if size.paths > self.max_paths:
            return f"the file system would hold more than {self.max_paths:,} paths; the call was undone"
        return (
            f"the file system would hold more than {self.max_chars:,} characters of paths and contents; "
            "the call was undone"
        )
