"""A registry of named components (strategies, fork rules): one decorator registers,
duplicates are refused, unknown names get a "did you mean"; plug-ins register from files of
plug-in folders (loaded by path, under a module name of their own, so that no other
`strategies` package on sys.path is imported instead) and from installed packages through an
entry-point group."""
from __future__ import annotations

import difflib
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Callable, Generic, TypeVar

from treedec.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, entry_point_group: str, builtin_package: str,
                 folders: Callable[[], list[Path]] = list):
        self.kind, self.group, self.package, self.folders = kind, entry_point_group, builtin_package, folders
        self._items: dict[str, T] = {}
        self._loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            return obj

        return deco

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        import importlib
        import pkgutil

        pkg = importlib.import_module(self.package)
        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{self.package}.{mod.name}")
        for folder in self.folders():
            for path in sorted(Path(folder).glob("*.py")):
                if not path.name.startswith("_"):
                    _load_file(path, f"treedec_plugins.{self.group.rpartition('.')[2]}.{path.stem}")
        for ep in entry_points(group=self.group):
            ep.load()  # the plug-in module registers itself on import

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def get(self, name: str) -> T:
        self._load()
        if name not in self._items:
            close = difflib.get_close_matches(name, self._items, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UserError(f"unknown {self.kind} {name!r}{hint}; known: {', '.join(sorted(self._items))}")
        return self._items[name]


def _load_file(path: Path, module: str) -> None:
    """Import the plug-in file `path` as `module` (it registers itself)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(module, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        del sys.modules[module]
        raise UserError(f"plug-in {path}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
