import pytest


@pytest.fixture
def anyio_backend() -> str:
    # Async tests run on asyncio only: the Agents SDK is asyncio-based.
    return "asyncio"
