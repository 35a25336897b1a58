// Agent text as Markdown, made safe: marked parses it (raw HTML included, as Markdown allows) and DOMPurify
// then keeps only inert formatting. No element may run script: no event handlers, no <script>/<style>, no
// images or frames (which fetch on their own), and only http(s)/mailto links, which open in a new tab.
// Code blocks are coloured by highlight.js (in the language their fence names) from their text after sanitising
// (its output is that text, escaped, in <span class="hljs-…">), and each gets a copy button.
(function () {
  "use strict";

  const SAFE_LINK = /^(?:https?:|mailto:|#|\/(?!\/))/i;
  const CONFIG = {
    USE_PROFILE: { html: true },
    FORBID_TAGS: ["img", "picture", "video", "audio", "source", "iframe", "style", "form", "input", "button", "svg", "math"],
    FORBID_ATTR: ["style", "class", "id"],
    ALLOW_DATA_ATTR: false,
  };

  const LANGUAGE_CLASS = /^language-[\w+#-]{1,32}$/;

  // The one class kept: a fenced block's language (```python), which picks the highlighter's grammar.
  DOMPurify.addHook("uponSanitizeAttribute", (node, data) => {
    if (node.tagName === "CODE" && data.attrName === "class" && LANGUAGE_CLASS.test(data.attrValue)) data.forceKeepAttr = true;
  });

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

  // Colours the block in the language its fence named, and answers the label: that name, or "text" for a fence
  // that named none. highlight.js's guess is not used: on a few lines of prose or a log it says "css" or "ini".
  function highlight(code) {
    const named = (code.className.match(LANGUAGE_CLASS) || [""])[0].replace("language-", "");
    code.classList.add("hljs");
    if (!named) return "text";
    if (hljs.getLanguage(named)) code.innerHTML = hljs.highlight(code.textContent, { language: named }).value;
    return named;
  }

  function render(text) {
    const html = marked.parse(text, { gfm: true, breaks: true, async: false });
    const fragment = DOMPurify.sanitize(html, { ...CONFIG, RETURN_DOM_FRAGMENT: true });
    // Each block gets a head line with its language and the copy button, so neither covers the code.
    for (const code of fragment.querySelectorAll("pre > code")) {
      const language = highlight(code);
      const block = document.createElement("div");
      block.className = "code-block";
      const head = document.createElement("div");
      head.className = "code-head";
      const label = document.createElement("span");
      label.className = "code-language";
      label.textContent = language;
      head.append(label, ImpoUi.copyButton(`Copy ${language} code`, () => code.textContent));
      const pre = code.parentElement;
      pre.replaceWith(block);
      block.append(head, pre);
    }
    return fragment;
  }

  window.ImpoMarkdown = { render };
})();
