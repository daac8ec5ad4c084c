import pytest

import tritonbuild.core.stores  # noqa: F401  (registers the stores: their drivers name their secrets)
from tritonbuild.core.secrets import has_userinfo, redact


@pytest.mark.parametrize(
    "text,secret",
    [
        ("s3://AKIAKEY:wJalrSECRET@bucket/p", "wJalrSECRET"),
        ("s3://AKIAKEY:wJalrSECRET@bucket/p", "AKIAKEY"),
        ("error reaching http://user:hunter2pass@triton:8000/v2", "hunter2pass"),
        (
            "https://acct.blob.core.windows.net/c/x?sv=2022-11-02&se=2026&sp=r&sig=AbCdSaS%2Bsig%3D",
            "AbCdSaS",
        ),
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIAX%2F2026&X-Amz-Signature=deadbeef01",
            "deadbeef01",
        ),
        ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAX%2F2026&X-Amz-Date=1", "AKIAX"),
        ("https://h/k?X-Amz-Security-Token=FQoGZXIvYXdzE1", "FQoGZXIvYXdzE1"),
        ("https://h/k?AWSAccessKeyId=AKIAOLD1&Signature=oldsig123&Expires=1", "oldsig123"),
        ("https://storage.googleapis.com/b/o?X-Goog-Signature=0a1b2c3d4e", "0a1b2c3d4e"),
        ("https://h/x?access_token=ya29.tok", "ya29.tok"),
    ],
)
def test_redact_removes_the_secret(text, secret):
    assert secret not in redact(text)


def test_redact_keeps_what_is_not_secret():
    assert redact("s3://bucket/models/prod") == "s3://bucket/models/prod"
    assert (
        redact("http://127.0.0.1:8000/v2/repository/models/doubler/load")
        == "http://127.0.0.1:8000/v2/repository/models/doubler/load"
    )
    assert redact("s3://K:S@bucket/p") == "s3://***@bucket/p"
    assert redact("https://h/k?X-Amz-Date=2026&sig=abc") == "https://h/k?X-Amz-Date=2026&sig=***"


def test_redact_removes_secret_env_values(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "verysecretvalue")
    assert redact("denied for verysecretvalue") == "denied for ***"


def test_has_userinfo():
    assert has_userinfo("s3://KEY:SECRET@bucket/p") and has_userinfo("http://token@host:8000")
    assert not has_userinfo("s3://bucket/p") and not has_userinfo("file:///a/b@c")


def test_the_report_records_a_server_url_without_its_credentials():
    from tritonbuild.verify.routes import route_for

    class M:
        depends_on, target, backend, llm = [], "cpu", "python", None

    route, detail = route_for(M(), "http://ci:s3cr3tPW@triton.internal:8000")
    assert route == "live-server" and "s3cr3tPW" not in detail and "triton.internal:8000" in detail
