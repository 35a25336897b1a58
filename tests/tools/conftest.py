import pytest

from tools.registry import Approval


@pytest.fixture
def save_note_needs_approval(settings):
    settings.IMPO_TOOL_APPROVAL = {"save_note": Approval.ALWAYS}
