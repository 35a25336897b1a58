"""Custom instructions on the account page, at a laptop's and a phone's width: typed with a count of characters,
saved with a word that they apply from the next message, read back after a reload; more than the bound cannot be
saved and says by how much."""

from playwright.sync_api import expect

from tests.web.conftest import log_in

WORDS = "Answer in French.\nKeep it short."


def test_instructions_are_saved_on_the_account_page_and_kept_across_a_reload(sized_page, user):
    page = sized_page
    log_in(page, user)
    page.goto("/account/")
    text = page.get_by_label("Your instructions to the agent")
    save = page.get_by_role("button", name="Save instructions")
    expect(text).to_be_enabled()
    expect(text).to_have_value("")
    expect(page.locator("#instructions-count")).to_have_text("0 / 1,500 characters")
    expect(save).to_be_disabled()  # nothing changed yet

    text.fill(WORDS)
    expect(page.locator("#instructions-count")).to_have_text("32 / 1,500 characters")
    save.click()
    expect(page.get_by_role("status").filter(has_text="apply from your next message")).to_be_visible()
    expect(save).to_be_disabled()

    page.reload()
    expect(page.get_by_label("Your instructions to the agent")).to_have_value(WORDS)
    expect(page.locator("#instructions-about")).to_contain_text("apply from your next message")


def test_more_than_the_bound_is_not_saved_and_says_by_how_much(sized_page, user):
    page = sized_page
    log_in(page, user)
    page.goto("/account/")
    text = page.get_by_label("Your instructions to the agent")
    expect(text).to_be_enabled()

    text.fill("x" * 1502)

    expect(page.locator("#instructions-count")).to_have_text("1,502 / 1,500 characters: 2 too many")
    expect(text).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("button", name="Save instructions")).to_be_disabled()
    text.fill("x" * 1500)
    expect(page.get_by_role("button", name="Save instructions")).to_be_enabled()
