"""The recipe each precision names (DESIGN.md "Vocabulary"), as every engine's ``decisions`` records it.

The same texts as ``recipe_of`` in src/core/cell.cpp (``crossbench list precisions --json``
prints them; tests/python/test_precision_recipes.py holds both equal), so that a cube's rows
say the same thing whichever engine ran them. A worker appends its framework's own means in
brackets: ``recipe=amp-bf16 (...) [torch.autocast bf16]``.
"""

RECIPES = {
    "fp32": "recipe=fp32-strict (fp32 tensors and math; TF32 off everywhere)",
    "tf32": "recipe=tf32 (fp32 tensors, TF32 tensor-core math)",
    "fp16": "recipe=pure-fp16 (fp16 weights, activations, gradients; fp32 accumulation, loss and batch-norm statistics)",
    "bf16": "recipe=pure-bf16 (bf16 weights, activations, gradients; fp32 accumulation, loss and batch-norm statistics)",
    "amp-fp16": "recipe=amp-fp16 (fp32 master weights and gradients; fp16 compute through casts)",
    "amp-bf16": "recipe=amp-bf16 (fp32 master weights and gradients; bf16 compute through casts)",
}


def describe(precision, means=""):
    """The precision's recipe text, with the framework's `means` in brackets when given."""
    if precision not in RECIPES:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(RECIPES)}")
    return RECIPES[precision] + (f" [{means}]" if means else "")
