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


def test_kernel_bodies_are_a_functions_statements_without_its_return() -> None:
    bodies = kernelsource.bodies("unary_ops")
    assert bodies["relu"] == "out = tl.where(x < 0, 0, x)"
    clamp = bodies["clamp"].splitlines()
    assert clamp[0] == "out = x" and clamp[1] == "if HAS_MIN:" and clamp[2].startswith("    out")
    assert "return" not in bodies["pow"] and "# x ** 0 is 1" in bodies["pow"]


def test_every_elementwise_body_comes_from_a_kernel_module() -> None:
    from agent.providers.builtin import backward, binary, unary

    for family, name in ((unary, "unary_ops"), (binary, "binary_ops"), (backward, "backward_ops")):
        texts = set(kernelsource.bodies(name).values())
        assert all(spec.body in texts for spec in family.SPECS.values())


@pytest.mark.parametrize(
    "source, message",
    [
        ("def f(x):\n    out = x\n    return x\n", "must end with `return out`"),
        ("def f(x):\n    out = x\n", "must end with `return out`"),
        ("def f(\n    x,\n):\n    out = x\n    return out\n", "must fit on one line"),
    ],
)
def test_a_body_that_the_writer_could_misread_is_refused(
    tmp_path, monkeypatch, source: str, message: str
) -> None:
    (tmp_path / "fake_ops.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(kernelsource, "KERNELS_DIR", tmp_path)
    kernelsource._text.cache_clear()
    kernelsource.bodies.cache_clear()
    try:
        with pytest.raises(ValueError, match=message):
            kernelsource.bodies("fake_ops")
    finally:
        kernelsource._text.cache_clear()
        kernelsource.bodies.cache_clear()
