"""src/workers/common/output_check.py: every worker's `check` reply from its float64 sums (the native
engines' Session::check()): the norms, and `finite` false as soon as any of them is not."""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "src" / "workers"))
from common.output_check import check_result  # noqa: E402


def test_training_gives_the_whole_gradients_norm_and_each_tensors():
    result = check_result(2.5, -1.25, True, [9.0, 16.0, 0.0])
    assert result == {"loss": 2.5, "logits_checksum": -1.25, "gradient_norm": 5.0,
                      "gradient_norms": [3.0, 4.0, 0.0], "finite": True}


def test_inference_has_no_gradient():
    result = check_result(1.0, 3.0, True)
    assert math.isnan(result["gradient_norm"]) and result["gradient_norms"] == [] and result["finite"]


def test_anything_not_finite_makes_the_check_not_finite():
    assert not check_result(math.nan, 0.0, True)["finite"]
    assert not check_result(1.0, 0.0, False)["finite"]  # a logit was not finite
    assert not check_result(1.0, 0.0, True, [1.0, math.inf])["finite"]
