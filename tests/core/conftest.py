"""Fixtures for qim._core: every module fixture is parametrised over the implementations.

Unless QIM_PUREPYTHON=1, a compiled module that cannot be imported (or is not an
extension module) FAILS every test here: a broken build must never fall back silently.
"""

from __future__ import annotations

import pytest

from ._impls import COMPILED_ERRORS, IMPL_IDS, PURE_MODE, module


@pytest.fixture(autouse=True, scope="session")
def _compiled_core_loaded() -> None:
    if COMPILED_ERRORS and not PURE_MODE:
        pytest.fail(
            "compiled qim._core modules missing (build with `pip install -e . "
            f"--no-build-isolation`, or set QIM_PUREPYTHON=1): {COMPILED_ERRORS}",
            pytrace=False,
        )


@pytest.fixture(params=IMPL_IDS)
def impl(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def frame(impl: str):
    return module("frame", impl)


@pytest.fixture
def mailbox_seq(impl: str):
    return module("mailbox_seq", impl)


@pytest.fixture
def watermark(impl: str):
    return module("watermark", impl)


@pytest.fixture
def eventgroup(impl: str):
    return module("eventgroup", impl)


@pytest.fixture
def ids(impl: str):
    return module("ids", impl)


@pytest.fixture
def sendkey(impl: str):
    return module("sendkey", impl)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under QIM_PUREPYTHON=1 the compiled side of a differential test is absent by
    design: deselect those tests (reported as deselected, never as skipped or passed)."""
    if not PURE_MODE:
        return
    keep = [i for i in items if i.get_closest_marker("differential") is None]
    dropped = [i for i in items if i.get_closest_marker("differential") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
