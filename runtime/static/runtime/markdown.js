// Agent text as Markdown, made safe: marked parses it (raw HTML included, as Markdown allows) and DOMPurify
// then keeps only inert formatting. No element may run script: no event handlers, no <script>/<style>, no
// images or frames (which fetch on their own), and only http(s)/mailto links, which open in a new tab.
(function () {
  "use strict";

  const SAFE_LINK = /^(?:https?:|mailto:|#|\/(?!\/))/i;
  const CONFIG = {
    USE_PROFILE: { html: true },
    FORBID_TAGS: ["img", "picture", "video", "audio", "source", "iframe", "style", "form", "input", "button", "svg", "math"],
    FORBID_ATTR: ["style", "class", "id"],
    ALLOW_DATA_ATTR: false,
  };

  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName !== "A") return;
    const href = node.getAttribute("href") || "";
    if (!SAFE_LINK.test(href.trim())) {
      node.removeAttribute("href");
      return;
    }
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  });

  function render(text) {
    const html = marked.parse(text, { gfm: true, breaks: true, async: false });
    return DOMPurify.sanitize(html, { ...CONFIG, RETURN_DOM_FRAGMENT: true });
  }

  window.ImpoMarkdown = { render };
})();
