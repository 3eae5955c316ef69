"""The learning-rate schedule: warmup, cosine decay, warm restarts."""
import math

import pytest

from treedec.errors import UserError
from treedec.training.schedule import lr_at
from treedec.training.trainer import TrainConfig


def test_warmup_then_cosine_to_min():
    assert lr_at(0, 1.0, 0.1, 10, 110) == pytest.approx(0.1)
    assert lr_at(9, 1.0, 0.1, 10, 110) == pytest.approx(1.0)
    assert lr_at(60, 1.0, 0.1, 10, 110) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi / 2)))
    assert lr_at(110, 1.0, 0.1, 10, 110) == pytest.approx(0.1)
    assert lr_at(500, 1.0, 0.1, 10, 110) == pytest.approx(0.1)


def test_warm_restart_repeats_the_schedule_from_its_step():
    # after the restart, the curve is the plain schedule shifted by `restart`
    for s in (0, 5, 9, 40, 90, 100):
        assert lr_at(300 + s, 1.0, 0.1, 10, 400, restart=300) == pytest.approx(lr_at(s, 1.0, 0.1, 10, 100))
    # before it, a schedule that ends at the restart step
    assert lr_at(299, 1.0, 0.1, 10, 400, restart=300) == pytest.approx(lr_at(299, 1.0, 0.1, 10, 300))
    assert lr_at(299, 1.0, 0.1, 10, 400, restart=300) < lr_at(300 + 9, 1.0, 0.1, 10, 400, restart=300)


def test_restart_outside_the_run_is_a_user_error():
    with pytest.raises(UserError, match="restart"):
        TrainConfig(steps=100, restart=100)
    with pytest.raises(UserError, match="restart"):
        TrainConfig(steps=100, restart=-1)
