"""The `check` reply's numbers, the same in every worker (the native engines' Session::check(): README
"Worker protocol"): one forward (and, in training, one backward) summed up as the loss, a checksum of the
logits, the whole gradient's norm and each trainable tensor's own norm (layer order: weight, bias, gamma,
beta), and whether every one of them is finite. Each worker reduces its framework's tensors to float64
sums; this turns those sums into the reply."""
import math


def check_result(loss, logits_sum, logits_finite, squared_gradient_norms=None):
    """`loss` and `logits_sum` (the logits summed in float64), `logits_finite` (every logit finite) and,
    in training, each trainable tensor's squared norm in float64 (None in inference: no gradient)."""
    result = {"loss": float(loss), "logits_checksum": float(logits_sum)}
    finite = bool(logits_finite) and math.isfinite(result["loss"])
    if squared_gradient_norms is None:
        result["gradient_norm"] = math.nan
        result["gradient_norms"] = []
    else:
        squared = [float(n) for n in squared_gradient_norms]
        finite = finite and all(math.isfinite(n) for n in squared)
        result["gradient_norm"] = math.sqrt(sum(squared))
        result["gradient_norms"] = [math.sqrt(n) for n in squared]
    result["finite"] = finite
    return result
