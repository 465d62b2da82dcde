"""Programmatic dependent launches in the builtin kernel files (codegen.PDL_SOURCE).

A kernel launched with `launch_pdl=True` may start before the kernel ahead of it in the stream
has finished; if it read that kernel's output without waiting first, it would race, silently and
only on an sm_90+ GPU. The rule these tests hold every writer's file to, statically: a launch
with `**_pdl_launch(...)` targets a kernel with a `PDL_WAIT` parameter, and every such kernel's
first statement is `_pdl_enter(PDL_WAIT, ...)`, except those a file names in
`_PDL_WAITS_LATER` (which must still wait somewhere). On the CPU (Triton's interpreter) PDL is
off.
"""

from __future__ import annotations

import ast
from functools import cache

import pytest
import torch

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.suites import select_operators


@cache
def _suite_files() -> dict[str, str]:
    """The text each writer produces for the torchbench suite's cases."""
    files = {}
    for oc in select_operators("torchbench").ops:
        writer = WRITERS.get(oc.op)
        text = writer(KernelRequest(op=oc.op, schema="", cases=oc.cases)) if writer else None
        if text is not None:
            files[oc.op] = text
    return files


def _pdl_files() -> list[str]:
    return sorted(op for op, text in _suite_files().items() if "**_pdl_launch(" in text)


def _jit_kernels(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("jit" in ast.unparse(d) for d in node.decorator_list)
    }


def _first_statement(fn: ast.FunctionDef) -> ast.stmt:
    body = fn.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return body[0]


def _is_pdl_kwarg(kw: ast.keyword, pdl_dicts: set[str]) -> bool:
    """`**_pdl_launch(...)`, or `**name` where name holds a dict built with it."""
    if kw.arg is not None:
        return False
    text = ast.unparse(kw.value)
    return "_pdl_launch(" in text or text in pdl_dicts


def _pdl_launch_targets(tree: ast.Module, kernels: set[str]) -> set[str]:
    """Names of kernels launched as dependents: `kernel[grid](..., **_pdl_launch(...))`, also
    through a variable that holds `kernel[grid]` or a keyword dict built with `_pdl_launch` (a
    launch planned once, run by a closure). Names are resolved per top-level host function,
    nested closures included."""
    targets = set()
    for top in tree.body:
        if not isinstance(top, ast.FunctionDef) or top.name in kernels:
            continue
        aliases: dict[str, str] = {}
        pdl_dicts: set[str] = set()
        for node in ast.walk(top):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            if not isinstance(node.targets[0], ast.Name):
                continue
            name = node.targets[0].id
            held = [
                n.value.id
                for n in ast.walk(node.value)
                if isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Name)
                and n.value.id in kernels
            ]
            if len(held) == 1:
                aliases[name] = held[0]
            value = node.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "dict":
                if any(_is_pdl_kwarg(kw, set()) for kw in value.keywords):
                    pdl_dicts.add(name)
        for node in ast.walk(top):
            if not isinstance(node, ast.Call) or ast.unparse(node.func) == "dict":
                continue
            if not any(_is_pdl_kwarg(kw, pdl_dicts) for kw in node.keywords):
                continue
            func = node.func
            if isinstance(func, ast.Subscript):
                targets.add(ast.unparse(func.value))
            elif isinstance(func, ast.Name) and func.id in aliases:
                targets.add(aliases[func.id])
            else:
                raise AssertionError(
                    f"a dependent launch of an unknown kernel: {ast.unparse(node)}"
                )
    return targets


def test_the_norm_family_uses_dependent_launches() -> None:
    ops = _pdl_files()
    for op in (
        "native_layer_norm_backward.default",
        "native_batch_norm.default",
        "native_batch_norm_backward.default",
    ):
        assert op in ops


@pytest.mark.parametrize("op", _pdl_files())
def test_every_dependent_launch_waits_before_it_touches_memory(op: str) -> None:
    tree = ast.parse(_suite_files()[op])
    kernels = _jit_kernels(tree)
    targets = _pdl_launch_targets(tree, set(kernels))
    assert targets, f"{op}: `_pdl_launch` in the text but no launch uses it"
    for name in targets:
        params = [a.arg for a in kernels[name].args.args]
        assert "PDL_WAIT" in params, f"{op}: {name} is launched as a dependent without PDL_WAIT"
    later = _waits_later(tree)
    assert later <= set(kernels), f"{op}: _PDL_WAITS_LATER names no kernel {later - set(kernels)}"
    for name, fn in kernels.items():
        if "PDL_WAIT" not in [a.arg for a in fn.args.args]:
            continue
        first = ast.unparse(_first_statement(fn))
        if name in later:  # declared: it must still wait, somewhere
            assert "_pdl_enter(PDL_WAIT," in ast.unparse(fn), f"{op}: {name} never waits"
        else:
            assert first.startswith("_pdl_enter(PDL_WAIT,"), f"{op}: {name} starts with {first}"


def _waits_later(tree: ast.Module) -> set[str]:
    """The file's `_PDL_WAITS_LATER`: kernels declared to read, before their wait, only what
    an earlier launch than the one ahead of them wrote (the embedding backward's)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_PDL_WAITS_LATER":
            return set(ast.literal_eval(node.value))
    return set()


def test_only_the_embedding_backward_declares_kernels_that_wait_later() -> None:
    """The exception is narrow: one file, and the kernels it names exist there."""
    named = {op: _waits_later(ast.parse(text)) for op, text in _suite_files().items()}
    declared = {op: kernels for op, kernels in named.items() if kernels}
    assert declared == {
        "embedding_dense_backward.default": {
            "_embed_rank_kernel",
            "_embed_seg_kernel",
            "_embed_fix_kernel",
        }
    }


def test_dependent_launches_are_off_in_the_interpreter() -> None:
    namespace: dict = {}
    text = _suite_files()["native_layer_norm_backward.default"]
    exec(compile(text, "<kernel>", "exec"), namespace)  # noqa: S102 - our own writer's file
    assert namespace["_pdl_ok"](torch.device("cpu")) is False
    assert namespace["_pdl_launch"](False) == {"PDL_WAIT": False}
