"""gpu-check's hub check: every pinned dataset is asked for at its revision, a revision
that is gone fails with the dataset's name, and an offline machine verifies nothing."""

import huggingface_hub
import pytest
from huggingface_hub.utils import RevisionNotFoundError

from tools import gpu_check


class FakeHub:
    """Answers dataset_info like the hub: a sha, or an error for the revisions in gone."""

    asked: list = []

    def __init__(self, gone=(), offline=False):
        self.gone, self.offline = gone, offline

    def __call__(self):
        return self

    def dataset_info(self, name, revision=None):
        FakeHub.asked.append((name, revision))
        if self.offline:
            raise OSError("no network")
        if name in self.gone:
            # the real class wants an HTTP response; its message is all the check reads
            error = RevisionNotFoundError.__new__(RevisionNotFoundError)
            Exception.__init__(error, f"{name}@{revision} not found")
            raise error
        return type("Info", (), {"sha": revision or "f" * 40})()


@pytest.fixture(autouse=True)
def fresh_questions():
    FakeHub.asked = []


def test_every_pin_is_asked_for_at_its_revision(monkeypatch):
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub())
    result = gpu_check.hub_check()
    assert result["ok"] is True
    assert FakeHub.asked == gpu_check.pinned_hub_datasets()
    assert ("rajpurkar/squad", "7b6d24c440a36b6815f21b70d25016731768db1f") in FakeHub.asked
    assert ("Salesforce/wikitext", "b08601e04326c79dfdd32d625aee71d232d685c3") in FakeHub.asked


def test_a_revision_gone_fails_and_names_the_dataset(monkeypatch):
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub(gone={"rajpurkar/squad"}))
    result = gpu_check.hub_check()
    assert result["ok"] is False
    assert "rajpurkar/squad at 7b6d24c4" in result["error"]


def test_offline_verifies_nothing_and_fails_nothing(monkeypatch):
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub(offline=True))
    result = gpu_check.hub_check()
    assert result["ok"] is None and "cannot be reached" in result["skipped"]
