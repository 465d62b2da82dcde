"""The builtin writer's static registry and its kernel modules: every family is listed once, no
overload is claimed twice, and every module under agent/providers/builtin/kernels/ is real Python
that imports (the writer copies its text; an import error there is a bug in the kernels)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from agent.providers.builtin import kernels, kernelsource
from agent.providers.builtin.registry import FAMILIES, FAMILY_MODULES, FAMILY_OF, WRITERS


def test_no_overload_is_written_by_two_families() -> None:
    claimed = [op for module in FAMILY_MODULES.values() for op in module.WRITERS]
    assert len(claimed) == len(set(claimed)) == len(WRITERS)
    assert set(FAMILY_OF) == set(WRITERS)
    assert all(ops for ops in FAMILIES.values())


@pytest.mark.parametrize("name", [m.name for m in pkgutil.iter_modules(kernels.__path__)])
def test_kernel_module_imports(name: str) -> None:
    importlib.import_module(f"agent.providers.builtin.kernels.{name}")


def test_placeholders_and_runtime_names_are_checked() -> None:
    with pytest.raises(KeyError, match="no top-level placeholder _NOPE"):
        kernelsource.emitted("softmax", "main", values={"_NOPE": "1"})
    with pytest.raises(KeyError, match="defines no _nope"):
        kernelsource.runtime("_nope")
    text = kernelsource.emitted("softmax", "main", values={"_MODE": "3"})
    assert "\n_MODE = 3  #" in text and "# inline:" not in text and "# noqa" not in text
