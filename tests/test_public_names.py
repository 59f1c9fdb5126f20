"""`sessionstore`'s public names load on first use: `import sessionstore` alone imports no storage module.

Every name in `__all__` still imports (`from sessionstore import X`), as the object its module defines.
Checked in a fresh interpreter, since this test process has long imported the store.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import sessionstore

_PROBE = """
import json, sys
import sessionstore
loaded = sorted(m for m in sys.modules if m.startswith(("sessionstore.", "sqlalchemy")))
names = sorted(dir(sessionstore))
from sessionstore import *
sys.stdout.write(json.dumps({"loaded": loaded, "dir": names, "star": sorted(set(sessionstore.__all__) - set(globals()))}))
"""


def test_import_sessionstore_loads_no_storage_module() -> None:
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(proc.stdout)
    assert result["loaded"] == []
    assert set(sessionstore.__all__) <= set(result["dir"])
    assert result["star"] == []


@pytest.mark.parametrize("name", sessionstore.__all__)
def test_every_public_name_imports_as_its_module_defines_it(name: str) -> None:
    value = getattr(sessionstore, name)
    home = importlib.import_module(value.__module__)
    assert getattr(home, name) is value
    assert value.__name__ == name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        sessionstore.Nothing  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(ImportError):
        exec("from sessionstore import Nothing", {})
    assert isinstance(sessionstore.__version__, str)
