"""The MediaService addresses qim.sdk is given (qim/sdk/media_http.py): one URL, a
comma-separated list ($QIM_MEDIA_URL) or a sequence; bad ones refused with a clear
ValueError; and the Range header of each byte range a download may ask for."""

from __future__ import annotations

import pytest

from qim.sdk.media_http import MediaNodes, parse_media_urls
from qim.sdk.media_parts import range_header


def test_one_url_a_list_or_a_sequence() -> None:
    assert parse_media_urls("http://a:1/") == ("http://a:1",)
    assert parse_media_urls(" http://a:1 , https://b:2,") == ("http://a:1", "https://b:2")
    assert MediaNodes(["http://a:1", "http://b:2"]).current == "http://a:1"


@pytest.mark.parametrize(
    ("urls", "needle"),
    [("", "media_url"), (" , ", "media_url"), ("a:1", "not http"), ("http://a:1,http://a:1/", "twice")],
)
def test_bad_urls_are_refused(urls: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_media_urls(urls)


def test_range_headers() -> None:
    assert range_header((0, 99)) == "bytes=0-99"
    assert range_header((100, None)) == "bytes=100-"
    assert range_header((None, 500)) == "bytes=-500"
    for bad in [(None, None), (5, 4), (-1, 3), (None, 0)]:
        with pytest.raises(ValueError, match="not a byte range"):
            range_header(bad)
