"""The builtin provider: a deterministic, offline Triton kernel writer.

`BuiltinProvider` answers like an LLM (a sentence and one ```python block holding the kernel
file) for the operators its family modules cover, and says plainly, without code, when it has no
writer. See provider.py for the variant policy and registry.py for coverage.
"""

from agent.providers.builtin.provider import BuiltinProvider

__all__ = ["BuiltinProvider"]
