"""Signed expiring tokens (qim/wire/tokens.py, qim/wire/devtoken.py): every
refusal the gateway must make, pinned algorithms, two keys during a rotation, and the
development issuer. Pure logic: keys made in memory, times chosen by the test."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import jwt
import pytest

from qim.consts import U63_MAX
from qim.errors import ErrorCode
from qim.wire.devtoken import dev_key_from_env, issue_dev_token, load_dev_key
from qim.wire.tokens import (
    SigningKey,
    TokenRefused,
    TokenVerifier,
    VerifyKey,
    issue_token,
    token_claims,
    token_expiry,
    token_name,
)

KEY, NEXT = SigningKey.generate(), SigningKey.generate("ES256")


def verifier(*keys: SigningKey, **kw) -> TokenVerifier:
    return TokenVerifier([k.verify_key() for k in keys or (KEY,)], kw.pop("audience", "qim"),
                         kw.pop("issuer", "qim-dev"), **kw)


def mint(key: SigningKey = KEY, user: int = 5, device: int = 7, ttl_s: int = 600, **kw) -> str:
    return issue_token(key, kw.pop("tenant", 0), user, device, audience=kw.pop("audience", "qim"),
                       issuer=kw.pop("issuer", "qim-dev"), ttl_s=ttl_s, **kw)


def refusal(token: str, v: TokenVerifier | None = None) -> str:
    with pytest.raises(TokenRefused) as info:
        (v or verifier()).verify(token)
    assert info.value.code == ErrorCode.UNAUTHENTICATED
    assert not token or token not in info.value.message  # the message never echoes the token
    return info.value.reason


def test_a_valid_token_names_tenant_user_device_and_expiry():
    now = int(time.time())
    token = mint(tenant=0xAB, user=U63_MAX, device=3, now=now, ttl_s=60)
    assert verifier().verify(token) == (0xAB, U63_MAX, 3, now + 60, now)
    assert token_claims(token) == (0xAB, U63_MAX, 3) and token_expiry(token) == now + 60
    assert jwt.get_unverified_header(token) == {"alg": "EdDSA", "kid": KEY.kid, "typ": "JWT"}


def test_expired_and_not_yet_valid_are_refused_beyond_the_leeway():
    now = int(time.time())
    assert refusal(mint(now=now - 700, ttl_s=600)) == "expired"
    assert refusal(mint(now=now, not_before=now + 60)) == "not_yet_valid"
    assert refusal(mint(now=now + 60)) == "not_yet_valid"  # issued in the future (iat)
    # within the 5 s leeway a skewed clock is tolerated
    verifier(leeway_s=5).verify(mint(now=now - 603, ttl_s=600))


def test_wrong_key_unknown_kid_audience_issuer_lifetime_and_ids():
    stranger = SigningKey.generate()
    forged = jwt.encode({**jwt.decode(mint(), options={"verify_signature": False})}, stranger.private,
                        algorithm="EdDSA", headers={"kid": KEY.kid})  # our kid, another key's signature
    assert refusal(forged) == "signature"
    assert refusal(mint(stranger)) == "unknown_kid"
    assert refusal(mint(audience="another-deployment")) == "audience"
    assert refusal(mint(issuer="someone-else")) == "issuer"
    assert refusal(mint(ttl_s=86_401)) == "lifetime"
    now = int(time.time())
    claims = {"iss": "qim-dev", "aud": "qim", "sub": str(U63_MAX + 1), "tenant": "0" * 32, "dev": "1",
              "iat": now, "exp": now + 60}
    assert refusal(jwt.encode(claims, KEY.private, algorithm="EdDSA", headers={"kid": KEY.kid})) == "claims"
    del claims["exp"]
    assert refusal(jwt.encode(claims, KEY.private, algorithm="EdDSA", headers={"kid": KEY.kid})) == "claims"
    for garbage in ("", "not-a-token", "a.b.c", "x" * 9000):
        assert refusal(garbage) == "malformed"


def test_algorithms_are_pinned_none_hs256_confusion_and_mismatch_are_refused():
    claims = jwt.decode(mint(), options={"verify_signature": False})
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": KEY.kid})
    assert refusal(unsigned) == "algorithm"
    # algorithm confusion: HS256 keyed with the PUBLIC key's PEM (which anyone has); PyJWT
    # refuses to make such a token, so it is made by hand
    b64 = jwt.utils.base64url_encode
    signing_input = (b64(json.dumps({"alg": "HS256", "kid": KEY.kid, "typ": "JWT"}).encode()) + b"."
                     + b64(json.dumps(claims).encode()))
    mac = hmac.new(KEY.verify_key().public_pem(), signing_input, hashlib.sha256).digest()
    assert refusal((signing_input + b"." + b64(mac)).decode()) == "algorithm"
    # an ES256 signature presented under the Ed25519 key's kid
    mismatched = jwt.encode(claims, NEXT.private, algorithm="ES256", headers={"kid": KEY.kid})
    assert refusal(mismatched, verifier(KEY, NEXT)) == "algorithm"


def test_two_keys_are_valid_at_once_during_a_rotation():
    both = verifier(KEY, NEXT)
    assert both.verify(mint(KEY, user=1)).user_id == 1
    assert both.verify(mint(NEXT, user=2)).user_id == 2
    assert refusal(mint(NEXT), verifier(KEY)) == "unknown_kid"  # before the new key is listed
    with pytest.raises(ValueError, match="same kid"):
        TokenVerifier([KEY.verify_key(), KEY.verify_key()], "qim", "qim-dev")


def test_keys_round_trip_through_pem_and_private_keys_are_not_public_keys(tmp_path):
    assert VerifyKey.from_pem(KEY.verify_key().public_pem()).kid == KEY.kid
    assert SigningKey.from_pem(NEXT.private_pem()).kid == NEXT.kid
    with pytest.raises(ValueError, match="private key"):
        VerifyKey.from_pem(KEY.private_pem())
    assert "BEGIN" not in repr(KEY) and KEY.kid in repr(KEY)


def test_dev_tokens_sign_with_the_dev_key_file_and_refuse_an_hmac_secret(tmp_path):
    path = tmp_path / "dev_token_key.pem"
    path.write_bytes(KEY.private_pem())
    token = issue_dev_token(str(path), 0, 5, 9, ttl_s=120)
    assert verifier().verify(token)[:3] == (0, 5, 9)
    assert token_expiry(token) - int(time.time()) in range(118, 121)
    assert load_dev_key(path) is load_dev_key(str(path))  # read once per file version
    with pytest.raises(TypeError, match="not an HMAC secret"):
        issue_dev_token(b"old-secret", 0, 5, 9)
    with pytest.raises(ValueError, match="QIM_DEV_TOKEN_KEY"):
        dev_key_from_env(None, {})
    with pytest.raises(ValueError, match="cannot read the development token key"):
        dev_key_from_env(str(tmp_path / "missing.pem"), {})
    with pytest.raises(ValueError):
        issue_dev_token(KEY, 0, 0, 9)  # user 0
    with pytest.raises(ValueError):
        token_claims("dev1.00000000000000000000000000000000.5.9.ab")  # the old HMAC form


def test_a_display_name_claim_is_checked_and_returned():
    key = KEY
    named = issue_token(key, 0, 5, 1, audience="qim", issuer="qim-dev", ttl_s=60, name=" Zoë   李 ")
    assert verifier().verify(named)[:3] == (0, 5, 1) and token_name(named) == "Zoë 李"
    for bad in ("\x1b[31m", "a\u202eb", "名" * 22):
        with pytest.raises(ValueError):
            issue_token(key, 0, 5, 1, audience="qim", issuer="qim-dev", ttl_s=60, name=bad)
    forged = jwt.encode({"iss": "qim-dev", "aud": "qim", "sub": "5", "tenant": "0" * 32, "dev": "1",
                         "iat": int(time.time()), "exp": int(time.time()) + 60, "name": "bell\x07"},
                        key.private, algorithm=key.alg, headers={"kid": key.kid})
    assert refusal(forged) == "claims"
