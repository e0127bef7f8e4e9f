"""course.notebook.check_parameters: papermill parameters checked against the notebook's `parameters` cell."""

import pytest

from course.notebook import ParameterError, check_parameters, declared_parameters, declared_ranges

PARAMETERS_CELL = """\
# parameters
epochs: int = 3            # [1, 1000] training epochs
lr: float = 1e-3           # [0, inf] learning rate
model: str = "ViT-Micro/4"
fused: bool = True
sizes: list[int] = [28, 56]  # [4, 512] image sides; at most 512: the attention exhausts memory
seed = 0                   # no annotation: any type
"""
DEFAULTS = dict(epochs=3, lr=1e-3, model="ViT-Micro/4", fused=True, sizes=[28, 56], seed=0)
CHECK_CELL = "params = check_parameters(In, globals())"


def run(injected: str | None = None, parameters_cell: str = PARAMETERS_CELL) -> dict:
    """Run the cells as Jupyter would (parameters, papermill's injected cell, the check); return the check's result."""
    history, namespace = [""], {}  # IPython's In starts with an empty entry
    for cell in (parameters_cell, injected):
        if cell is not None:
            exec(cell, namespace)
            history.append(cell)
    return check_parameters(history + [CHECK_CELL], namespace)


def injected(**values) -> str:
    """Papermill's injected cell for these values."""
    return "# Parameters\n" + "".join(f"{name} = {value!r}\n" for name, value in values.items())


def test_declarations_are_read_from_the_parameters_cell():
    assert declared_parameters(PARAMETERS_CELL) == dict(
        epochs=int, lr=float, model=str, fused=bool, sizes=list, seed=None
    )


def test_default_run_returns_the_parameters():
    assert run() == DEFAULTS


def test_injected_values_override_the_defaults():
    assert run(injected(epochs=10, model="ViT-B/16", seed="any")) == {
        **DEFAULTS,
        "epochs": 10,
        "model": "ViT-B/16",
        "seed": "any",
    }


@pytest.mark.parametrize("name, hint", [("epoch", "Did you mean 'epochs'?"), ("learning_rate", None)])
def test_unknown_parameter(name, hint):
    with pytest.raises(ParameterError, match=f"unknown parameter '{name}'") as err:
        run(injected(**{name: 5}))
    message = str(err.value)
    assert "epochs (int), lr (float)" in message  # the declared parameters are listed
    assert (hint in message) if hint else ("Did you mean" not in message)
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    "values", [dict(epochs="3"), dict(epochs=2.5), dict(lr="fast"), dict(model=3), dict(fused="yes"), dict(sizes=5)]
)
def test_wrong_type(values):
    ((name, value),) = values.items()
    with pytest.raises(ParameterError, match=rf"parameter '{name}' must be of type \w+, got {value!r}"):
        run(injected(**values))


def test_int_is_accepted_for_float():
    assert run(injected(lr=1))["lr"] == 1


@pytest.mark.parametrize("name", ["epochs", "lr"])
def test_bool_is_rejected_for_numbers(name):
    with pytest.raises(ParameterError, match=f"parameter '{name}' must be of type"):
        run(injected(**{name: True}))


def test_tuple_is_accepted_for_list():
    assert run(injected(sizes=(32, 64)))["sizes"] == (32, 64)


@pytest.mark.parametrize(
    "history",
    [
        [CHECK_CELL],  # the check is the first cell
        ["import vitlib", CHECK_CELL],  # the cell before declares nothing
        ["x = (", CHECK_CELL],  # ... or is not Python
        ["# Parameters\nepochs = 5\n", CHECK_CELL],  # papermill puts its cell first when there is no parameters cell
        [PARAMETERS_CELL, "print(epochs)", CHECK_CELL],  # the check must follow the parameters cell directly
    ],
)
def test_missing_parameters_cell(history):
    with pytest.raises(ParameterError, match="parameters cell"):
        check_parameters(history, dict(DEFAULTS))


def test_unrecorded_history_skips_the_check_with_a_warning():
    """Under nbval cells run with store_history=False, so In is empty and there is nothing to check."""
    with pytest.warns(UserWarning, match="not recorded"):
        assert check_parameters(["", "  "], dict(DEFAULTS)) == {}


@pytest.mark.parametrize(
    "values, shown",
    [
        (dict(epochs=0), r"'epochs' must be in \[1, 1000\], got 0: training epochs"),
        (dict(epochs=2**64), r"'epochs' must be in \[1, 1000\], got 18446744073709551616"),
        (dict(lr=-0.1), r"'lr' must be in \[0, ∞\], got -0.1: learning rate"),
        (
            dict(sizes=[28, 4096]),
            r"'sizes' must be in \[4, 512\], got an element 4096 of \[28, 4096\]: image sides; at "
            r"most 512: the attention exhausts memory",
        ),
    ],
)
def test_out_of_range_values_stop_the_run_with_the_reason(values, shown):
    with pytest.raises(ParameterError, match=shown):
        run(injected(**values))


def test_values_inside_the_ranges_pass_and_ranges_are_read_from_the_comments():
    assert run(injected(epochs=1000, lr=0.0, sizes=[4, 512]))["epochs"] == 1000
    assert set(declared_ranges(PARAMETERS_CELL)) == {"epochs", "lr", "sizes"}
    with pytest.raises(ValueError, match="range \\[5, 1\\] is empty"):
        declared_ranges("n: int = 3  # [5, 1] nothing fits")
