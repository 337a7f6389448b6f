"""Secrets never leave ezpz: one scrubber, by value, on every output.

The end-to-end test sets credentials the ways the issue found them leaking
(a hub URL with user-info, an ``EZPZ_*`` URL with credentials, a log path
with ``?token=``, ``HF_TOKEN`` quoted in a plugin's exception, and a site
variable added with ``EZPZ_REDACT``), really pip-installs a plugin whose
exception quotes them, and greps every output: ``ezpz doctor`` (text, JSON,
verbose), ``ezpz plugins`` (text, JSON), ``rt.explain()`` (text and
``to_dict()``) and every stderr line, warnings included.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, pip_install_target
from ezpz.decisions import Decision
from ezpz.decisions import Explanation
from ezpz.primitives.redact import REDACTED, ScrubFilter, is_secret, redacted_names, scrub, scrub_data

pytestmark = pytest.mark.one_torch  # ezpz's own output: secrets redacted: runs on the pinned torch only (docs/ci.md)

LEAKY = ROOT / "tests" / "plugins" / "leaky" / "ezpz-test-leaky"

SECRETS = {
    "TORCH_HUB_URL": ("https://alice:hunter2-pw@hub.example.com/models", "hunter2-pw"),
    "EZPZ_MIRROR_URL": ("https://bob:s3cr3t-pass@mirror.example.com/simple", "s3cr3t-pass"),
    "NCCL_DEBUG_FILE": ("/tmp/nccl.%h.%p.log?token=qtok-998877&rank=all", "qtok-998877"),
    "HF_TOKEN": ("hf_SuperSecretValue123", "hf_SuperSecretValue123"),
    "SITE_ACCOUNT_ID": ("corp-id-424242", "corp-id-424242"),
}


# -- the scrubber ---------------------------------------------------------------------------------------------------

def test_values_of_secret_variables_go_wherever_they_appear():
    env = {"HF_TOKEN": 'hf_a"b\\c/d e', "EZPZ_DEVICE": "cpu"}
    value = env["HF_TOKEN"]
    for text in (f"token {value} end", json.dumps({"msg": f"x {value}"}), repr(f"x {value}"),
                 "q=hf_a%22b%5Cc%2Fd%20e"):
        assert "hf_a" not in scrub(text, env), text
    assert scrub("device cpu", env) == "device cpu"  # not a secret name: left alone


def test_url_user_info_and_secret_query_parameters():
    text = ("see https://alice:pw9@hub.example.com/x?rev=3&access_token=abc123&X-Amz-Signature=f00d#top and "
            "git+ssh://ghp_tok@github.com/o/r and s3://k?sig=zz")
    out = scrub(text, {})
    assert "pw9" not in out and "alice" not in out and "abc123" not in out and "f00d" not in out
    assert "ghp_tok" not in out and "zz" not in out
    assert f"https://{REDACTED}@hub.example.com/x?rev=3&access_token={REDACTED}&X-Amz-Signature={REDACTED}#top" in out


def test_ezpz_redact_adds_names_and_short_values_are_kept():
    env = {"SITE_ACCOUNT_ID": "corp-id-424242", "EZPZ_REDACT": "SITE_ACCOUNT_ID, OTHER", "GH_TOKEN": "1"}
    assert redacted_names(env) == ["GH_TOKEN", "SITE_ACCOUNT_ID"]
    assert scrub("id corp-id-424242 rank 1", env) == f"id {REDACTED} rank 1"


@pytest.mark.parametrize("name", ["HF_TOKEN", "GITHUB_PAT", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "SSH_PRIVATE_KEY",
                                  "AZURE_STORAGE_SAS", "WANDB_API_KEY", "MY_APP_SECRET", "X_AUTH"])
def test_secret_looking_names(name):
    assert is_secret(name)


def test_explanation_text_and_dict_are_scrubbed(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_ExplainLeak99")
    exp = Explanation(decisions=(Decision(topic="device", chosen="cpu", reason="probe said hf_ExplainLeak99",
                                          details={"url": "https://u:pw77@h.example/x"}),),
                      plugins=({"name": "p", "status": "failed", "stage": "import", "error": "hf_ExplainLeak99"},))
    for out in (str(exp), json.dumps(exp.to_dict())):
        assert "hf_ExplainLeak99" not in out and "pw77" not in out and REDACTED in out


def test_log_events_are_scrubbed(monkeypatch, caplog):
    from ezpz.primitives.logger import get_logger

    monkeypatch.setenv("HF_TOKEN", "hf_LogLeak1234")
    with caplog.at_level(logging.WARNING, logger="ezpz.test"):
        get_logger("ezpz.test").warning("oops", error="bad hf_LogLeak1234", url="https://a:b1234@h/")
    assert "hf_LogLeak1234" not in caplog.text and "b1234" not in caplog.text and REDACTED in caplog.text
    record = logging.LogRecord("torch", logging.WARNING, __file__, 1, "token %s", ("hf_LogLeak1234",), None)
    assert ScrubFilter().filter(record) and "hf_LogLeak1234" not in record.getMessage()


def test_scrub_data_keeps_the_shape():
    assert scrub_data({"a": ["x", ("https://u:p12345@h",)], "n": 3}, {}) == {"a": ["x", (f"https://{REDACTED}@h",)],
                                                                            "n": 3}


# -- every output, end to end ---------------------------------------------------------------------------------------

EXPLAIN = """
import json, ezpz
rt = ezpz.hooks.setup()
print(rt.explain())
print(json.dumps(rt.explain().to_dict()))
"""


@pytest.fixture(scope="module")
def leaky_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("leaky")
    pip_install_target(target, LEAKY)
    return target


def test_no_secret_in_any_output(leaky_dir):
    env = clean_env(PYTHONPATH=str(leaky_dir), EZPZ_REDACT="SITE_ACCOUNT_ID", EZPZ_TRACE_PLUGINS="1",
                    **{name: value for name, (value, _) in SECRETS.items()})
    runs = {
        "doctor": [sys.executable, "-m", "ezpz", "doctor"],
        "doctor --json": [sys.executable, "-m", "ezpz", "doctor", "--json"],
        "-vv doctor": [sys.executable, "-m", "ezpz", "-vv", "doctor"],
        "plugins": [sys.executable, "-m", "ezpz", "plugins"],
        "plugins --json": [sys.executable, "-m", "ezpz", "plugins", "--json"],
        "explain": [sys.executable, "-c", EXPLAIN],
    }
    outputs, stdouts = {}, {}
    for label, argv in runs.items():
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
        stdouts[label] = proc.stdout
        outputs[label] = proc.stdout + proc.stderr
        outputs[f"{label} (stderr)"] = proc.stderr
    for label, text in outputs.items():
        for name, (_, secret) in SECRETS.items():
            assert secret not in text, f"{name}'s secret {secret!r} leaked in {label}:\n{text}"
    # the outputs did carry the places the secrets were in, redacted
    assert "hub.example.com" in outputs["doctor"] and "mirror.example.com" in outputs["doctor --json"]
    assert "test-leaky" in outputs["plugins"] and "hub login failed with token" in outputs["explain"]
    assert "plugin_quarantined" in outputs["explain (stderr)"] and REDACTED in outputs["explain (stderr)"]
    report = json.loads(stdouts["doctor --json"])
    assert report["environment"]["TORCH_HUB_URL"] == f"https://{REDACTED}@hub.example.com/models"
    assert report["environment"]["NCCL_DEBUG_FILE"] == f"/tmp/nccl.%h.%p.log?token={REDACTED}&rank=all"
