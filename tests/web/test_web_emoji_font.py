"""The page draws emoji in colour (what a newcomer saw: a plain ☕ came out monochrome).

system-ui (DejaVu Sans on Debian) has monochrome glyphs for ☕, ❤ and 😀 and, named
first, won over "Noto Color Emoji"; style.css now names a colour emoji font first for
the emoji code points only (@font-face unicode-range), so digits and CJK keep theirs.
A joined sequence (👨‍👩‍👧: three people and two U+200D) is one colour glyph, the family; it
drew as three people while the joiner was outside that range.
Chromium says which platform font drew each node's text (DevTools CSS domain)."""

from __future__ import annotations


def fonts_of(page, selector: str) -> dict[str, int]:
    """{platform font family: glyphs} Chromium used for the text of `selector`."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    used = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return {f["familyName"]: f["glyphCount"] for f in used}


def test_emoji_use_the_colour_font_and_digits_and_chinese_do_not(browser, web_url):
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto(web_url)
        page.wait_for_load_state("load")
        page.evaluate("""() => { for (const [id, text] of [["e", "☕❤😀"], ["d", "123 #"], ["c", "你好"],
                ["f", "👨\u200d👩\u200d👧"], ["j", "a\u200db"]]) {
            const el = document.createElement("span"); el.id = id; el.textContent = text; document.body.append(el); } }""")
        page.evaluate("() => document.fonts.ready")
        emoji, digits, chinese = fonts_of(page, "#e"), fonts_of(page, "#d"), fonts_of(page, "#c")
        assert set(emoji) == {"Noto Color Emoji"}, emoji  # all three in colour, none monochrome
        assert fonts_of(page, "#f") == {"Noto Color Emoji": 1}  # the family is one glyph, not three people
        assert "Noto Color Emoji" not in fonts_of(page, "#j")  # a joiner between letters keeps their font
        assert "Noto Color Emoji" not in digits, digits  # keycap bases stay text
        assert "Noto Color Emoji" not in chinese and any("CJK" in f for f in chinese), chinese
    finally:
        ctx.close()
