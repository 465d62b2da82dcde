"""Host-side (Python) helpers of unary kernels' wrappers: the writer copies them into the files
it emits (`kernelsource.definitions`), next to the constexpr expressions that call them."""


def _pow_mode(exponent):
    """Exponents eager special-cases get exact formulas (x*x, sqrt, ...); 0 = general pow."""
    special = {0: 1, 1: 2, 2: 3, 3: 4, 0.5: 5, -0.5: 6, -1: 7, -2: 8}
    return special.get(exponent, 0)
